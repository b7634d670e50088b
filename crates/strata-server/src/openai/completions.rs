//! `POST /v1/completions`: raw text completion of a prompt (a string or token ids), streamed
//! or whole, with legacy `logprobs`.

use axum::extract::State;
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::chat::finish_reason;
use super::types::StreamOptions;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::generation::{collect, submit, timings, usage, GenerationSpec};
use crate::params::{max_tokens, SamplingFields, StopField};
use crate::prompt::{check_fits, tokenize_checked};
use crate::sse::{self, json_event};
use crate::state::{new_id, unix_now, Shared};
use crate::worker::{Event, TokenLogprob};

/// `prompt`: text, token ids, or a one-element list of either.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PromptField {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
    TokenLists(Vec<Vec<u32>>),
}

/// `POST /v1/completions` body.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: PromptField,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub logprobs: Option<u32>,
    #[serde(default)]
    pub echo: Option<bool>,
}

/// Legacy completion `logprobs`: tokens, their log-probabilities, top alternatives, offsets.
fn legacy_logprobs(lps: &[TokenLogprob], start: usize) -> Value {
    let mut offset = start;
    let mut offsets = Vec::new();
    for t in lps {
        offsets.push(offset);
        offset += t.token.len();
    }
    let top: Vec<Value> = lps
        .iter()
        .map(|t| {
            Value::Object(
                t.top
                    .iter()
                    .map(|(tok, _, lp)| (tok.clone(), json!(lp)))
                    .collect(),
            )
        })
        .collect();
    json!({
        "tokens": lps.iter().map(|t| t.token.clone()).collect::<Vec<_>>(),
        "token_logprobs": lps.iter().map(|t| t.logprob).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}

fn prompt_tokens(state: &Shared, prompt: PromptField) -> Result<Vec<u32>, ApiError> {
    let engine = state.engine()?;
    let one = |n: usize| {
        if n == 1 {
            Ok(())
        } else {
            Err(ApiError::bad_param(
                "prompt",
                "only one prompt per request is supported",
            ))
        }
    };
    let tokens = match prompt {
        PromptField::Text(t) => return tokenize_checked(engine.model(), &t, engine.n_ctx()),
        PromptField::Texts(v) => {
            one(v.len())?;
            return tokenize_checked(engine.model(), &v[0], engine.n_ctx());
        }
        PromptField::Tokens(t) => t,
        PromptField::TokenLists(mut v) => {
            one(v.len())?;
            v.remove(0)
        }
    };
    let n_vocab = engine.model().config().n_vocab;
    if let Some(bad) = tokens.iter().find(|t| **t as usize >= n_vocab) {
        return Err(ApiError::bad_param(
            "prompt",
            format!("token id {bad} is outside the vocabulary of {n_vocab}"),
        ));
    }
    check_fits(tokens.len(), engine.n_ctx())?;
    Ok(tokens)
}

/// The handler.
pub async fn completions(
    State(state): State<Shared>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let engine = state.engine()?;
    if req.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_param("n", "only n = 1 is supported"));
    }
    if req.echo == Some(true) {
        return Err(ApiError::bad_param("echo", "echo is not supported"));
    }
    if req.logprobs.is_some_and(|n| n > 20) {
        return Err(ApiError::bad_param(
            "logprobs",
            "logprobs must be at most 20",
        ));
    }
    let sampling = &req.sampling;
    let spec = GenerationSpec {
        params: sampling.resolve(&state.config)?,
        max_tokens: max_tokens(
            "max_tokens",
            Some(req.max_tokens.unwrap_or(16)),
            engine.n_ctx(),
        )?,
        stop: StopField::strings(req.stop.as_ref())?,
        logprobs: req.logprobs.map(|n| n as usize),
        prompt: prompt_tokens(&state, req.prompt)?,
    };
    let want_lp = spec.logprobs.is_some();
    let rx = submit(engine, spec, "/v1/completions")?;
    let (id, created, model) = (new_id("cmpl-"), unix_now(), state.config.model_id.clone());
    let chunk = move |text: &str, lp: Value, finish: Option<&str>| {
        json!({"id": id, "object": "text_completion", "created": created, "model": model,
               "choices": [{"index": 0, "text": text, "logprobs": lp, "finish_reason": finish}]})
    };
    if req.stream.unwrap_or(false) {
        let include_usage = req
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        let mut offset = 0;
        let format = move |ev: Event| -> Vec<SseEvent> {
            match ev {
                Event::Text { text, logprobs } => {
                    let lp = if want_lp {
                        legacy_logprobs(&logprobs, offset)
                    } else {
                        Value::Null
                    };
                    offset += text.len();
                    vec![json_event(&chunk(&text, lp, None))]
                }
                Event::Done(stats) => {
                    let mut last =
                        chunk("", Value::Null, Some(finish_reason(&stats.finish, false)));
                    last["timings"] = timings(&stats);
                    let mut out = vec![json_event(&last)];
                    if include_usage {
                        let mut u = chunk("", Value::Null, None);
                        u["choices"] = json!([]);
                        u["usage"] = usage(&stats);
                        out.push(json_event(&u));
                    }
                    out.push(SseEvent::default().data("[DONE]"));
                    out
                }
                Event::Failed(e) => vec![
                    json_event(&e.openai_body()),
                    SseEvent::default().data("[DONE]"),
                ],
            }
        };
        return Ok(sse::respond(
            rx,
            Vec::new(),
            state.config.keep_alive,
            format,
        ));
    }
    let done = collect(rx).await?;
    let lp = if want_lp {
        legacy_logprobs(&done.logprobs, 0)
    } else {
        Value::Null
    };
    let mut body = chunk(
        &done.text,
        lp,
        Some(finish_reason(&done.stats.finish, false)),
    );
    body["usage"] = usage(&done.stats);
    body["timings"] = timings(&done.stats);
    Ok(Json(body).into_response())
}
