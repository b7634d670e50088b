//! Tool calls in generated text, recognized as they stream:
//!
//! - Hermes / Qwen2.5 style: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`
//! - Qwen3-Coder XML style: `<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>`
//!   (also accepted without the `<tool_call>` wrapper).
//!
//! Text outside calls passes through; a call is reported as soon as its name is known, then its
//! arguments in pieces (JSON text that concatenates to the arguments object). Text that opens
//! like a call but is not one comes back as text.

use std::collections::HashMap;

use serde_json::Value;

use super::json_call::JsonCall;
use super::xml_call::XmlCall;
use super::{find_first, partial_suffix};

const TOOL_CALL: &str = "<tool_call>";
const TOOL_CALL_END: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const OPENERS: [&str; 2] = [TOOL_CALL, FUNCTION];

/// One thing the parser recognized.
#[allow(missing_docs)] // Variant docs describe their fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolEvent {
    /// Plain text outside calls.
    Text(String),
    /// A call opened with this function name.
    Start { index: usize, name: String },
    /// More argument text of call `index`.
    Args { index: usize, delta: String },
    /// Call `index` is complete.
    End { index: usize },
}

#[derive(Debug)]
enum State {
    Text,
    /// After `<tool_call>`: a JSON object or `<function=` follows.
    Open,
    Json(JsonCall),
    /// After `<function=`: the name up to `>`.
    XmlName,
    Xml(XmlCall),
    /// A call is complete; an optional `</tool_call>` may follow.
    Close,
}

/// Streaming tool-call recognizer; see the module docs for the syntaxes.
#[derive(Debug)]
pub struct ToolCallParser {
    state: State,
    buf: String,
    /// Text consumed since a call opened and before it was reported (returned as text if the
    /// call turns out not to be one).
    raw: String,
    /// Index of the current call (valid once started).
    index: usize,
    started: bool,
    /// Parameter types by function, for XML values: `string` ones stream as strings.
    string_params: HashMap<String, Vec<String>>,
    current: String,
    /// A call just ended: whitespace before the next text or call is dropped.
    after_call: bool,
}

impl ToolCallParser {
    /// A parser for a request with `tools` (OpenAI shape: `{"type": "function", "function":
    /// {"name", "parameters"}}`); the schemas tell which XML parameters are strings.
    pub fn new(tools: &[Value]) -> Self {
        let mut string_params = HashMap::new();
        for t in tools {
            let f = t.get("function").unwrap_or(t);
            let Some(name) = f.get("name").and_then(Value::as_str) else {
                continue;
            };
            let props = f
                .pointer("/parameters/properties")
                .and_then(Value::as_object);
            let strings = props
                .into_iter()
                .flatten()
                .filter(|(_, s)| s.get("type").and_then(Value::as_str) == Some("string"))
                .map(|(k, _)| k.clone())
                .collect();
            string_params.insert(name.to_string(), strings);
        }
        ToolCallParser {
            state: State::Text,
            buf: String::new(),
            raw: String::new(),
            index: 0,
            started: false,
            string_params,
            current: String::new(),
            after_call: false,
        }
    }

    /// Feeds the next piece of text; returns the events it completes.
    pub fn push(&mut self, text: &str) -> Vec<ToolEvent> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }

    /// Ends the text: held text comes out, an unfinished call is closed.
    pub fn finish(&mut self) -> Vec<ToolEvent> {
        let mut out = Vec::new();
        while self.step(&mut out) {}
        let rest = std::mem::take(&mut self.buf);
        match std::mem::replace(&mut self.state, State::Text) {
            State::Text if self.after_call && rest.trim().is_empty() => {}
            State::Text => out.push(ToolEvent::Text(rest)),
            State::Json(j) if !self.started => {
                out.push(ToolEvent::Text(format!("{}{}{rest}", self.raw, j.raw())))
            }
            State::Open | State::XmlName | State::Json(_) if !self.started => {
                out.push(ToolEvent::Text(format!("{}{rest}", self.raw)))
            }
            State::Xml(mut x) => {
                out.push(ToolEvent::Args {
                    index: self.index,
                    delta: x.finish(&rest),
                });
                self.end(&mut out);
            }
            _ => self.end(&mut out),
        }
        out.retain(
            |e| !matches!(e, ToolEvent::Text(t) | ToolEvent::Args { delta: t, .. } if t.is_empty()),
        );
        out
    }

    /// One transition; false when more text is needed.
    fn step(&mut self, out: &mut Vec<ToolEvent>) -> bool {
        match &mut self.state {
            State::Text => {
                if self.after_call {
                    let ws = self.buf.len() - self.buf.trim_start().len();
                    self.buf.drain(..ws);
                    if self.buf.is_empty() {
                        return false;
                    }
                    self.after_call = false;
                }
                if let Some((pos, which)) = find_first(&self.buf, &OPENERS) {
                    out.push(ToolEvent::Text(self.buf[..pos].to_string()));
                    self.raw = OPENERS[which].to_string();
                    self.buf.drain(..pos + OPENERS[which].len());
                    self.state = if which == 0 {
                        State::Open
                    } else {
                        State::XmlName
                    };
                    return true;
                }
                let hold = OPENERS
                    .iter()
                    .map(|t| partial_suffix(&self.buf, t))
                    .max()
                    .unwrap_or(0);
                let text: String = self.buf.drain(..self.buf.len() - hold).collect();
                out.push(ToolEvent::Text(text));
                false
            }
            State::Open => {
                let t = self.buf.trim_start();
                let ws = self.buf.len() - t.len();
                if t.starts_with('{') {
                    self.take_raw(ws);
                    self.state = State::Json(JsonCall::default());
                } else if t.starts_with(FUNCTION) {
                    self.take_raw(ws + FUNCTION.len());
                    self.state = State::XmlName;
                } else if t.is_empty() || FUNCTION.starts_with(t) {
                    return false;
                } else {
                    self.fall_back(out);
                }
                true
            }
            State::Json(_) => {
                let State::Json(mut j) = std::mem::replace(&mut self.state, State::Text) else {
                    return false;
                };
                let fed = j.feed(&self.buf);
                self.buf.drain(..fed.consumed);
                if let Some(name) = fed.name {
                    self.start(name, out);
                }
                if !fed.args.is_empty() {
                    out.push(ToolEvent::Args {
                        index: self.index,
                        delta: fed.args,
                    });
                }
                if !fed.done {
                    self.state = State::Json(j);
                    return false;
                }
                match j.complete() {
                    Some((name, args)) => {
                        if let Some(name) = name {
                            self.start(name, out);
                        }
                        if let Some(args) = args {
                            out.push(ToolEvent::Args {
                                index: self.index,
                                delta: args,
                            });
                        }
                        self.state = State::Close;
                    }
                    None if self.started => self.state = State::Close,
                    None => {
                        self.raw.push_str(j.raw());
                        self.fall_back(out);
                    }
                }
                true
            }
            State::XmlName => {
                let Some(gt) = self.buf.find('>') else {
                    if self.buf.contains(['\n', '<']) || self.buf.len() > 256 {
                        self.fall_back(out);
                        return true;
                    }
                    return false;
                };
                let name = self.buf[..gt].trim().to_string();
                if name.is_empty() || name.contains(['\n', '<']) {
                    self.fall_back(out);
                    return true;
                }
                self.buf.drain(..=gt);
                self.start(name, out);
                self.state = State::Xml(XmlCall::new());
                true
            }
            State::Xml(x) => {
                let strings = self.string_params.get(&self.current);
                let st = x.step(&self.buf, |k| {
                    strings.is_some_and(|s| s.iter().any(|p| p == k))
                });
                self.buf.drain(..st.consumed);
                if !st.args.is_empty() {
                    out.push(ToolEvent::Args {
                        index: self.index,
                        delta: st.args,
                    });
                }
                if st.done {
                    self.state = State::Close;
                }
                st.done || st.consumed > 0
            }
            State::Close => {
                let t = self.buf.trim_start();
                if t.is_empty() || (TOOL_CALL_END.starts_with(t) && t != TOOL_CALL_END) {
                    return false;
                }
                if t.starts_with(TOOL_CALL_END) {
                    let n = self.buf.len() - t.len() + TOOL_CALL_END.len();
                    self.buf.drain(..n);
                }
                self.end(out);
                true
            }
        }
    }

    fn take_raw(&mut self, n: usize) {
        let taken: String = self.buf.drain(..n).collect();
        self.raw.push_str(&taken);
    }

    fn start(&mut self, name: String, out: &mut Vec<ToolEvent>) {
        self.started = true;
        self.raw.clear();
        self.current = name.clone();
        out.push(ToolEvent::Start {
            index: self.index,
            name,
        });
    }

    fn end(&mut self, out: &mut Vec<ToolEvent>) {
        if self.started {
            out.push(ToolEvent::End { index: self.index });
            self.index += 1;
            self.after_call = true;
        }
        self.started = false;
        self.state = State::Text;
    }

    /// The opener was not a call after all: everything since it is text again.
    fn fall_back(&mut self, out: &mut Vec<ToolEvent>) {
        out.push(ToolEvent::Text(std::mem::take(&mut self.raw)));
        self.state = State::Text;
    }
}

#[cfg(test)]
#[path = "tool_calls_tests.rs"]
mod tests;
