//! `POST /v1/chat/completions`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::chat_stream::ChatStream;
use super::types::{check_tools, tool_choice, ChatCompletionRequest};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::generation::{chat_logprobs, collect, submit, timings, usage, GenerationSpec};
use crate::output::{Answer, Delta, OutputParser};
use crate::params::{max_tokens, StopField};
use crate::prompt::{prepare_chat, ChatRequest};
use crate::schema::ResponseFormat;
use crate::sse;
use crate::state::{new_id, unix_now, Shared};
use crate::worker::Finish;

/// Everything decided before the job is queued.
struct ChatPlan {
    spec: GenerationSpec,
    parser: OutputParser,
    opening: Vec<Delta>,
    stream: bool,
    include_usage: bool,
    format: ResponseFormat,
}

/// The OpenAI `finish_reason`.
pub fn finish_reason(f: &Finish, tool_calls: bool) -> &'static str {
    match f {
        Finish::Length | Finish::ContextFull => "length",
        _ if tool_calls => "tool_calls",
        _ => "stop",
    }
}

fn plan(state: &Shared, req: ChatCompletionRequest) -> Result<ChatPlan, ApiError> {
    let engine = state.engine()?;
    if req.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_param("n", "only n = 1 is supported"));
    }
    if req.top_logprobs.is_some_and(|n| n > 20) {
        return Err(ApiError::bad_param(
            "top_logprobs",
            "top_logprobs must be at most 20",
        ));
    }
    let tools = req.tools.clone().unwrap_or_default();
    check_tools(&tools)?;
    let choice = tool_choice(req.tool_choice.as_ref(), !tools.is_empty())?;
    let format = ResponseFormat::from_request(req.response_format.as_ref())?;
    let mut kwargs = req.chat_template_kwargs.clone().unwrap_or_default();
    if let Some(effort) = &req.reasoning_effort {
        kwargs
            .entry("reasoning_effort")
            .or_insert_with(|| json!(effort));
        if effort == "none" {
            kwargs.entry("enable_thinking").or_insert(json!(false));
        }
    }
    let params = req.sampling.resolve(&state.config)?;
    let limit = req.max_completion_tokens.or(req.max_tokens);
    let field = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let max = max_tokens(field, limit, engine.n_ctx())?;
    let stop = StopField::strings(req.stop.as_ref())?;
    let logprobs = req
        .logprobs
        .unwrap_or(false)
        .then(|| req.top_logprobs.unwrap_or(0) as usize);
    let stream = req.stream.unwrap_or(false);
    let include_usage = req
        .stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    let messages = req
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.into_chat(i))
        .collect::<Result<Vec<_>, _>>()?;
    let chat = ChatRequest {
        messages,
        tools,
        tool_choice: choice,
        kwargs,
        continue_final: false,
    };
    let prepared = prepare_chat(engine.model(), engine.n_ctx(), chat)?;
    Ok(ChatPlan {
        spec: GenerationSpec {
            prompt: prepared.tokens,
            params,
            max_tokens: max,
            stop,
            logprobs,
        },
        parser: prepared.parser,
        opening: prepared.opening,
        stream,
        include_usage,
        format,
    })
}

/// The handler.
pub async fn chat_completions(
    State(state): State<Shared>,
    ApiJson(req): ApiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let mut plan = plan(&state, req)?;
    let engine = state.engine()?;
    let model = state.config.model_id.clone();
    let logprobs = plan.spec.logprobs.is_some();
    let rx = submit(engine, plan.spec, "/v1/chat/completions")?;
    let id = new_id("chatcmpl-");
    if plan.stream {
        let mut s = ChatStream::new(id, model, plan.parser, plan.include_usage, plan.format);
        let head = s.head(plan.opening);
        return Ok(sse::respond(rx, head, state.config.keep_alive, move |ev| {
            s.on_event(ev)
        }));
    }
    let done = collect(rx).await?;
    let mut deltas = plan.opening;
    deltas.extend(plan.parser.push(&done.text));
    deltas.extend(plan.parser.finish());
    let answer = Answer::from_deltas(deltas);
    if answer.tool_calls.is_empty() {
        plan.format.check(&answer.content)?;
    }
    let tool_calls: Vec<Value> = answer
        .tool_calls
        .iter()
        .map(|(name, args)| json!({"id": new_id("call_"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": if answer.content.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(answer.content) },
    });
    if !answer.reasoning.is_empty() {
        message["reasoning_content"] = json!(answer.reasoning);
    }
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = finish_reason(&done.stats.finish, !answer.tool_calls.is_empty());
    let body = json!({
        "id": id,
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": if logprobs { chat_logprobs(&done.logprobs) } else { Value::Null },
            "finish_reason": finish,
        }],
        "usage": usage(&done.stats),
        "timings": timings(&done.stats),
    });
    Ok(Json(body).into_response())
}
