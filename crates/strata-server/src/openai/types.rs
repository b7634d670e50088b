//! OpenAI request bodies. Unknown fields are ignored; known fields of the wrong type are 400.

use serde::Deserialize;
use serde_json::{Map, Value};
use strata_engine::chat_template::ChatMessage;

use crate::error::ApiError;
use crate::params::{text_of_content, SamplingFields, StopField};
use crate::prompt::ToolChoice;

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage`.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// One message as clients send it.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct InMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
}

impl InMessage {
    /// The engine's message: `developer` becomes `system`, content parts are joined to text.
    /// Errors: an unknown role, image parts (400).
    pub fn into_chat(self, i: usize) -> Result<ChatMessage, ApiError> {
        let field = format!("messages[{i}]");
        let role = match self.role.as_str() {
            "developer" => "system".to_string(),
            "system" | "user" | "assistant" | "tool" => self.role,
            other => {
                return Err(ApiError::bad_param(
                    &field,
                    format!("unknown role '{other}' (system, developer, user, assistant, tool)"),
                ))
            }
        };
        let content = text_of_content(&format!("{field}.content"), &self.content)?;
        let has_calls = self.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        Ok(ChatMessage {
            content: if content.is_empty() && has_calls {
                Value::Null
            } else {
                Value::String(content)
            },
            role,
            tool_calls: self.tool_calls.filter(|c| !c.is_empty()),
            tool_call_id: self.tool_call_id,
            name: self.name,
            reasoning_content: self.reasoning_content,
            ..Default::default()
        })
    }
}

/// `POST /v1/chat/completions`.
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<InMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub chat_template_kwargs: Option<Map<String, Value>>,
}

/// Reads OpenAI `tool_choice` (`none`, `auto`, `required`, or a named function).
pub fn tool_choice(v: Option<&Value>, has_tools: bool) -> Result<ToolChoice, ApiError> {
    let bad = || {
        ApiError::bad_param("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}")
    };
    let choice = match v {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            _ => return Err(bad()),
        },
        Some(o) => {
            let name = o
                .pointer("/function/name")
                .or_else(|| o.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(bad)?;
            ToolChoice::Function(name.to_string())
        }
    };
    if !has_tools && matches!(choice, ToolChoice::Required | ToolChoice::Function(_)) {
        return Err(ApiError::bad_param(
            "tool_choice",
            "tool_choice asks for a tool call but no tools were given",
        ));
    }
    Ok(if has_tools { choice } else { ToolChoice::None })
}

/// Checks the shape of `tools` (each `{"type": "function", "function": {"name": ...}}`).
pub fn check_tools(tools: &[Value]) -> Result<(), ApiError> {
    for (i, t) in tools.iter().enumerate() {
        if t.pointer("/function/name")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(ApiError::bad_param(
                &format!("tools[{i}]"),
                "each tool needs function.name",
            ));
        }
    }
    Ok(())
}
