//! One measured request: a streamed chat or text completion, timed from the server's
//! llama.cpp-style `timings` when it sends them and from the arrival of stream events when it
//! does not; and prompts of a given token count made unique by a random prefix.

use std::time::Duration;

use anyhow::{bail, Result};
use rand::Rng;
use serde_json::{json, Value};

use crate::http::Client;

/// What one request cost and returned.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Prompt tokens (`usage.prompt_tokens`), cached ones included.
    pub prompt_tokens: usize,
    /// Prompt tokens served from the server's cache.
    pub cached_tokens: usize,
    /// Generated tokens.
    pub generated: usize,
    /// Time to the first generated text, client side.
    pub ttft: Duration,
    /// Whole request, client side.
    pub total: Duration,
    /// Prompt tokens computed per second (cached ones excluded).
    pub prompt_tps: f64,
    /// Generated tokens per second after the first.
    pub decode_tps: f64,
    /// True when the speeds come from the server's `timings`.
    pub server_timed: bool,
    /// Generated text (content, then reasoning if there was no content).
    pub text: String,
    /// Tool calls in OpenAI message form (`id`, `type`, `function{name, arguments}`).
    pub tool_calls: Vec<Value>,
}

/// Streams `body` to `/v1/chat/completions` (if `chat`) or `/v1/completions` and measures it.
/// `stream`, `stream_options` and greedy sampling are set here.
///
/// Errors: the request fails, or the server generated nothing and reported nothing.
pub fn stream(client: &Client, chat: bool, mut body: Value) -> Result<Measured> {
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    body["temperature"] = json!(0.0);
    let path = if chat {
        "/v1/chat/completions"
    } else {
        "/v1/completions"
    };
    let mut m = Measured::default();
    let mut reasoning = String::new();
    let mut arrivals: Vec<Duration> = Vec::new();
    let mut usage = Value::Null;
    let mut timings = Value::Null;
    client.post_stream(path, &body, |ev, t| {
        if let Some(u) = ev.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        if let Some(tm) = ev.get("timings").filter(|u| !u.is_null()) {
            timings = tm.clone();
        }
        let Some(choice) = ev["choices"].get(0) else {
            return;
        };
        let mut got = false;
        if chat {
            let d = &choice["delta"];
            if let Some(s) = d["content"].as_str().filter(|s| !s.is_empty()) {
                m.text.push_str(s);
                got = true;
            }
            if let Some(s) = d["reasoning_content"].as_str().filter(|s| !s.is_empty()) {
                reasoning.push_str(s);
                got = true;
            }
            if let Some(calls) = d["tool_calls"].as_array() {
                merge_tool_calls(&mut m.tool_calls, calls);
                got = true;
            }
        } else if let Some(s) = choice["text"].as_str().filter(|s| !s.is_empty()) {
            m.text.push_str(s);
            got = true;
        }
        if got {
            arrivals.push(t);
        }
        m.total = t;
    })?;
    if m.text.is_empty() {
        m.text = reasoning;
    }
    m.ttft = arrivals.first().copied().unwrap_or(m.total);
    m.prompt_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0) as usize;
    m.cached_tokens = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or(timings["cache_n"].as_u64())
        .unwrap_or(0) as usize;
    m.generated = usage["completion_tokens"]
        .as_u64()
        .map_or(arrivals.len(), |n| n as usize);
    if m.prompt_tokens == 0 {
        m.prompt_tokens = (timings["prompt_n"].as_u64().unwrap_or(0)
            + timings["cache_n"].as_u64().unwrap_or(0)) as usize;
    }
    match (
        timings["prompt_per_second"].as_f64(),
        timings["predicted_per_second"].as_f64(),
    ) {
        (Some(p), Some(d)) => {
            m.server_timed = true;
            m.prompt_tps = p;
            m.decode_tps = d;
        }
        _ => {
            let computed = m.prompt_tokens.saturating_sub(m.cached_tokens);
            m.prompt_tps = computed as f64 / m.ttft.as_secs_f64().max(1e-9);
            m.decode_tps = match (arrivals.first(), arrivals.last()) {
                (Some(a), Some(b)) if arrivals.len() > 1 && b > a => {
                    (arrivals.len() - 1) as f64 / (*b - *a).as_secs_f64()
                }
                _ => 0.0,
            };
        }
    }
    if m.generated == 0 && m.prompt_tokens == 0 {
        bail!("{path}: the server streamed no text and no usage");
    }
    Ok(m)
}

/// Folds streamed tool-call deltas (`index`, `id`, `function.name`, `function.arguments`
/// pieces) into whole calls.
fn merge_tool_calls(calls: &mut Vec<Value>, deltas: &[Value]) {
    for d in deltas {
        let i = d["index"].as_u64().unwrap_or(calls.len() as u64) as usize;
        while calls.len() <= i {
            calls.push(
                json!({"id": "", "type": "function", "function": {"name": "", "arguments": ""}}),
            );
        }
        let c = &mut calls[i];
        if let Some(id) = d["id"].as_str() {
            c["id"] = json!(id);
        }
        for key in ["name", "arguments"] {
            if let Some(s) = d["function"][key].as_str() {
                let old = c["function"][key].as_str().unwrap_or("").to_string();
                c["function"][key] = json!(old + s);
            }
        }
    }
}

/// A random 8-hex-digit tag that makes a prompt unique, so no cache serves it.
pub fn unique_tag() -> String {
    format!("{:08x}", rand::thread_rng().gen::<u32>())
}

/// Prose of about `tokens` tokens of the server's tokenizer, starting with a random tag.
///
/// Counted with the server's `/tokenize` (and cut with `/detokenize`) when it has them,
/// else estimated at 4 characters a token. The server's `usage` gives the exact count.
pub fn prompt_of(client: &Client, tokens: usize) -> Result<String> {
    let head = format!("Document {}.\n\n", unique_tag());
    // Ample text: English prose runs 4-5 characters a token.
    let body = crate::haystack::prose(tokens * 6 + 64);
    let text = format!("{head}{body}");
    match client.tokenize(&text)? {
        Some(ids) if ids.len() > tokens => client.detokenize(&ids[..tokens]),
        Some(_) => Ok(text),
        None => Ok(text.chars().take(tokens * 4).collect()),
    }
}
