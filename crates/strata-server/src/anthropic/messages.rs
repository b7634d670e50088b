//! `POST /v1/messages` and `POST /v1/messages/count_tokens`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::convert::{to_chat, MessagesRequest};
use super::stream::MessageStream;
use crate::error::{AnthropicError, ApiError};
use crate::extract::AnthropicJson;
use crate::generation::{collect, submit, timings, GenerationSpec};
use crate::output::Answer;
use crate::params::{max_tokens, SamplingFields, StopField};
use crate::prompt::prepare_chat;
use crate::sse;
use crate::state::{new_id, Shared};
use crate::worker::{Finish, Stats};

/// The Anthropic `stop_reason` and `stop_sequence`.
pub fn stop_reason(f: &Finish, tool_calls: bool) -> (&'static str, Value) {
    match f {
        Finish::Length | Finish::ContextFull => ("max_tokens", Value::Null),
        Finish::Stop(s) => ("stop_sequence", json!(s)),
        _ if tool_calls => ("tool_use", Value::Null),
        _ => ("end_turn", Value::Null),
    }
}

/// Anthropic `usage`: `input_tokens` excludes the part read from the cache.
pub fn usage(s: &Stats) -> Value {
    json!({
        "input_tokens": s.prompt_tokens - s.cached_tokens,
        "cache_read_input_tokens": s.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": s.generated_tokens,
    })
}

/// A tool call's arguments as the `input` object (`{}` if the model wrote invalid JSON).
pub fn tool_input(args: &str) -> Value {
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            tracing::warn!("tool call arguments are not a JSON object: {args:?}");
            json!({})
        }
    }
}

/// The `/v1/messages` handler.
pub async fn messages(
    State(state): State<Shared>,
    AnthropicJson(req): AnthropicJson<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    state.check_model(req.model.as_deref())?;
    let engine = state.engine()?;
    let Some(limit) = req.max_tokens else {
        return Err(ApiError::bad_param("max_tokens", "max_tokens is required").into());
    };
    let sampling = SamplingFields {
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        ..Default::default()
    };
    let stop = StopField::strings(req.stop_sequences.clone().map(StopField::Many).as_ref())?;
    let params = sampling.resolve(&state.config)?;
    let max = max_tokens("max_tokens", Some(limit), engine.n_ctx())?;
    let mut prepared = prepare_chat(engine.model(), engine.n_ctx(), to_chat(&req)?)?;
    let prompt_len = prepared.tokens.len();
    let rx = submit(
        engine,
        GenerationSpec {
            prompt: prepared.tokens,
            params,
            max_tokens: max,
            stop,
            logprobs: None,
        },
        "/v1/messages",
    )?;
    let (id, model) = (new_id("msg_"), state.config.model_id.clone());
    if req.stream.unwrap_or(false) {
        let mut s = MessageStream::new(id, model, prompt_len, prepared.parser);
        let head = s.head(prepared.opening);
        return Ok(sse::respond(rx, head, state.config.keep_alive, move |ev| {
            s.on_event(ev)
        }));
    }
    let done = collect(rx).await?;
    let mut deltas = prepared.opening;
    deltas.extend(prepared.parser.push(&done.text));
    deltas.extend(prepared.parser.finish());
    let answer = Answer::from_deltas(deltas);
    let mut content = Vec::new();
    if !answer.reasoning.is_empty() {
        content.push(json!({"type": "thinking", "thinking": answer.reasoning, "signature": ""}));
    }
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        content.push(json!({"type": "text", "text": answer.content}));
    }
    for (name, args) in &answer.tool_calls {
        content.push(json!({"type": "tool_use", "id": new_id("toolu_"), "name": name, "input": tool_input(args)}));
    }
    let (reason, seq) = stop_reason(&done.stats.finish, !answer.tool_calls.is_empty());
    Ok(Json(json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": seq,
        "usage": usage(&done.stats),
        "timings": timings(&done.stats),
    }))
    .into_response())
}

/// The `/v1/messages/count_tokens` handler: the prompt's token count.
pub async fn count_tokens(
    State(state): State<Shared>,
    AnthropicJson(req): AnthropicJson<MessagesRequest>,
) -> Result<Json<Value>, AnthropicError> {
    state.check_model(req.model.as_deref())?;
    let engine = state.engine()?;
    let prepared = prepare_chat(engine.model(), usize::MAX, to_chat(&req)?)?;
    Ok(Json(json!({"input_tokens": prepared.tokens.len()})))
}
