//! Anthropic requests in the engine's terms: system text, content blocks (`text`, `tool_use`,
//! `tool_result`, `thinking`) into chat messages, tools into OpenAI-shaped tool schemas.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use strata_engine::chat_template::ChatMessage;

use crate::error::ApiError;
use crate::params::text_of_content;
use crate::prompt::{ChatRequest, ToolChoice};

/// One message: a role and a string or a list of blocks.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct InMessage {
    pub role: String,
    pub content: Value,
}

/// A client tool.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct InTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// `POST /v1/messages` body (also `count_tokens`, where `max_tokens` may be absent).
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct MessagesRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    pub messages: Vec<InMessage>,
    #[serde(default)]
    pub system: Option<Value>,
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub tools: Option<Vec<InTool>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub thinking: Option<Value>,
}

fn tool_choice(v: Option<&Value>) -> Result<ToolChoice, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(ToolChoice::Auto);
    };
    match (
        v.get("type").and_then(Value::as_str),
        v.get("name").and_then(Value::as_str),
    ) {
        (Some("auto"), _) => Ok(ToolChoice::Auto),
        (Some("any"), _) => Ok(ToolChoice::Required),
        (Some("none"), _) => Ok(ToolChoice::None),
        (Some("tool"), Some(name)) => Ok(ToolChoice::Function(name.to_string())),
        _ => Err(ApiError::bad_param(
            "tool_choice",
            "tool_choice must be {type: auto | any | none} or {type: tool, name}",
        )),
    }
}

fn tool_result_text(block: &Value, field: &str) -> Result<String, ApiError> {
    let text = text_of_content(field, block.get("content").unwrap_or(&Value::Null))?;
    Ok(
        if block.get("is_error").and_then(Value::as_bool) == Some(true) {
            format!("Error: {text}")
        } else {
            text
        },
    )
}

/// Converts the request into a [`ChatRequest`]. Errors: unknown roles or block types, images,
/// server tools (400).
pub fn to_chat(req: &MessagesRequest) -> Result<ChatRequest, ApiError> {
    let mut messages = Vec::new();
    if let Some(system) = &req.system {
        let text = text_of_content("system", system)?;
        if !text.is_empty() {
            messages.push(ChatMessage::new("system", text));
        }
    }
    let mut tool_names: HashMap<String, String> = HashMap::new();
    for (i, m) in req.messages.iter().enumerate() {
        let field = format!("messages[{i}].content");
        if m.role != "user" && m.role != "assistant" {
            return Err(ApiError::bad_param(
                &format!("messages[{i}].role"),
                format!("unknown role '{}' (user, assistant)", m.role),
            ));
        }
        let blocks = match &m.content {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => {
                return Err(ApiError::bad_param(
                    &field,
                    "content must be a string or a list of blocks",
                ))
            }
        };
        let mut msg = ChatMessage::new(m.role.clone(), "");
        let mut texts: Vec<String> = Vec::new();
        let mut calls = Vec::new();
        for b in &blocks {
            match b.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => texts.push(
                    b.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                ),
                "thinking" => {
                    msg.reasoning_content = b
                        .get("thinking")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                }
                "redacted_thinking" => {}
                "tool_use" => {
                    let id = b
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let name = b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    tool_names.insert(id.clone(), name.clone());
                    let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                    calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input}}));
                }
                "tool_result" => {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    messages.push(ChatMessage {
                        role: "tool".into(),
                        content: Value::String(tool_result_text(b, &field)?),
                        name: tool_names.get(&id).cloned(),
                        tool_call_id: Some(id),
                        ..Default::default()
                    });
                }
                other => {
                    return Err(ApiError::bad_param(
                        &field,
                        format!("content blocks of type '{other}' are not supported"),
                    ))
                }
            }
        }
        let only_results = texts.is_empty() && calls.is_empty() && msg.reasoning_content.is_none();
        if only_results
            && blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        {
            continue;
        }
        msg.content = Value::String(texts.join("\n"));
        if !calls.is_empty() {
            msg.tool_calls = Some(calls);
        }
        messages.push(msg);
    }
    let mut tools = Vec::new();
    for t in req.tools.iter().flatten() {
        if t.kind.as_deref().is_some_and(|k| k != "custom") {
            return Err(ApiError::bad_param(
                "tools",
                format!(
                    "server tool '{}' is not supported; only client tools",
                    t.name
                ),
            ));
        }
        tools.push(json!({"type": "function", "function": {
            "name": t.name,
            "description": t.description.clone().unwrap_or_default(),
            "parameters": t.input_schema.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        }}));
    }
    let choice = if tools.is_empty() {
        ToolChoice::None
    } else {
        tool_choice(req.tool_choice.as_ref())?
    };
    let mut kwargs = Map::new();
    match req
        .thinking
        .as_ref()
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
    {
        Some("enabled") => {
            kwargs.insert("enable_thinking".into(), json!(true));
        }
        Some("disabled") => {
            kwargs.insert("enable_thinking".into(), json!(false));
        }
        _ => {}
    }
    Ok(ChatRequest {
        messages,
        tools,
        tool_choice: choice,
        kwargs,
        continue_final: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_chat_messages() {
        let req: MessagesRequest = serde_json::from_value(json!({
            "max_tokens": 10,
            "system": [{"type": "text", "text": "be brief"}],
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {"c": "P"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}
            ],
            "tools": [{"name": "w", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "w"}
        }))
        .unwrap();
        let chat = to_chat(&req).unwrap();
        let roles: Vec<&str> = chat.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(chat.messages[3].name.as_deref(), Some("w"));
        assert_eq!(chat.messages[3].content, json!("sunny"));
        assert_eq!(chat.tool_choice, ToolChoice::Function("w".into()));
        assert_eq!(chat.tools[0]["function"]["name"], "w");
    }
}
