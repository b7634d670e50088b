//! The agent session: a replayed multi-turn coding conversation with tools. Every turn resends
//! the whole conversation plus the model's previous answer, a tool result and a new question —
//! what coding agents do — so a server that keeps the conversation cached computes only the
//! new tokens. The share it serves from cache is `usage.prompt_tokens_details.cached_tokens`.

use anyhow::Result;
use serde_json::{json, Value};

use super::measure::{self, Measured};
use crate::http::Client;

/// One scripted step: the user's question, then the tool the assistant calls and its result.
struct Step {
    question: &'static str,
    tool: &'static str,
    args: &'static str,
    result: &'static str,
}

const STEPS: [Step; 6] = [
    Step {
        question: "The test `parse_duration_handles_hours` fails in CI. Find out why; start by reading src/duration.rs.",
        tool: "read_file",
        args: r#"{"path": "src/duration.rs"}"#,
        result: "pub fn parse_duration(s: &str) -> Result<u64, String> {\n    let (num, unit) = s.split_at(s.len() - 1);\n    let n: u64 = num.parse().map_err(|e| format!(\"bad number '{num}': {e}\"))?;\n    match unit {\n        \"s\" => Ok(n),\n        \"m\" => Ok(n * 60),\n        \"h\" => Ok(n * 60),\n        other => Err(format!(\"unknown unit '{other}'\")),\n    }\n}\n\n#[test]\nfn parse_duration_handles_hours() {\n    assert_eq!(parse_duration(\"2h\"), Ok(7200));\n}\n",
    },
    Step {
        question: "Run the duration tests and tell me what fails.",
        tool: "run_tests",
        args: r#"{"filter": "duration"}"#,
        result: "running 3 tests\ntest parse_duration_handles_seconds ... ok\ntest parse_duration_handles_minutes ... ok\ntest parse_duration_handles_hours ... FAILED\n\nfailures:\n---- parse_duration_handles_hours stdout ----\nassertion `left == right` failed\n  left: Ok(120)\n right: Ok(7200)\n\ntest result: FAILED. 2 passed; 1 failed",
    },
    Step {
        question: "Who else calls parse_duration? Search the code.",
        tool: "search_code",
        args: r#"{"query": "parse_duration("}"#,
        result: "src/config.rs:41:    let timeout = parse_duration(&raw.timeout)?;\nsrc/config.rs:57:    let retry_after = parse_duration(&raw.retry_after)?;\nsrc/cli.rs:88:        .map(|s| parse_duration(s))\ntests/config.rs:12:    assert_eq!(load(\"timeout = '1h'\").timeout, 3600);",
    },
    Step {
        question: "Read src/config.rs around those lines; does anything there depend on the wrong value?",
        tool: "read_file",
        args: r#"{"path": "src/config.rs", "lines": "35-60"}"#,
        result: "35 pub fn load(text: &str) -> Result<Config, String> {\n36     let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;\n37     // Timeouts under a minute make no sense for uploads; the hour bug hid this.\n38     if raw.timeout.ends_with('s') {\n39         return Err(\"timeout must be given in minutes or hours\".into());\n40     }\n41     let timeout = parse_duration(&raw.timeout)?;\n57     let retry_after = parse_duration(&raw.retry_after)?;\n58     Ok(Config { timeout, retry_after })\n59 }",
    },
    Step {
        question: "Fix the bug in parse_duration and run all tests again.",
        tool: "run_tests",
        args: r#"{"filter": ""}"#,
        result: "running 14 tests\ntest parse_duration_handles_seconds ... ok\ntest parse_duration_handles_minutes ... ok\ntest parse_duration_handles_hours ... ok\ntest config_timeout_in_hours ... ok\n... 10 more ok\n\ntest result: ok. 14 passed; 0 failed",
    },
    Step {
        question: "Summarize the bug and the fix in two sentences for the commit message.",
        tool: "search_code",
        args: r#"{"query": "CHANGELOG"}"#,
        result: "CHANGELOG.md:1:# Changelog\nCHANGELOG.md:3:## Unreleased",
    },
];

fn tools() -> Value {
    let tool = |name: &str, desc: &str, params: Value| json!({"type": "function", "function": {"name": name, "description": desc, "parameters": params}});
    json!([
        tool(
            "read_file",
            "Read a file of the repository.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "lines": {"type": "string"}}, "required": ["path"]})
        ),
        tool(
            "run_tests",
            "Run the test suite, optionally filtered by name.",
            json!({"type": "object", "properties": {"filter": {"type": "string"}}, "required": ["filter"]})
        ),
        tool(
            "search_code",
            "Search the repository for a string.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
        ),
    ])
}

/// Runs a session of `turns` turns (the script repeats after six) with at most `max_tokens`
/// generated per turn; returns one measurement per turn.
///
/// Errors: a request fails.
pub fn session(
    client: &Client,
    model: &str,
    turns: usize,
    max_tokens: usize,
) -> Result<Vec<Measured>> {
    let system = format!(
        "You are a careful coding assistant working in repository `svc-{}`. Use the tools to \
         inspect files and run tests before answering. Keep answers short.",
        measure::unique_tag()
    );
    let mut messages = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": STEPS[0].question}),
    ];
    let mut out = Vec::with_capacity(turns);
    for turn in 0..turns {
        let body = json!({
            "model": model,
            "messages": messages,
            "tools": tools(),
            "max_tokens": max_tokens,
            "chat_template_kwargs": {"enable_thinking": false},
        });
        let m = measure::stream(client, true, body)?;
        let step = &STEPS[turn % STEPS.len()];
        // Replay what the model said; if it called no tool, the script's call stands in.
        let mut calls = m.tool_calls.clone();
        if calls.is_empty() {
            calls.push(json!({"id": "", "type": "function", "function": {"name": step.tool, "arguments": step.args}}));
        }
        for (j, c) in calls.iter_mut().enumerate() {
            if c["id"].as_str().unwrap_or("").is_empty() {
                c["id"] = json!(format!("call_{turn}_{j}"));
            }
        }
        let ids: Vec<Value> = calls.iter().map(|c| c["id"].clone()).collect();
        messages.push(json!({"role": "assistant", "content": m.text, "tool_calls": calls}));
        for id in ids {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": step.result}));
        }
        messages.push(json!({"role": "user", "content": STEPS[(turn + 1) % STEPS.len()].question}));
        out.push(m);
    }
    Ok(out)
}
