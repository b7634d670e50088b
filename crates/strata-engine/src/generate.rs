//! The generation loop: prompt → forward → sample → stream text, until an end-of-generation
//! token, the token limit, or the caller says stop (a stop string, a disconnected client).

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
    /// The observer asked to stop after a token (a stop string, a disconnected client).
    Stopped,
    /// The observer asked to stop while the prompt was being read.
    Cancelled,
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

/// What a caller sees of a generation as it happens.
pub trait Observer {
    /// Called before each prompt batch of up to [`Model::ubatch`] tokens; `Break` cancels.
    fn before_prompt_batch(&mut self) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// Called for each generated token with the complete UTF-8 text it adds (empty while a
    /// character is split across tokens) and the logits (`n_vocab`) it was sampled from.
    /// `Break` ends generation with [`FinishReason::Stopped`].
    fn on_token(&mut self, id: u32, text: &str, logits: &[f32]) -> ControlFlow<()>;

    /// Called once at the end of a generation that was not stopped or cancelled, with
    /// text the stream decoder still held (an incomplete character, as U+FFFD).
    fn on_finish(&mut self, _tail: &str) {}
}

/// Adapts a closure `(id, text) -> ControlFlow` to an [`Observer`].
pub struct OnToken<F>(pub F);

impl<F: FnMut(u32, &str) -> ControlFlow<()>> Observer for OnToken<F> {
    fn on_token(&mut self, id: u32, text: &str, _logits: &[f32]) -> ControlFlow<()> {
        (self.0)(id, text)
    }

    fn on_finish(&mut self, tail: &str) {
        if !tail.is_empty() {
            let _ = (self.0)(u32::MAX, tail);
        }
    }
}

/// Generates up to `max_tokens` tokens after `prompt`, calling `on_token(id, text)` for each
/// (a trailing incomplete character is delivered last with id `u32::MAX`).
///
/// See [`generate_with`] for prefix reuse and errors.
pub fn generate(
    model: &Model,
    session: &mut Session,
    prompt: &[u32],
    max_tokens: usize,
    sampler: &mut Sampler,
    on_token: impl FnMut(u32, &str) -> ControlFlow<()>,
) -> Result<GenerationStats, EngineError> {
    generate_with(
        model,
        session,
        prompt,
        max_tokens,
        sampler,
        &mut OnToken(on_token),
    )
}

/// Generates up to `max_tokens` tokens after `prompt`, reporting to `observer`.
///
/// The session keeps what it already holds in common with `prompt` (its longest common
/// prefix) and computes only the rest, in batches of [`Model::ubatch`].
/// Errors: empty prompt, a prompt longer than the context, a token outside the vocabulary.
pub fn generate_with(
    model: &Model,
    session: &mut Session,
    prompt: &[u32],
    max_tokens: usize,
    sampler: &mut Sampler,
    observer: &mut impl Observer,
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
    session.truncate(common.min(prompt.len() - 1));
    // A session with recurrent state goes back to a checkpoint at or below (see `truncate`).
    let cached = session.pos();
    let mut stats = GenerationStats {
        prompt_tokens: prompt.len(),
        cached_tokens: cached,
        prompt_time: Duration::ZERO,
        generated_tokens: 0,
        decode_time: Duration::ZERO,
        finish: FinishReason::Cancelled,
    };
    let t0 = Instant::now();
    for batch in prompt[cached..].chunks(model.ubatch()) {
        if observer.before_prompt_batch().is_break() {
            stats.prompt_time = t0.elapsed();
            return Ok(stats);
        }
        model.forward(session, batch)?;
    }
    stats.prompt_time = t0.elapsed();

    let mut history = Vec::with_capacity(session.n_ctx());
    history.extend_from_slice(prompt);
    let mut decoder = model.tokenizer().stream_decoder();
    let mut text = String::new();
    let t1 = Instant::now();
    stats.finish = loop {
        if stats.generated_tokens >= max_tokens {
            break FinishReason::Length;
        }
        let tok = sampler.sample(session.logits(), &history);
        if model.tokenizer().is_eog(tok) {
            break FinishReason::EndOfGeneration;
        }
        stats.generated_tokens += 1;
        history.push(tok);
        text.clear();
        decoder.push_into(tok, &mut text);
        if observer.on_token(tok, &text, session.logits()).is_break() {
            break FinishReason::Stopped;
        }
        if stats.generated_tokens >= max_tokens {
            break FinishReason::Length;
        }
        if session.pos() + 1 > session.n_ctx() {
            break FinishReason::ContextFull;
        }
        model.forward(session, &[tok])?;
    };
    stats.decode_time = t1.elapsed();
    if stats.finish != FinishReason::Stopped {
        observer.on_finish(&decoder.finish());
    }
    Ok(stats)
}
