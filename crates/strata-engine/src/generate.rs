//! The generation loop: prompt → forward → sample → stream text, until an end-of-generation
//! token, a stop string, or the token limit.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::error::EngineError;
use crate::model::Model;
use crate::sampling::Sampler;
use crate::session::Session;

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// `max_tokens` were produced.
    Length,
    /// The callback asked to stop (a stop string, a disconnected client).
    Stopped,
    /// The context filled up.
    ContextFull,
}

/// Counts and timings of one generation.
#[derive(Clone, Debug)]
pub struct GenerationStats {
    /// Prompt tokens in the request.
    pub prompt_tokens: usize,
    /// Prompt tokens served from the session's cache (not recomputed).
    pub cached_tokens: usize,
    pub prompt_time: Duration,
    /// Tokens generated (the end-of-generation token is not counted).
    pub generated_tokens: usize,
    pub decode_time: Duration,
    pub finish: FinishReason,
}

impl GenerationStats {
    /// Prompt processing speed of the tokens actually computed, tokens/s.
    pub fn prompt_tps(&self) -> f64 {
        (self.prompt_tokens - self.cached_tokens) as f64 / self.prompt_time.as_secs_f64().max(1e-9)
    }

    /// Decode speed, tokens/s (the first token comes from the prompt pass and is not timed).
    pub fn decode_tps(&self) -> f64 {
        self.generated_tokens.saturating_sub(1) as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// Generates up to `max_tokens` tokens after `prompt`, calling `on_token(id, text)` for each
/// (text is the complete UTF-8 it adds, possibly empty while a character is split).
///
/// The session keeps what it already holds in common with `prompt` (its longest common
/// prefix) and computes only the rest. Errors: empty prompt, prompt longer than the context.
pub fn generate(
    model: &Model,
    session: &mut Session,
    prompt: &[u32],
    max_tokens: usize,
    sampler: &mut Sampler,
    mut on_token: impl FnMut(u32, &str) -> ControlFlow<()>,
) -> Result<GenerationStats, EngineError> {
    if prompt.is_empty() {
        return Err(EngineError::EmptyPrompt);
    }
    if prompt.len() > session.n_ctx() {
        return Err(EngineError::ContextFull {
            needed: prompt.len(),
            n_ctx: session.n_ctx(),
        });
    }
    let common = session
        .tokens()
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    // At least one prompt token must run to produce logits.
    let cached = common.min(prompt.len() - 1);
    session.truncate(cached);
    let t0 = Instant::now();
    model.forward(session, &prompt[cached..])?;
    let prompt_time = t0.elapsed();

    let mut history: Vec<u32> = prompt.to_vec();
    let mut decoder = model.tokenizer().stream_decoder();
    let t1 = Instant::now();
    let mut generated = 0;
    let finish = loop {
        if generated >= max_tokens {
            break FinishReason::Length;
        }
        let tok = sampler.sample(session.logits(), &history);
        if model.tokenizer().is_eog(tok) {
            break FinishReason::EndOfGeneration;
        }
        generated += 1;
        history.push(tok);
        let text = decoder.push(tok);
        if on_token(tok, &text).is_break() {
            break FinishReason::Stopped;
        }
        if generated >= max_tokens {
            break FinishReason::Length;
        }
        if session.pos() + 1 > session.n_ctx() {
            break FinishReason::ContextFull;
        }
        model.forward(session, &[tok])?;
    };
    Ok(GenerationStats {
        prompt_tokens: prompt.len(),
        cached_tokens: cached,
        prompt_time,
        generated_tokens: generated,
        decode_time: t1.elapsed(),
        finish,
    })
}
