//! The Anthropic event stream: `message_start`, `ping`, then per content block
//! `content_block_start`, `content_block_delta`…, `content_block_stop` (thinking, text and
//! tool_use blocks in generation order), then `message_delta` with the stop reason and usage,
//! and `message_stop`. A failure is an `error` event.

use axum::response::sse::Event as SseEvent;
use serde_json::{json, Value};

use super::messages::{stop_reason, usage};
use crate::output::{Delta, OutputParser};
use crate::sse::named_event;
use crate::state::new_id;
use crate::worker::Event;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Thinking,
    Text,
    Tool,
}

/// Formatter state of one stream.
pub struct MessageStream {
    id: String,
    model: String,
    prompt_tokens: usize,
    parser: OutputParser,
    open: Option<Block>,
    index: usize,
    tools: bool,
}

fn event(name: &str, mut body: Value) -> SseEvent {
    body["type"] = json!(name);
    named_event(name, &body)
}

impl MessageStream {
    /// A stream for message `id`.
    pub fn new(id: String, model: String, prompt_tokens: usize, parser: OutputParser) -> Self {
        MessageStream {
            id,
            model,
            prompt_tokens,
            parser,
            open: None,
            index: 0,
            tools: false,
        }
    }

    fn close(&mut self, out: &mut Vec<SseEvent>) {
        if self.open.take().is_some() {
            out.push(event("content_block_stop", json!({"index": self.index})));
            self.index += 1;
        }
    }

    fn open(&mut self, kind: Block, block: Value, out: &mut Vec<SseEvent>) {
        self.close(out);
        out.push(event(
            "content_block_start",
            json!({"index": self.index, "content_block": block}),
        ));
        self.open = Some(kind);
    }

    fn delta(&self, delta: Value) -> SseEvent {
        event(
            "content_block_delta",
            json!({"index": self.index, "delta": delta}),
        )
    }

    fn deltas(&mut self, deltas: Vec<Delta>) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for d in deltas {
            match d {
                Delta::Reasoning(t) if !t.is_empty() => {
                    if self.open != Some(Block::Thinking) {
                        self.open(
                            Block::Thinking,
                            json!({"type": "thinking", "thinking": ""}),
                            &mut out,
                        );
                    }
                    out.push(self.delta(json!({"type": "thinking_delta", "thinking": t})));
                }
                Delta::Content(t) if !t.is_empty() => {
                    if self.open != Some(Block::Text) {
                        self.open(Block::Text, json!({"type": "text", "text": ""}), &mut out);
                    }
                    out.push(self.delta(json!({"type": "text_delta", "text": t})));
                }
                Delta::ToolStart { name, .. } => {
                    self.tools = true;
                    let block = json!({"type": "tool_use", "id": new_id("toolu_"), "name": name, "input": {}});
                    self.open(Block::Tool, block, &mut out);
                }
                Delta::ToolArgs { delta, .. } if self.open == Some(Block::Tool) => {
                    out.push(
                        self.delta(json!({"type": "input_json_delta", "partial_json": delta})),
                    );
                }
                Delta::ToolEnd { .. } => self.close(&mut out),
                _ => {}
            }
        }
        out
    }

    /// `message_start`, `ping`, and any forced tool-call start.
    pub fn head(&mut self, opening: Vec<Delta>) -> Vec<SseEvent> {
        let message = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
        });
        let mut out = vec![
            event("message_start", json!({"message": message})),
            event("ping", json!({})),
        ];
        out.extend(self.deltas(opening));
        out
    }

    /// The events for one engine event.
    pub fn on_event(&mut self, ev: Event) -> Vec<SseEvent> {
        match ev {
            Event::Text { text, .. } => {
                let d = self.parser.push(&text);
                self.deltas(d)
            }
            Event::Done(stats) => {
                let rest = self.parser.finish();
                let mut out = self.deltas(rest);
                if self.index == 0 && self.open.is_none() {
                    // Every message has at least one block.
                    self.open(Block::Text, json!({"type": "text", "text": ""}), &mut out);
                }
                self.close(&mut out);
                let (reason, seq) = stop_reason(&stats.finish, self.tools);
                out.push(event("message_delta", json!({"delta": {"stop_reason": reason, "stop_sequence": seq}, "usage": usage(&stats)})));
                out.push(event("message_stop", json!({})));
                out
            }
            Event::Failed(e) => vec![named_event("error", &e.anthropic_body())],
        }
    }
}
