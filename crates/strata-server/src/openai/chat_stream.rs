//! The chunks of a streamed chat completion: a role chunk, one chunk per content, reasoning or
//! tool-call delta, a final chunk with `finish_reason` and `timings`, an optional usage chunk,
//! then `data: [DONE]`. An engine failure or a `response_format` violation is sent as an
//! `{"error": …}` event (the SDKs raise it) before `[DONE]`.

use axum::response::sse::Event as SseEvent;
use serde_json::{json, Value};

use super::chat::finish_reason;
use crate::generation::{chat_logprobs, timings, usage};
use crate::output::{Delta, OutputParser};
use crate::schema::ResponseFormat;
use crate::sse::json_event;
use crate::state::{new_id, unix_now};
use crate::worker::{Event, TokenLogprob};

/// Formatter state of one stream.
pub struct ChatStream {
    id: String,
    created: u64,
    model: String,
    parser: OutputParser,
    include_usage: bool,
    format: ResponseFormat,
    content: String,
    call_ids: Vec<String>,
}

impl ChatStream {
    /// A stream for completion `id`.
    pub fn new(
        id: String,
        model: String,
        parser: OutputParser,
        include_usage: bool,
        format: ResponseFormat,
    ) -> Self {
        ChatStream {
            id,
            created: unix_now(),
            model,
            parser,
            include_usage,
            format,
            content: String::new(),
            call_ids: Vec::new(),
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>, logprobs: Option<Value>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        })
    }

    fn delta_json(&mut self, d: Delta) -> Option<Value> {
        Some(match d {
            Delta::Content(t) => {
                self.content.push_str(&t);
                json!({"content": t})
            }
            Delta::Reasoning(t) => json!({"reasoning_content": t}),
            Delta::ToolStart { index, name } => {
                let id = new_id("call_");
                self.call_ids.push(id.clone());
                json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]})
            }
            Delta::ToolArgs { index, delta } => {
                json!({"tool_calls": [{"index": index, "function": {"arguments": delta}}]})
            }
            Delta::ToolEnd { .. } => return None,
        })
    }

    fn deltas(&mut self, deltas: Vec<Delta>, logprobs: &[TokenLogprob]) -> Vec<SseEvent> {
        let mut lp = (!logprobs.is_empty()).then(|| chat_logprobs(logprobs));
        let mut out = Vec::new();
        for d in deltas {
            if let Some(delta) = self.delta_json(d) {
                out.push(json_event(&self.chunk(delta, None, lp.take())));
            }
        }
        if let Some(lp) = lp {
            out.push(json_event(&self.chunk(
                json!({"content": ""}),
                None,
                Some(lp),
            )));
        }
        out
    }

    /// The opening chunks: the assistant role, then any forced tool-call start.
    pub fn head(&mut self, opening: Vec<Delta>) -> Vec<SseEvent> {
        let mut out = vec![json_event(&self.chunk(
            json!({"role": "assistant", "content": ""}),
            None,
            None,
        ))];
        out.extend(self.deltas(opening, &[]));
        out
    }

    /// The chunks for one engine event.
    pub fn on_event(&mut self, ev: Event) -> Vec<SseEvent> {
        match ev {
            Event::Text { text, logprobs } => {
                let deltas = self.parser.push(&text);
                self.deltas(deltas, &logprobs)
            }
            Event::Done(stats) => {
                let rest = self.parser.finish();
                let mut out = self.deltas(rest, &[]);
                let tools = !self.call_ids.is_empty();
                if !tools {
                    if let Err(e) = self.format.check(&self.content) {
                        out.push(json_event(&e.openai_body()));
                        out.push(SseEvent::default().data("[DONE]"));
                        return out;
                    }
                }
                let mut last =
                    self.chunk(json!({}), Some(finish_reason(&stats.finish, tools)), None);
                last["timings"] = timings(&stats);
                out.push(json_event(&last));
                if self.include_usage {
                    let mut u = self.chunk(json!({}), None, None);
                    u["choices"] = json!([]);
                    u["usage"] = usage(&stats);
                    out.push(json_event(&u));
                }
                out.push(SseEvent::default().data("[DONE]"));
                out
            }
            Event::Failed(e) => vec![
                json_event(&e.openai_body()),
                SseEvent::default().data("[DONE]"),
            ],
        }
    }
}
