//! One job on the engine's generation loop (`strata_engine::generate::generate_with`): the
//! observer here adds what serving needs — cancellation when the client is gone, stop
//! strings, log-probabilities and time to first token.

use std::ops::ControlFlow;

use strata_engine::generate::{generate_with, FinishReason, Observer};
use strata_engine::sampling::Sampler;
use strata_engine::{EngineError, Model, Session};

use super::logprobs::{logprobs, TokenLogprob};
use super::stop::{StopCheck, StopMatcher};
use super::{Event, Finish, Job, Stats};
use crate::error::ApiError;

fn engine_error(e: EngineError) -> ApiError {
    match e {
        EngineError::ContextFull { .. }
        | EngineError::InvalidToken { .. }
        | EngineError::EmptyPrompt => ApiError::bad_request(e.to_string()),
        other => ApiError::internal(format!("generation failed: {other}")),
    }
}

fn token_logprob(model: &Model, logits: &[f32], tok: u32, n: usize) -> TokenLogprob {
    let piece = |id: u32| {
        let b = model.tokenizer().token_to_piece(id).to_vec();
        (String::from_utf8_lossy(&b).into_owned(), b)
    };
    let (lp, top) = logprobs(logits, tok, n);
    let (token, bytes) = piece(tok);
    let top = top.into_iter().map(|(id, l)| {
        let (t, b) = piece(id);
        (t, b, l)
    });
    TokenLogprob {
        token,
        bytes,
        logprob: lp,
        top: top.collect(),
    }
}

/// Streams a job's tokens to its channel.
struct JobObserver<'a> {
    model: &'a Model,
    job: &'a Job,
    stop: StopMatcher,
    /// The stop string that ended the answer, if one did.
    stopped_by: Option<String>,
    first_token: Option<std::time::Duration>,
}

impl JobObserver<'_> {
    fn send(&self, text: String, logprobs: Vec<TokenLogprob>) -> bool {
        self.job.events.send(Event::Text { text, logprobs }).is_ok()
    }
}

impl Observer for JobObserver<'_> {
    fn before_prompt_batch(&mut self) -> ControlFlow<()> {
        if self.job.events.is_closed() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn on_token(&mut self, id: u32, text: &str, logits: &[f32]) -> ControlFlow<()> {
        self.first_token
            .get_or_insert_with(|| self.job.enqueued.elapsed());
        let lp: Vec<TokenLogprob> = self
            .job
            .logprobs
            .map(|n| token_logprob(self.model, logits, id, n))
            .into_iter()
            .collect();
        match self.stop.push(text) {
            StopCheck::Emit(text) => {
                if self.send(text, lp) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            }
            StopCheck::Stopped(text, s) => {
                self.send(text, lp);
                self.stopped_by = Some(s);
                ControlFlow::Break(())
            }
        }
    }

    fn on_finish(&mut self, tail: &str) {
        let rest = match self.stop.push(tail) {
            StopCheck::Emit(t) => t + &self.stop.finish(),
            StopCheck::Stopped(t, s) => {
                self.stopped_by = Some(s);
                t
            }
        };
        if !rest.is_empty() {
            self.send(rest, Vec::new());
        }
    }
}

/// Runs `job` on `session`. Errors: a prompt that is empty, does not fit, or holds an
/// unknown token id (400), an engine failure (500).
pub fn run(model: &Model, session: &mut Session, job: &Job) -> Result<Stats, ApiError> {
    let prompt = &job.prompt;
    if prompt.is_empty() {
        return Err(ApiError::bad_request("the prompt is empty"));
    }
    if prompt.len() >= session.n_ctx() {
        return Err(ApiError::bad_request(format!(
            "the prompt has {} tokens but the context holds {}",
            prompt.len(),
            session.n_ctx()
        )));
    }
    let mut sampler = Sampler::new(job.params.clone());
    let mut observer = JobObserver {
        model,
        job,
        stop: StopMatcher::new(&job.stop),
        stopped_by: None,
        first_token: None,
    };
    let s = generate_with(
        model,
        session,
        prompt,
        job.max_tokens,
        &mut sampler,
        &mut observer,
    )
    .map_err(engine_error)?;
    let finish = match (s.finish, observer.stopped_by) {
        (_, Some(stop)) => Finish::Stop(stop),
        (FinishReason::EndOfGeneration, None) => Finish::EndOfGeneration,
        (FinishReason::Length, None) => Finish::Length,
        (FinishReason::ContextFull, None) => Finish::ContextFull,
        (FinishReason::Stopped | FinishReason::Cancelled, None) => Finish::Cancelled,
    };
    Ok(Stats {
        prompt_tokens: s.prompt_tokens,
        cached_tokens: s.cached_tokens,
        prompt_time: s.prompt_time,
        generated_tokens: s.generated_tokens,
        decode_time: s.decode_time,
        queue_time: Default::default(),
        first_token: observer.first_token,
        finish,
    })
}
