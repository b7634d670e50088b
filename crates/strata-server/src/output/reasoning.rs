//! Splits `<think>…</think>` off the start of an answer into reasoning text (DeepSeek-R1 and
//! Qwen3 style). Only a think block at the very start counts; later tags are content.

use super::{partial_suffix, Delta};

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing decided yet: the answer may still open with `<think>`.
    Start,
    /// Inside the think block; `leading` while its leading whitespace is being dropped.
    Thinking { leading: bool },
    /// After the think block (or without one); `leading` drops the blank lines after `</think>`.
    Content { leading: bool },
}

/// Streaming `<think>` splitter: feed text with [`push`](Self::push), end with
/// [`finish`](Self::finish); both return [`Delta::Reasoning`] and [`Delta::Content`] pieces.
#[derive(Debug)]
pub struct ReasoningSplitter {
    state: State,
    buf: String,
}

impl ReasoningSplitter {
    /// `in_think`: the prompt already opened the think block (templates that end the generation
    /// prompt with `<think>`), so the answer starts as reasoning.
    pub fn new(in_think: bool) -> Self {
        let state = if in_think {
            State::Thinking { leading: true }
        } else {
            State::Start
        };
        ReasoningSplitter {
            state,
            buf: String::new(),
        }
    }

    /// Feeds the next piece of text.
    pub fn push(&mut self, text: &str) -> Vec<Delta> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Start => {
                    let t = self.buf.trim_start();
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        self.buf = rest.to_string();
                        self.state = State::Thinking { leading: true };
                    } else if OPEN.starts_with(t) {
                        return out; // still possibly "<thi…", or only whitespace so far
                    } else {
                        self.state = State::Content { leading: false };
                    }
                }
                State::Thinking { leading } => {
                    if leading {
                        self.drop_leading_whitespace();
                        if self.buf.is_empty() {
                            return out;
                        }
                        self.state = State::Thinking { leading: false };
                    }
                    if let Some(pos) = self.buf.find(CLOSE) {
                        out.push(Delta::Reasoning(self.buf[..pos].to_string()));
                        self.buf.drain(..pos + CLOSE.len());
                        self.state = State::Content { leading: true };
                    } else {
                        let keep = partial_suffix(&self.buf, CLOSE);
                        let emit: String = self.buf.drain(..self.buf.len() - keep).collect();
                        out.push(Delta::Reasoning(emit));
                        return out;
                    }
                }
                State::Content { leading } => {
                    if leading {
                        self.drop_leading_whitespace();
                        if self.buf.is_empty() {
                            return out;
                        }
                        self.state = State::Content { leading: false };
                    }
                    out.push(Delta::Content(std::mem::take(&mut self.buf)));
                    return out;
                }
            }
        }
    }

    /// Ends the text: an unfinished think block is still reasoning (the token limit hit it).
    pub fn finish(&mut self) -> Vec<Delta> {
        let rest = std::mem::take(&mut self.buf);
        match self.state {
            State::Thinking { .. } => vec![Delta::Reasoning(rest)],
            State::Start | State::Content { .. } => vec![Delta::Content(rest)],
        }
    }

    fn drop_leading_whitespace(&mut self) {
        let n = self.buf.len() - self.buf.trim_start().len();
        self.buf.drain(..n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::merge;

    fn split_every_way(text: &str, in_think: bool) -> Vec<Delta> {
        let whole = {
            let mut s = ReasoningSplitter::new(in_think);
            let mut v = s.push(text);
            v.extend(s.finish());
            merge(v)
        };
        for (i, _) in text.char_indices().skip(1) {
            let mut s = ReasoningSplitter::new(in_think);
            let mut v = s.push(&text[..i]);
            v.extend(s.push(&text[i..]));
            v.extend(s.finish());
            assert_eq!(merge(v), whole, "split at byte {i}");
        }
        let mut s = ReasoningSplitter::new(in_think);
        let mut v: Vec<Delta> = text.chars().flat_map(|c| s.push(&c.to_string())).collect();
        v.extend(s.finish());
        assert_eq!(merge(v), whole, "char by char");
        whole
    }

    #[test]
    fn think_block_becomes_reasoning_at_every_split() {
        let d = split_every_way(
            "<think>\nLet me think: 2+2=4 ✓\n</think>\n\nThe answer is 4.",
            false,
        );
        assert_eq!(
            d,
            vec![
                Delta::Reasoning("Let me think: 2+2=4 ✓\n".into()),
                Delta::Content("The answer is 4.".into())
            ]
        );
    }

    #[test]
    fn prompt_opened_think_and_unterminated_think() {
        let d = split_every_way("plan</think>done", true);
        assert_eq!(
            d,
            vec![
                Delta::Reasoning("plan".into()),
                Delta::Content("done".into())
            ]
        );
        let d = split_every_way("<think>still going", false);
        assert_eq!(d, vec![Delta::Reasoning("still going".into())]);
    }

    #[test]
    fn text_without_think_is_untouched_content() {
        let d = split_every_way("  Hello <think> is literal", false);
        assert_eq!(d, vec![Delta::Content("  Hello <think> is literal".into())]);
        let d = split_every_way("<thin", false);
        assert_eq!(d, vec![Delta::Content("<thin".into())]);
    }
}
