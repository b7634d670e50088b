//! The handler side of a generation: queue a job on the engine thread, then either stream its
//! events or collect them into one answer. Also the usage and timing objects of responses.

use std::time::Instant;

use serde_json::{json, Value};
use strata_engine::sampling::SamplingParams;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::error::ApiError;
use crate::worker::{Engine, Event, Job, Stats, TokenLogprob};

/// What to generate after a prompt.
#[derive(Debug, Clone)]
pub struct GenerationSpec {
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Sampler settings.
    pub params: SamplingParams,
    /// Tokens at most.
    pub max_tokens: usize,
    /// Stop strings.
    pub stop: Vec<String>,
    /// `Some(n)`: log-probabilities with `n` alternatives per token.
    pub logprobs: Option<usize>,
}

/// Queues `spec` for `route` (named in the request's log line); the receiver yields the job's
/// events. Dropping it cancels the job.
pub fn submit(
    engine: &Engine,
    spec: GenerationSpec,
    route: &'static str,
) -> Result<UnboundedReceiver<Event>, ApiError> {
    let (tx, rx) = unbounded_channel();
    engine.submit(Job {
        prompt: spec.prompt,
        params: spec.params,
        max_tokens: spec.max_tokens,
        stop: spec.stop,
        logprobs: spec.logprobs,
        events: tx,
        enqueued: Instant::now(),
        route,
    })?;
    Ok(rx)
}

/// A whole answer.
#[derive(Debug)]
pub struct Collected {
    /// The text (stop strings removed).
    pub text: String,
    /// Per-token log-probabilities, if asked for.
    pub logprobs: Vec<TokenLogprob>,
    /// Counts, timings, finish reason.
    pub stats: Stats,
}

/// Waits for the job to finish and gathers its text.
pub async fn collect(mut rx: UnboundedReceiver<Event>) -> Result<Collected, ApiError> {
    let mut text = String::new();
    let mut logprobs = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Text {
                text: t,
                logprobs: lp,
            } => {
                text.push_str(&t);
                logprobs.extend(lp);
            }
            Event::Done(stats) => {
                return Ok(Collected {
                    text,
                    logprobs,
                    stats,
                })
            }
            Event::Failed(e) => return Err(e),
        }
    }
    Err(ApiError::internal("the engine dropped the request"))
}

/// OpenAI `usage`, with the reused prefix as `prompt_tokens_details.cached_tokens`.
pub fn usage(s: &Stats) -> Value {
    json!({
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.generated_tokens,
        "total_tokens": s.prompt_tokens + s.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens},
    })
}

/// llama.cpp-style `timings` (prompt_n counts only the prompt tokens actually computed).
pub fn timings(s: &Stats) -> Value {
    let prompt_n = s.prompt_tokens - s.cached_tokens;
    let prompt_ms = s.prompt_time.as_secs_f64() * 1e3;
    let predicted_ms = s.decode_time.as_secs_f64() * 1e3;
    let per = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
    json!({
        "cache_n": s.cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": per(prompt_ms, prompt_n),
        "prompt_per_second": s.prompt_tps(),
        "predicted_n": s.generated_tokens,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": per(predicted_ms, s.generated_tokens),
        "predicted_per_second": s.decode_tps(),
    })
}

/// OpenAI chat `logprobs.content` entries.
pub fn chat_logprobs(lps: &[TokenLogprob]) -> Value {
    let entries: Vec<Value> = lps
        .iter()
        .map(|t| {
            let top: Vec<Value> = t
                .top
                .iter()
                .map(|(tok, b, lp)| json!({"token": tok, "logprob": lp, "bytes": b}))
                .collect();
            json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": top})
        })
        .collect();
    json!({"content": entries})
}
