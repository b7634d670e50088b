//! From a conversation to prompt tokens: render the model's chat template (with tools and
//! template variables), add a forced tool-call opening when `tool_choice` demands one, tokenize,
//! and refuse a prompt the context cannot hold (never truncate). Also builds the answer's
//! [`OutputParser`], which must see the same forced opening.

use serde_json::{json, Map, Value};
use strata_engine::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use strata_engine::Model;

use crate::error::ApiError;
use crate::output::{Delta, OutputParser, ReasoningSplitter, ToolCallParser};

/// How a request lets the model use tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// No tools (none given, or `tool_choice: none`).
    None,
    /// The model decides.
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this function.
    Function(String),
}

/// A conversation in the engine's terms, from either API.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// Messages, system first if any.
    pub messages: Vec<ChatMessage>,
    /// Tools in OpenAI shape (`{"type": "function", "function": {...}}`).
    pub tools: Vec<Value>,
    /// Tool use policy.
    pub tool_choice: ToolChoice,
    /// Template variables (`enable_thinking`, `reasoning_effort`, …).
    pub kwargs: Map<String, Value>,
    /// Continue a final assistant message instead of starting a new turn (Anthropic prefill).
    pub continue_final: bool,
}

/// A rendered, tokenized prompt and the parser for its answer.
#[derive(Debug)]
pub struct Prepared {
    /// Prompt token ids.
    pub tokens: Vec<u32>,
    /// The answer parser, already fed the forced opening (if any).
    pub parser: OutputParser,
    /// Deltas the forced opening produced (a tool call's start), to report first.
    pub opening: Vec<Delta>,
}

/// The tool-call syntax a template teaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolFormat {
    Hermes,
    Xml,
}

const HERMES_INSTRUCTIONS: &str = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

fn template_source(model: &Model) -> String {
    model
        .gguf()
        .metadata()
        .opt_str("tokenizer.chat_template")
        .ok()
        .flatten()
        .unwrap_or_default()
        .to_string()
}

/// Tokens of `text` (special tokens parsed, BOS added as the vocabulary says). Errors: a prompt
/// the context cannot hold with room for one generated token (400).
pub fn tokenize_checked(model: &Model, text: &str, n_ctx: usize) -> Result<Vec<u32>, ApiError> {
    let tokens = model.tokenizer().encode(text, true, true);
    check_fits(tokens.len(), n_ctx)?;
    Ok(tokens)
}

/// 400 unless a prompt of `n` tokens leaves room in a context of `n_ctx`.
pub fn check_fits(n: usize, n_ctx: usize) -> Result<(), ApiError> {
    if n == 0 {
        return Err(ApiError::bad_param("prompt", "the prompt is empty"));
    }
    if n >= n_ctx {
        return Err(ApiError::bad_request(format!(
            "the prompt has {n} tokens but the context holds {n_ctx} (prompts are never truncated: shorten it, or restart the server with a larger --ctx)"
        )));
    }
    Ok(())
}

/// Renders, tokenizes and checks `req`. Errors: empty messages, an unknown forced function, a
/// template that rejects the conversation, a prompt too long for the context (all 400).
pub fn prepare_chat(
    model: &Model,
    n_ctx: usize,
    mut req: ChatRequest,
) -> Result<Prepared, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let source = template_source(model);
    let format = if source.contains("<function=") {
        ToolFormat::Xml
    } else {
        ToolFormat::Hermes
    };
    let mut prefill = String::new();
    if req.continue_final && req.messages.last().is_some_and(|m| m.role == "assistant") {
        if let Some(last) = req.messages.pop() {
            prefill = last.content.as_str().unwrap_or_default().to_string();
        }
    }
    let use_tools = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
    if use_tools && !source.contains("tools") {
        inject_tool_instructions(&mut req.messages, &req.tools);
    }
    let opening = match &req.tool_choice {
        _ if !use_tools => String::new(),
        ToolChoice::Function(name) => {
            if !req
                .tools
                .iter()
                .any(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))
            {
                return Err(ApiError::bad_param(
                    "tool_choice",
                    format!("tool_choice names '{name}', which is not among the tools"),
                ));
            }
            match format {
                ToolFormat::Hermes => {
                    format!("<tool_call>\n{{\"name\": {}, \"arguments\": ", json!(name))
                }
                ToolFormat::Xml => format!("<tool_call>\n<function={name}>\n"),
            }
        }
        ToolChoice::Required => match format {
            ToolFormat::Hermes => "<tool_call>\n{\"name\": \"".to_string(),
            ToolFormat::Xml => "<tool_call>\n<function=".to_string(),
        },
        ToolChoice::Auto | ToolChoice::None => String::new(),
    };
    for m in &mut req.messages {
        m.parse_tool_call_arguments();
    }
    let opts = RenderOptions {
        add_generation_prompt: true,
        tools: use_tools.then(|| req.tools.clone()),
        kwargs: req.kwargs,
    };
    let fallback;
    let template = match model.chat_template() {
        Some(t) => t,
        None => {
            fallback = ChatTemplate::plain();
            &fallback
        }
    };
    let rendered = template
        .render(&req.messages, &opts)
        .map_err(|e| ApiError::bad_param("messages", e.to_string()))?;
    let forced = format!("{prefill}{opening}");
    let text = format!("{rendered}{forced}");
    let tokens = tokenize_checked(model, &text, n_ctx)?;

    let thinks = model.tokenizer().token_id("<think>").is_some() || source.contains("<think>");
    let reasoning = thinks.then(|| ReasoningSplitter::new(text.trim_end().ends_with("<think>")));
    let tools = use_tools.then(|| ToolCallParser::new(&req.tools));
    let mut parser = OutputParser::new(reasoning, tools);
    // The forced opening is part of the answer for the parser, but its text is not reported.
    let opening = parser
        .push(&forced)
        .into_iter()
        .filter(|d| !matches!(d, Delta::Content(_) | Delta::Reasoning(_)))
        .collect();
    Ok(Prepared {
        tokens,
        parser,
        opening,
    })
}

/// For templates that know nothing of tools: describe them in the system message, Hermes style.
fn inject_tool_instructions(messages: &mut Vec<ChatMessage>, tools: &[Value]) {
    let list: Vec<String> = tools.iter().map(Value::to_string).collect();
    let text = HERMES_INSTRUCTIONS.replace("{tools}", &list.join("\n"));
    match messages.first_mut() {
        Some(m) if m.role == "system" => {
            let old = m.content.as_str().unwrap_or_default();
            m.content = Value::String(format!("{old}\n\n{text}"));
        }
        _ => messages.insert(0, ChatMessage::new("system", text)),
    }
}
