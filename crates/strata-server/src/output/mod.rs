//! What the model's text means: reasoning (`<think>…</think>`), tool calls and plain content,
//! recognized incrementally as text streams in. [`OutputParser`] chains the two parsers.

mod json_call;
pub mod reasoning;
pub mod tool_calls;
mod xml_call;

pub use reasoning::ReasoningSplitter;
pub use tool_calls::{ToolCallParser, ToolEvent};

/// A piece of the model's answer, in the order it was generated.
#[allow(missing_docs)] // Variant docs describe their fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Visible answer text.
    Content(String),
    /// Reasoning text (inside `<think>…</think>`).
    Reasoning(String),
    /// A tool call opens: its position among this answer's calls and the function name.
    ToolStart { index: usize, name: String },
    /// More of a tool call's arguments (JSON text; the pieces concatenate to the arguments).
    ToolArgs { index: usize, delta: String },
    /// A tool call is complete.
    ToolEnd { index: usize },
}

/// Splits reasoning off first, then finds tool calls in what remains.
#[derive(Debug)]
pub struct OutputParser {
    reasoning: Option<ReasoningSplitter>,
    tools: Option<ToolCallParser>,
}

impl OutputParser {
    /// `reasoning`: split `<think>` blocks off; `tools`: recognize tool calls.
    pub fn new(reasoning: Option<ReasoningSplitter>, tools: Option<ToolCallParser>) -> Self {
        OutputParser { reasoning, tools }
    }

    /// Feeds the next piece of generated text; returns what is now certain.
    pub fn push(&mut self, text: &str) -> Vec<Delta> {
        let parts = match &mut self.reasoning {
            Some(r) => r.push(text),
            None => vec![Delta::Content(text.to_string())],
        };
        self.route(parts)
    }

    /// Ends the text; returns everything still held back.
    pub fn finish(&mut self) -> Vec<Delta> {
        let parts = match &mut self.reasoning {
            Some(r) => r.finish(),
            None => Vec::new(),
        };
        let mut out = self.route(parts);
        if let Some(t) = &mut self.tools {
            out.extend(t.finish().into_iter().map(Delta::from));
        }
        out
    }

    fn route(&mut self, parts: Vec<Delta>) -> Vec<Delta> {
        let mut out = Vec::new();
        for p in parts {
            match (p, &mut self.tools) {
                (Delta::Content(text), Some(t)) => {
                    out.extend(t.push(&text).into_iter().map(Delta::from))
                }
                (Delta::Content(text), None) if text.is_empty() => {}
                (p, _) => out.push(p),
            }
        }
        out
    }
}

impl From<ToolEvent> for Delta {
    fn from(e: ToolEvent) -> Self {
        match e {
            ToolEvent::Text(t) => Delta::Content(t),
            ToolEvent::Start { index, name } => Delta::ToolStart { index, name },
            ToolEvent::Args { index, delta } => Delta::ToolArgs { index, delta },
            ToolEvent::End { index } => Delta::ToolEnd { index },
        }
    }
}

/// Byte length of the longest suffix of `s` that is a proper prefix of `pat` (text that may be
/// the start of `pat` and must be held back until more arrives).
pub(crate) fn partial_suffix(s: &str, pat: &str) -> usize {
    let max = pat.len().saturating_sub(1).min(s.len());
    (1..=max)
        .rev()
        .find(|&n| {
            s.is_char_boundary(s.len() - n)
                && pat.as_bytes().starts_with(&s.as_bytes()[s.len() - n..])
        })
        .unwrap_or(0)
}

/// The earliest occurrence of any of `pats` in `s`: (byte offset, index into `pats`).
pub(crate) fn find_first(s: &str, pats: &[&str]) -> Option<(usize, usize)> {
    pats.iter()
        .enumerate()
        .filter_map(|(i, p)| s.find(p).map(|pos| (pos, i)))
        .min()
}

/// Merges adjacent deltas of the same kind (tests and non-streaming responses).
pub fn merge(deltas: Vec<Delta>) -> Vec<Delta> {
    let mut out: Vec<Delta> = Vec::new();
    for d in deltas {
        match (out.last_mut(), d) {
            (Some(Delta::Content(a)), Delta::Content(b)) => a.push_str(&b),
            (Some(Delta::Reasoning(a)), Delta::Reasoning(b)) => a.push_str(&b),
            (
                Some(Delta::ToolArgs { index: i, delta: a }),
                Delta::ToolArgs { index: j, delta: b },
            ) if *i == j => a.push_str(&b),
            (_, Delta::Content(b)) if b.is_empty() => {}
            (_, Delta::Reasoning(b)) if b.is_empty() => {}
            (_, d) => out.push(d),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_suffix_finds_a_started_tag() {
        assert_eq!(partial_suffix("abc<too", "<tool_call>"), 4);
        assert_eq!(partial_suffix("abc", "<tool_call>"), 0);
        assert_eq!(partial_suffix("<tool_call>", "<tool_call>"), 0);
        assert_eq!(partial_suffix("é<", "<x"), 1);
    }

    #[test]
    fn reasoning_then_tool_call_in_one_answer() {
        let tools = ToolCallParser::new(&[]);
        let mut p = OutputParser::new(Some(ReasoningSplitter::new(false)), Some(tools));
        let text = "<think>\nuse the tool</think>\n\nOK <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        let mut all = Vec::new();
        for c in text.chars() {
            all.extend(p.push(&c.to_string()));
        }
        all.extend(p.finish());
        assert_eq!(
            merge(all),
            vec![
                Delta::Reasoning("use the tool".into()),
                Delta::Content("OK ".into()),
                Delta::ToolStart {
                    index: 0,
                    name: "f".into()
                },
                Delta::ToolArgs {
                    index: 0,
                    delta: "{}".into()
                },
                Delta::ToolEnd { index: 0 },
            ]
        );
    }
}

/// A whole answer assembled from its deltas.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Visible text.
    pub content: String,
    /// Reasoning text.
    pub reasoning: String,
    /// Tool calls in order: (function name, arguments JSON text).
    pub tool_calls: Vec<(String, String)>,
}

impl Answer {
    /// Gathers `deltas` (in generation order).
    pub fn from_deltas(deltas: impl IntoIterator<Item = Delta>) -> Answer {
        let mut a = Answer::default();
        for d in deltas {
            match d {
                Delta::Content(t) => a.content.push_str(&t),
                Delta::Reasoning(t) => a.reasoning.push_str(&t),
                Delta::ToolStart { name, .. } => a.tool_calls.push((name, String::new())),
                Delta::ToolArgs { delta, .. } => {
                    if let Some(call) = a.tool_calls.last_mut() {
                        call.1.push_str(&delta);
                    }
                }
                Delta::ToolEnd { .. } => {}
            }
        }
        a
    }
}
