//! The generation loop of one job: reuse the session's longest common prefix with the prompt,
//! read the rest of the prompt in batches, then sample and stream tokens. It mirrors
//! `strata_engine::generate::generate` (same prefix reuse, batching and sampling, so greedy
//! output is identical) and adds what serving needs: cancellation between prompt batches and
//! tokens, stop strings, and log-probabilities.

use std::time::Instant;

use strata_engine::model::UBATCH;
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
    let common = session
        .tokens()
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    let cached = common.min(prompt.len() - 1);
    session.truncate(cached);
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        cached_tokens: cached,
        prompt_time: Default::default(),
        generated_tokens: 0,
        decode_time: Default::default(),
        queue_time: Default::default(),
        first_token: None,
        finish: Finish::Cancelled,
    };
    let t0 = Instant::now();
    for batch in prompt[cached..].chunks(UBATCH) {
        if job.events.is_closed() {
            stats.prompt_time = t0.elapsed();
            return Ok(stats);
        }
        model.forward(session, batch).map_err(engine_error)?;
    }
    stats.prompt_time = t0.elapsed();

    let tok = model.tokenizer();
    let mut history = prompt.clone();
    let mut decoder = tok.stream_decoder();
    let mut sampler = Sampler::new(job.params.clone());
    let mut stop = StopMatcher::new(&job.stop);
    let send = |text: String, logprobs: Vec<TokenLogprob>| {
        job.events.send(Event::Text { text, logprobs }).is_ok()
    };
    let t1 = Instant::now();
    let finish = loop {
        if stats.generated_tokens >= job.max_tokens {
            break Finish::Length;
        }
        let id = sampler.sample(session.logits(), &history);
        if tok.is_eog(id) {
            break Finish::EndOfGeneration;
        }
        stats.generated_tokens += 1;
        history.push(id);
        stats
            .first_token
            .get_or_insert_with(|| job.enqueued.elapsed());
        let lp: Vec<TokenLogprob> = job
            .logprobs
            .map(|n| token_logprob(model, session.logits(), id, n))
            .into_iter()
            .collect();
        match stop.push(&decoder.push(id)) {
            StopCheck::Emit(text) => {
                if !send(text, lp) {
                    break Finish::Cancelled;
                }
            }
            StopCheck::Stopped(text, s) => {
                send(text, lp);
                break Finish::Stop(s);
            }
        }
        if stats.generated_tokens >= job.max_tokens {
            break Finish::Length;
        }
        if session.pos() + 1 > session.n_ctx() {
            break Finish::ContextFull;
        }
        model.forward(session, &[id]).map_err(engine_error)?;
    };
    stats.decode_time = t1.elapsed();
    if !matches!(finish, Finish::Stop(_) | Finish::Cancelled) {
        let rest = match stop.push(&decoder.finish()) {
            StopCheck::Emit(t) => t + &stop.finish(),
            StopCheck::Stopped(t, _) => t,
        };
        if !rest.is_empty() {
            send(rest, Vec::new());
        }
    }
    stats.finish = finish;
    Ok(stats)
}
