//! Chat templates (GGUF key `tokenizer.chat_template`) rendered with minijinja the way Hugging
//! Face's transformers renders them with Python Jinja2.
//!
//! The environment matches transformers' `_compile_jinja_template`: `trim_blocks`,
//! `lstrip_blocks`, loop controls, a single trailing newline of the source dropped, Python string
//! and dict methods (`.strip()`, `.startswith()`, `.split()`, `.items()`, … from
//! minijinja-contrib's pycompat), `raise_exception`, `strftime_now` (UTC) and `tojson`
//! (`json.dumps(ensure_ascii=False)`). Values print as Python's `str()` (`None`, `True`), also
//! through `| string` and `| trim`, and the `iterable`/`sequence` tests follow Python (none is
//! not iterable; strings and dicts are sequences).
//!
//! Variables a template sees: `messages`, `tools` (none when absent), `documents` (none),
//! `add_generation_prompt`, `bos_token`, `eos_token`, and every entry of
//! [`RenderOptions::kwargs`] (e.g. `enable_thinking`) as a top-level variable.
//!
//! ```
//! use strata_engine::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
//! let t = ChatTemplate::new(
//!     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}\
//!      {% if add_generation_prompt %}<|assistant|>{% endif %}",
//!     "<s>",
//!     "</s>",
//! )
//! .unwrap();
//! let opts = RenderOptions { add_generation_prompt: true, ..Default::default() };
//! let text = t.render(&[ChatMessage::new("user", "Hi")], &opts).unwrap();
//! assert_eq!(text, "<|user|>Hi\n<|assistant|>");
//! ```

mod functions;
mod pyfmt;

use minijinja::{Environment, Error, ErrorKind, Value};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

const TEMPLATE_NAME: &str = "chat_template";

/// Strata's plain-text format for models whose GGUF has no chat template:
/// one `Role: text` line per message (`System`, `User`, `Assistant`, `Tool`), text parts of list
/// content concatenated, assistant tool calls as `Tool call: {"name": …, "arguments": …}` lines,
/// the request's tools first as `Tools:` plus one JSON line each, and `Assistant:` as the
/// generation prompt.
pub const PLAIN_TEMPLATE: &str = include_str!("chat_template/plain.jinja");

/// Why a template could not be compiled or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    /// The template source is not valid Jinja.
    #[error("chat template syntax error at line {line}: {message}")]
    Syntax {
        /// 1-based line in the template source.
        line: usize,
        /// What the parser expected or found.
        message: String,
    },
    /// The template itself refused the conversation via `raise_exception(message)`,
    /// e.g. "System role not supported".
    #[error("chat template rejected the conversation: {0}")]
    Raised(String),
    /// Rendering failed inside the engine (a type error, an undefined attribute call, …).
    #[error("chat template render error{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Render {
        /// 1-based line in the template source, when known.
        line: Option<usize>,
        /// What went wrong.
        message: String,
    },
}

/// One message of a conversation, as OpenAI-style APIs and Hugging Face templates know it.
///
/// Fields that are `None` are absent from the template's view (`message.tool_calls is defined`
/// is false); `extra` carries any other keys through unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool` (templates decide what they accept).
    pub role: String,
    /// A string, a list of parts such as `{"type": "text", "text": "…"}`, or null.
    #[serde(default)]
    pub content: Json,
    /// Reasoning text of an assistant turn, kept apart from `content` (Qwen3-style templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Assistant tool calls: `{"id", "type": "function", "function": {"name", "arguments"}}`.
    /// Templates expect `arguments` as an object; see [`ChatMessage::parse_tool_call_arguments`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Json>>,
    /// For `tool` messages: the id of the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `tool` messages: the function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Any other keys, passed to the template as they are.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

impl ChatMessage {
    /// A message with text content and nothing else.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: Json::String(content.into()),
            ..Default::default()
        }
    }

    /// Replaces each tool call's `function.arguments` that is a string holding a JSON object
    /// (the OpenAI wire form) with that object, the form Hugging Face templates expect.
    /// Strings that are not JSON objects are left as they are.
    pub fn parse_tool_call_arguments(&mut self) {
        for call in self.tool_calls.iter_mut().flatten() {
            let Some(args) = call.pointer_mut("/function/arguments") else {
                continue;
            };
            if let Json::String(s) = args {
                if let Ok(parsed @ Json::Object(_)) = serde_json::from_str::<Json>(s) {
                    *args = parsed;
                }
            }
        }
    }
}

/// Per-request rendering options.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Append the header that opens the assistant's turn (`add_generation_prompt`).
    pub add_generation_prompt: bool,
    /// Tool JSON schemas (`{"type": "function", "function": {…}}`), the template's `tools`.
    pub tools: Option<Vec<Json>>,
    /// Extra top-level variables, e.g. `{"enable_thinking": false}`. They may override
    /// `bos_token`/`eos_token` but not `messages`, `tools` or `add_generation_prompt`.
    pub kwargs: Map<String, Json>,
}

/// A compiled chat template plus the special-token strings it may print.
#[derive(Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source` (a Hugging Face Jinja chat template). `bos_token`/`eos_token` are the
    /// texts of the vocabulary's BOS/EOS tokens ("" when the model has none).
    ///
    /// Errors: [`ChatTemplateError::Syntax`] with the line of the first syntax error.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, ChatTemplateError> {
        let mut env = Environment::new();
        env.set_debug(false);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_formatter(functions::format_python);
        env.add_function("raise_exception", functions::raise_exception);
        env.add_function("strftime_now", functions::strftime_now);
        env.add_filter("tojson", functions::tojson);
        env.add_filter("string", functions::string);
        env.add_filter("trim", functions::trim);
        env.add_test("iterable", functions::is_iterable);
        env.add_test("sequence", functions::is_sequence);
        let source = functions::rewrite_generation_tags(source);
        env.add_template_owned(TEMPLATE_NAME, source)
            .map_err(|e| ChatTemplateError::Syntax {
                line: e.line().unwrap_or(1),
                message: e
                    .detail()
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string()),
            })?;
        Ok(Self {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The documented plain-text format ([`PLAIN_TEMPLATE`]) for models without a template.
    pub fn plain() -> Self {
        Self::new(PLAIN_TEMPLATE, "", "").expect("the built-in plain template compiles")
    }

    /// Renders `messages` into the prompt text the model is fed.
    ///
    /// Errors: [`ChatTemplateError::Raised`] when the template calls `raise_exception`
    /// (e.g. roles out of order), [`ChatTemplateError::Render`] for any other failure.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        opts: &RenderOptions,
    ) -> Result<String, ChatTemplateError> {
        let mut ctx = Map::new();
        ctx.insert("bos_token".into(), Json::String(self.bos_token.clone()));
        ctx.insert("eos_token".into(), Json::String(self.eos_token.clone()));
        ctx.extend(opts.kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let messages = serde_json::to_value(messages).map_err(|e| ChatTemplateError::Render {
            line: None,
            message: format!("messages are not serializable: {e}"),
        })?;
        ctx.insert("messages".into(), messages);
        ctx.insert(
            "tools".into(),
            opts.tools.clone().map(Json::Array).unwrap_or(Json::Null),
        );
        ctx.insert("documents".into(), Json::Null);
        ctx.insert(
            "add_generation_prompt".into(),
            Json::Bool(opts.add_generation_prompt),
        );
        let template = self.env.get_template(TEMPLATE_NAME).map_err(render_error)?;
        template
            .render(Value::from_serialize(&ctx))
            .map_err(render_error)
    }
}

fn render_error(err: Error) -> ChatTemplateError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(raised) = e.downcast_ref::<functions::Raised>() {
            return ChatTemplateError::Raised(raised.0.clone());
        }
        source = e.source();
    }
    let message = match (err.kind(), err.detail()) {
        (ErrorKind::SyntaxError, Some(d)) => format!("syntax error: {d}"),
        (kind, Some(d)) => format!("{kind}: {d}"),
        (kind, None) => kind.to_string(),
    };
    ChatTemplateError::Render {
        line: err.line(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, messages: &[ChatMessage], opts: &RenderOptions) -> String {
        ChatTemplate::new(src, "<s>", "</s>")
            .unwrap()
            .render(messages, opts)
            .unwrap()
    }

    #[test]
    fn syntax_error_reports_its_line() {
        let err = ChatTemplate::new("ok\n{% if x %}\n{{ x \n", "", "").unwrap_err();
        match err {
            ChatTemplateError::Syntax { line, .. } => assert!((3..=4).contains(&line), "{line}"),
            other => panic!("expected a syntax error, got {other:?}"),
        }
        assert!(ChatTemplate::new("{% endfor %}", "", "").is_err());
    }

    #[test]
    fn raise_exception_becomes_raised_error() {
        let t = ChatTemplate::new("{{ raise_exception('no system') }}", "", "").unwrap();
        let err = t.render(&[], &RenderOptions::default()).unwrap_err();
        assert!(
            matches!(&err, ChatTemplateError::Raised(m) if m == "no system"),
            "{err:?}"
        );
    }

    #[test]
    fn type_errors_are_render_errors_not_panics() {
        let t = ChatTemplate::new("{{ messages[0].content + 'x' }}", "", "").unwrap();
        let msg = ChatMessage {
            role: "user".into(),
            content: json!([1]),
            ..Default::default()
        };
        let err = t.render(&[msg], &RenderOptions::default()).unwrap_err();
        assert!(
            matches!(err, ChatTemplateError::Render { line: Some(1), .. }),
            "{err:?}"
        );
    }

    #[test]
    fn kwargs_tokens_and_python_printing() {
        let mut opts = RenderOptions::default();
        opts.kwargs.insert("enable_thinking".into(), json!(false));
        opts.kwargs.insert("eos_token".into(), json!("<eot>"));
        let src = "{{ bos_token }}{{ eos_token }} {{ enable_thinking }} {{ tools }} {{ none }} \
                   {{ [1, 'a'] }} {{ 1 | string }}{{ undefined_var }}";
        assert_eq!(
            render(src, &[], &opts),
            "<s><eot> False None None [1, 'a'] 1"
        );
    }

    #[test]
    fn absent_optional_fields_are_undefined() {
        let src = "{{ messages[0].tool_calls is defined }} {{ messages[0].name is defined }}";
        let out = render(
            src,
            &[ChatMessage::new("user", "x")],
            &RenderOptions::default(),
        );
        assert_eq!(out, "False False");
    }

    #[test]
    fn pycompat_methods_and_loop_controls_work() {
        let src = "{% for w in ' a,b,c '.strip().split(',') %}{% if w == 'c' %}{% break %}\
                   {% endif %}{{ w.upper() }}{% endfor %}{% for k, v in {'x': 1}.items() %}{{ k }}{{ v }}\
                   {% endfor %}{{ 'abc'.startswith('ab') }}";
        assert_eq!(render(src, &[], &RenderOptions::default()), "ABx1True");
    }

    #[test]
    fn tojson_matches_json_dumps() {
        let src = "{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x | tojson(sort_keys=true) }}";
        let mut opts = RenderOptions::default();
        opts.kwargs
            .insert("x".into(), json!({"b": "é<", "a": [1.0]}));
        let out = render(src, &[], &opts);
        assert_eq!(
            out,
            "{\"b\": \"é<\", \"a\": [1.0]}|{\n  \"b\": \"é<\",\n  \"a\": [\n    1.0\n  ]\n}|\
             {\"a\": [1.0], \"b\": \"é<\"}"
        );
    }

    #[test]
    fn plain_format_renders_roles_and_generation_prompt() {
        let msgs = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi"),
            ChatMessage::new("assistant", "Hello."),
            ChatMessage::new("user", "Bye"),
        ];
        let opts = RenderOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        let out = ChatTemplate::plain().render(&msgs, &opts).unwrap();
        assert_eq!(
            out,
            "System: Be brief.\nUser: Hi\nAssistant: Hello.\nUser: Bye\nAssistant:"
        );
    }

    #[test]
    fn tool_call_arguments_strings_are_parsed() {
        let mut m = ChatMessage::new("assistant", "");
        m.tool_calls = Some(vec![
            json!({"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}),
            json!({"type": "function", "function": {"name": "g", "arguments": "not json"}}),
        ]);
        m.parse_tool_call_arguments();
        let calls = m.tool_calls.unwrap();
        assert_eq!(calls[0]["function"]["arguments"], json!({"a": 1}));
        assert_eq!(calls[1]["function"]["arguments"], json!("not json"));
    }
}
