//! The engine thread: one generation at a time, in arrival order, on a dedicated OS thread
//! (the engine is synchronous and CPU-bound, so it never runs inside the async runtime).
//!
//! Handlers send a [`Job`] and read [`Event`]s from its channel. A job whose receiver is gone
//! (the client disconnected) is skipped if still queued and stopped at its next token or
//! prompt batch if running. The thread keeps one [`Session`] across jobs, so a request that
//! extends the previous conversation reuses its cached prefix.

pub mod generate;
pub mod logprobs;
pub mod stop;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_engine::sampling::SamplingParams;
use strata_engine::{KvType, Model, Session};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::metrics::Metrics;
pub use logprobs::TokenLogprob;

/// One generation request for the engine thread.
#[derive(Debug)]
pub struct Job {
    /// Prompt token ids (non-empty, shorter than the context).
    pub prompt: Vec<u32>,
    /// Sampler settings.
    pub params: SamplingParams,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Stop strings (the answer ends before the first match).
    pub stop: Vec<String>,
    /// `Some(n)`: report each token's log-probability with the `n` best alternatives.
    pub logprobs: Option<usize>,
    /// Where events go; dropping the receiver cancels the job.
    pub events: mpsc::UnboundedSender<Event>,
    /// When the job was queued (for queue time and time to first token).
    pub enqueued: Instant,
    /// The route that asked (for the request's log line).
    pub route: &'static str,
}

/// Why an answer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn (an end-of-generation token).
    EndOfGeneration,
    /// `max_tokens` were generated.
    Length,
    /// A stop string matched (the string).
    Stop(String),
    /// The context is full.
    ContextFull,
    /// The client went away.
    Cancelled,
}

/// Counts and timings of one finished job.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens reused from the previous conversation (not recomputed).
    pub cached_tokens: usize,
    /// Time spent reading the prompt.
    pub prompt_time: Duration,
    /// Tokens generated (the end-of-generation token not counted).
    pub generated_tokens: usize,
    /// Time spent generating.
    pub decode_time: Duration,
    /// Time spent waiting in the queue.
    pub queue_time: Duration,
    /// From queueing to the first generated token, if there was one.
    pub first_token: Option<Duration>,
    /// Why it ended.
    pub finish: Finish,
}

impl Stats {
    /// Prompt tokens actually computed per second.
    pub fn prompt_tps(&self) -> f64 {
        (self.prompt_tokens - self.cached_tokens) as f64 / self.prompt_time.as_secs_f64().max(1e-9)
    }

    /// Generated tokens per second.
    pub fn decode_tps(&self) -> f64 {
        self.generated_tokens as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// What a running job reports.
#[allow(missing_docs)] // Variant docs describe their fields.
#[derive(Debug)]
pub enum Event {
    /// More answer text (stop strings already removed) and, if asked, the log-probabilities
    /// of the tokens that produced it.
    Text {
        text: String,
        logprobs: Vec<TokenLogprob>,
    },
    /// The job finished.
    Done(Stats),
    /// The job failed; the engine goes on with the next one.
    Failed(ApiError),
}

/// A handle to the engine thread (cheap to share behind an `Arc`).
pub struct Engine {
    model: Arc<Model>,
    jobs: std_mpsc::Sender<Job>,
    n_ctx: usize,
    metrics: Arc<Metrics>,
}

impl Engine {
    /// Starts the engine thread for `model` (called `model_id` in log lines) with one session
    /// of `n_ctx` positions.
    pub fn start(
        model: Arc<Model>,
        model_id: &str,
        n_ctx: usize,
        kv: KvType,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Engine> {
        let (tx, rx) = std_mpsc::channel::<Job>();
        let (m, mt) = (model.clone(), metrics.clone());
        let id = model_id.to_string();
        std::thread::Builder::new()
            .name("strata-engine".into())
            .spawn(move || worker_loop(&m, &id, rx, n_ctx, kv, &mt))?;
        Ok(Engine {
            model,
            jobs: tx,
            n_ctx,
            metrics,
        })
    }

    /// The loaded model (tokenizer, template, configuration).
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Context size of the session, in tokens.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Queues `job`; events arrive on its channel. Errors only if the engine thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        self.metrics.queued();
        self.jobs.send(job).map_err(|_| {
            self.metrics.dequeued();
            ApiError::internal("the engine thread has stopped")
        })
    }
}

fn worker_loop(
    model: &Model,
    model_id: &str,
    jobs: std_mpsc::Receiver<Job>,
    n_ctx: usize,
    kv: KvType,
    metrics: &Metrics,
) {
    let mut session: Session = model.new_session(n_ctx, kv);
    for job in jobs {
        metrics.dequeued();
        let queue_time = job.enqueued.elapsed();
        if job.events.is_closed() {
            metrics.finished(&Finish::Cancelled);
            crate::request_log::cancelled(job.route, model_id, queue_time);
            continue;
        }
        metrics.set_running(1);
        let result = catch_unwind(AssertUnwindSafe(|| {
            generate::run(model, &mut session, &job)
        }));
        let event = match result {
            Ok(Ok(mut stats)) => {
                stats.queue_time = queue_time;
                metrics.record(&stats);
                crate::request_log::generation(job.route, model_id, &stats);
                Event::Done(stats)
            }
            Ok(Err(e)) => {
                metrics.failed();
                crate::request_log::failed(job.route, model_id, &e);
                Event::Failed(e)
            }
            Err(_) => {
                tracing::error!("generation panicked; the session is reset and the server goes on");
                session = model.new_session(n_ctx, kv);
                metrics.failed();
                let e = ApiError::internal("internal error during generation (the server goes on)");
                crate::request_log::failed(job.route, model_id, &e);
                Event::Failed(e)
            }
        };
        let _ = job.events.send(event);
        metrics.set_running(0);
    }
}
