//! The JSON body of a Hermes-style call, `{"name": "f", "arguments": {...}}`, scanned one
//! character at a time so the name is known as soon as its string closes and the arguments
//! object can be passed on while it is still being written.

use serde_json::Value;

/// Where the scanner is inside the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    Key,
    Colon,
    Value,
    Comma,
}

/// What feeding text produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the input consumed (all of it unless the object closed).
    pub consumed: usize,
    /// The function name, the moment it became known (once).
    pub name: Option<String>,
    /// Argument text to pass on now.
    pub args: String,
    /// The object closed.
    pub done: bool,
}

/// Scanner state of one JSON call object.
#[derive(Debug, Default)]
pub struct JsonCall {
    raw: String,
    depth: usize,
    in_str: bool,
    esc: bool,
    top: Option<Top>,
    key: String,
    str_start: usize,
    named: bool,
    streaming: bool,
    streamed: bool,
}

fn is_args_key(k: &str) -> bool {
    k == "arguments" || k == "parameters"
}

impl JsonCall {
    /// The text scanned so far (for falling back to plain text).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Scans `s` (which starts at or after the object's `{`).
    pub fn feed(&mut self, s: &str) -> Fed {
        let mut fed = Fed {
            consumed: s.len(),
            ..Fed::default()
        };
        for (i, c) in s.char_indices() {
            let pos = self.raw.len();
            self.raw.push(c);
            let at_top = self.depth == 1;
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == '\\' {
                    self.esc = true;
                } else if c == '"' {
                    self.in_str = false;
                    if at_top {
                        let lit: String = serde_json::from_str(&self.raw[self.str_start..=pos])
                            .unwrap_or_default();
                        match self.top {
                            Some(Top::Key) => {
                                self.key = lit;
                                self.top = Some(Top::Colon);
                            }
                            Some(Top::Value) => {
                                if self.key == "name" && !self.named {
                                    self.named = true;
                                    fed.name = Some(lit);
                                }
                                self.top = Some(Top::Comma);
                            }
                            _ => {}
                        }
                    }
                }
            } else {
                match c {
                    '"' => {
                        self.in_str = true;
                        self.str_start = pos;
                    }
                    '{' | '[' => {
                        if at_top
                            && self.top == Some(Top::Value)
                            && is_args_key(&self.key)
                            && self.named
                        {
                            self.streaming = true;
                        }
                        if self.depth == 0 {
                            self.top = Some(Top::Key);
                        }
                        self.depth += 1;
                    }
                    '}' | ']' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 1 && self.top == Some(Top::Value) {
                            self.top = Some(Top::Comma);
                            if self.streaming {
                                fed.args.push(c);
                                self.streaming = false;
                                self.streamed = true;
                                continue;
                            }
                        }
                        if self.depth == 0 {
                            fed.consumed = i + c.len_utf8();
                            fed.done = true;
                            return fed;
                        }
                    }
                    ':' if at_top => self.top = Some(Top::Value),
                    ',' if at_top => self.top = Some(Top::Key),
                    _ => {}
                }
            }
            if self.streaming {
                fed.args.push(c);
            }
        }
        fed
    }

    /// After the object closed: the whole call parsed, as (name if not yet reported, arguments
    /// text if not yet streamed). `None` when the text is not a call object.
    pub fn complete(&self) -> Option<(Option<String>, Option<String>)> {
        let v: Value = serde_json::from_str(&self.raw).ok()?;
        let name = v.get("name")?.as_str()?.to_string();
        let args = v.get("arguments").or_else(|| v.get("parameters"));
        let args_text = match args {
            None | Some(Value::Null) => "{}".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        Some((
            (!self.named).then_some(name),
            (!self.streamed).then_some(args_text),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_first_then_arguments_streamed_verbatim() {
        let mut j = JsonCall::default();
        let f = j.feed(r#"{"name": "get_weather", "arg"#);
        assert_eq!(f.name.as_deref(), Some("get_weather"));
        let f = j.feed(r#"uments": {"city": "Pa"#);
        assert_eq!(f.args, r#"{"city": "Pa"#);
        let f = j.feed(r#"ris", "n": [1, {"x": "}"}]}} tail"#);
        assert_eq!(f.args, r#"ris", "n": [1, {"x": "}"}]}"#);
        assert!(f.done);
        assert_eq!(
            &r#"ris", "n": [1, {"x": "}"}]}} tail"#[f.consumed..],
            " tail"
        );
        assert_eq!(j.complete(), Some((None, None)));
    }

    #[test]
    fn arguments_before_name_or_as_a_string_are_reported_at_the_end() {
        let mut j = JsonCall::default();
        let f = j.feed(r#"{"arguments": {"a": 1}, "name": "f"}"#);
        assert!(f.done && f.args.is_empty());
        assert_eq!(f.name.as_deref(), Some("f"));
        assert_eq!(j.complete(), Some((None, Some(r#"{"a":1}"#.to_string()))));
        let mut j = JsonCall::default();
        j.feed(r#"{"name": "f", "arguments": "{\"a\": 1}"}"#);
        assert_eq!(j.complete(), Some((None, Some(r#"{"a": 1}"#.to_string()))));
        let mut j = JsonCall::default();
        j.feed(r#"{"nom": "f"}"#);
        assert_eq!(j.complete(), None);
    }
}
