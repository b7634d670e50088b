//! The body of a Qwen3-Coder-style XML call after `<function=NAME>`:
//! `<parameter=KEY>\nVALUE\n</parameter>` … `</function>`, turned into a JSON arguments object
//! piece by piece. A value whose schema type is `string` streams as a JSON string while it is
//! written; other values are buffered and become JSON (a number, an object) when they parse as
//! JSON, a string otherwise.

use super::{find_first, partial_suffix};

const PARAM: &str = "<parameter=";
const PARAM_END: &str = "</parameter>";
const FUNCTION_END: &str = "</function>";
const TOOL_CALL_END: &str = "</tool_call>";
/// Tags that end a value (a missing `</parameter>` is tolerated).
const VALUE_ENDS: [&str; 4] = [PARAM_END, PARAM, FUNCTION_END, TOOL_CALL_END];

/// Scanner state of one call's parameters.
#[derive(Debug)]
pub struct XmlCall {
    /// Parameters opened so far.
    n_params: usize,
    /// Inside a value: whether it streams as a string, and whether its leading newline is handled.
    value: Option<(bool, bool)>,
}

/// What a step produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Bytes consumed.
    pub consumed: usize,
    /// Argument text to pass on.
    pub args: String,
    /// `</function>` was read: the call is complete.
    pub done: bool,
}

/// A JSON string literal's inside (no quotes).
fn escape(s: &str) -> String {
    let q = serde_json::Value::String(s.to_string()).to_string();
    q[1..q.len() - 1].to_string()
}

/// A buffered parameter value as JSON text.
fn value_json(v: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(v.trim()) {
        Ok(parsed) if !v.trim().is_empty() => parsed.to_string(),
        _ => serde_json::Value::String(v.to_string()).to_string(),
    }
}

/// Strips one trailing newline (the template puts one before `</parameter>`).
fn trim_value_end(v: &str) -> &str {
    v.strip_suffix('\n').unwrap_or(v)
}

impl XmlCall {
    /// A call with no parameters read yet.
    pub fn new() -> Self {
        XmlCall {
            n_params: 0,
            value: None,
        }
    }

    /// Consumes what it can of `buf`. `is_string(key)` tells whether a parameter streams as a
    /// string. Returns `consumed == 0` and `done == false` when it needs more text.
    pub fn step(&mut self, buf: &str, is_string: impl Fn(&str) -> bool) -> Step {
        let mut st = Step::default();
        match self.value {
            None => {
                let t = buf.trim_start();
                let ws = buf.len() - t.len();
                if let Some(rest) = t.strip_prefix(PARAM) {
                    let Some(gt) = rest.find('>') else { return st };
                    let key = rest[..gt].trim();
                    let string = is_string(key);
                    st.args = format!(
                        "{}\"{}\": {}",
                        if self.n_params == 0 { "{" } else { ", " },
                        escape(key),
                        if string { "\"" } else { "" }
                    );
                    self.n_params += 1;
                    self.value = Some((string, false));
                    st.consumed = ws + PARAM.len() + gt + 1;
                } else if t.starts_with(FUNCTION_END) || t.starts_with(TOOL_CALL_END) {
                    // `</tool_call>` without `</function>` also ends the call (left for the caller).
                    st.args = if self.n_params == 0 {
                        "{}".into()
                    } else {
                        "}".into()
                    };
                    st.consumed = ws
                        + if t.starts_with(FUNCTION_END) {
                            FUNCTION_END.len()
                        } else {
                            0
                        };
                    st.done = true;
                } else if t.is_empty()
                    || [PARAM, FUNCTION_END, TOOL_CALL_END]
                        .iter()
                        .any(|p| p.starts_with(t))
                {
                    st.consumed = ws;
                } else {
                    // Stray text between parameters: skip it up to the next tag.
                    st.consumed = ws + t.find('<').filter(|p| *p > 0).unwrap_or(t.len());
                }
            }
            Some((string, started)) => {
                let mut skip = 0;
                if !started {
                    if buf.is_empty() {
                        return st;
                    }
                    if buf.starts_with('\n') {
                        skip = 1;
                    }
                    self.value = Some((string, true));
                }
                let body = &buf[skip..];
                if let Some((pos, which)) = find_first(body, &VALUE_ENDS) {
                    let v = trim_value_end(&body[..pos]);
                    st.args = if string {
                        format!("{}\"", escape(v))
                    } else {
                        value_json(v)
                    };
                    st.consumed = skip
                        + pos
                        + if VALUE_ENDS[which] == PARAM_END {
                            PARAM_END.len()
                        } else {
                            0
                        };
                    self.value = None;
                } else if string {
                    let hold = VALUE_ENDS
                        .iter()
                        .flat_map(|t| {
                            [
                                partial_suffix(body, t),
                                partial_suffix(body, &format!("\n{t}")),
                            ]
                        })
                        .max()
                        .unwrap_or(0);
                    st.args = escape(&body[..body.len() - hold]);
                    st.consumed = skip + body.len() - hold;
                } else {
                    st.consumed = skip;
                }
            }
        }
        st
    }

    /// Closes whatever is open when the text ends early; returns the argument text that makes
    /// the arguments a complete JSON object.
    pub fn finish(&mut self, rest: &str) -> String {
        let mut out = String::new();
        match self.value.take() {
            Some((true, started)) => {
                let body = if started {
                    rest
                } else {
                    rest.strip_prefix('\n').unwrap_or(rest)
                };
                out.push_str(&escape(trim_value_end(body)));
                out.push('"');
            }
            Some((false, started)) => {
                let body = if started {
                    rest
                } else {
                    rest.strip_prefix('\n').unwrap_or(rest)
                };
                out.push_str(&value_json(trim_value_end(body)));
            }
            None => {}
        }
        out.push_str(if self.n_params == 0 { "{}" } else { "}" });
        out
    }
}
