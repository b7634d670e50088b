//! `strata serve` details a client sees: the model id (the known name, or the file name
//! without `.gguf`, dots kept), 404 in OpenAI's shape for a model that is not loaded unless
//! `--alias` allows it, a 413 that names `--max-body-mib`, error messages without Rust type
//! names, and one log line per request. Models: SmolLM2-135M and Qwen2.5-Coder-0.5B (missing,
//! the tests fail).

mod common;

use std::path::Path;

use common::{models_dir, smollm2, temp_dir, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

fn post(url: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = Client::new()
        .post(format!("{url}{path}"))
        .json(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn model_ids(url: &str) -> Vec<String> {
    let v: Value = Client::new()
        .get(format!("{url}/v1/models"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0})
}

/// Lines of the server's log that contain every one of `parts`.
fn log_lines(log: &Path, parts: &[&str]) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_string)
        .collect()
}

#[test]
fn model_id_keeps_the_dots_of_a_known_name() {
    let qwen = models_dir().join("qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf");
    assert!(
        qwen.exists(),
        "{} is missing: run `strata pull qwen2.5-coder-0.5b`",
        qwen.display()
    );
    let dir = temp_dir("serve-id");
    let log = dir.join("serve.log");
    let s = Server::logged(
        &[
            "serve",
            "-m",
            "qwen2.5-coder-0.5b",
            "--port",
            "0",
            "--ctx",
            "512",
        ],
        &log,
    );
    assert_eq!(model_ids(&s.url), ["qwen2.5-coder-0.5b"]);
    drop(s);

    // Any other file: its name without .gguf, dots kept.
    let file = dir.join("my-model.v2.Q4_1.gguf");
    std::os::unix::fs::symlink(smollm2(), &file).unwrap();
    let s = Server::logged(
        &[
            "serve",
            "-m",
            file.to_str().unwrap(),
            "--port",
            "0",
            "--ctx",
            "512",
        ],
        &log,
    );
    assert_eq!(model_ids(&s.url), ["my-model.v2.Q4_1"]);
    let (status, _) = post(&s.url, "/v1/chat/completions", &chat("my-model.v2.Q4_1"));
    assert_eq!(status, 200);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_models_get_404_unless_an_alias_allows_them() {
    let dir = temp_dir("serve-404");
    let log = dir.join("serve.log");
    let m = smollm2();
    let s = Server::logged(
        &[
            "serve",
            "-m",
            m.to_str().unwrap(),
            "--port",
            "0",
            "--ctx",
            "512",
        ],
        &log,
    );
    assert_eq!(model_ids(&s.url), ["smollm2-135m"]);
    let (status, body) = post(&s.url, "/v1/chat/completions", &chat("smollm2-135m"));
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&s.url, "/v1/chat/completions", &chat("gpt-4o"));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found", "{body}");
    assert_eq!(body["error"]["param"], "model", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("gpt-4o") && msg.contains("smollm2-135m") && msg.contains("--alias"),
        "{msg}"
    );
    let (status, body) = post(
        &s.url,
        "/v1/messages",
        &json!({"model": "claude-x", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["type"], "error", "Anthropic's shape: {body}");
    drop(s);

    // --alias names another id (reported) and keeps the real one; `*` accepts anything.
    let s = Server::logged(
        &[
            "serve",
            "-m",
            m.to_str().unwrap(),
            "--port",
            "0",
            "--ctx",
            "512",
            "--alias",
            "gpt-4o",
        ],
        &log,
    );
    assert_eq!(model_ids(&s.url), ["gpt-4o"]);
    assert_eq!(post(&s.url, "/v1/chat/completions", &chat("gpt-4o")).0, 200);
    assert_eq!(
        post(&s.url, "/v1/chat/completions", &chat("smollm2-135m")).0,
        200
    );
    assert_eq!(post(&s.url, "/v1/chat/completions", &chat("other")).0, 404);
    drop(s);
    let s = Server::logged(
        &[
            "serve",
            "-m",
            m.to_str().unwrap(),
            "--port",
            "0",
            "--ctx",
            "512",
            "--alias",
            "*",
        ],
        &log,
    );
    assert_eq!(model_ids(&s.url), ["smollm2-135m"]);
    assert_eq!(
        post(&s.url, "/v1/chat/completions", &chat("anything")).0,
        200
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_flag_and_no_rust_types_and_every_request_is_logged() {
    let dir = temp_dir("serve-errors");
    let log = dir.join("serve.log");
    let m = smollm2();
    let s = Server::logged(
        &[
            "serve",
            "-m",
            m.to_str().unwrap(),
            "--port",
            "0",
            "--ctx",
            "512",
            "--max-body-mib",
            "1",
        ],
        &log,
    );
    // 413 names the flag that raises the limit.
    let big = json!({"model": "smollm2-135m", "messages": [{"role": "user", "content": "x".repeat(2 << 20)}]});
    let (status, body) = post(&s.url, "/v1/chat/completions", &big);
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-body-mib"),
        "{body}"
    );

    // A field of the wrong type: the message speaks JSON, not Rust.
    for bad in [
        json!({"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": "ten"}),
        json!({"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": -4}),
        json!({"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}], "temperature": "hot"}),
        json!({"model": "smollm2-135m", "messages": "Hi"}),
        json!({"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}], "stream": 3}),
    ] {
        let (status, body) = post(&s.url, "/v1/chat/completions", &bad);
        assert_eq!(status, 400, "{bad}: {body}");
        let msg = body["error"]["message"].as_str().unwrap();
        for rust in [
            "u64", "u32", "usize", "i64", "f32", "f64", "struct ", "enum ", "Vec<", "Option<",
        ] {
            assert!(
                !msg.contains(rust),
                "{bad}: {msg:?} shows the Rust type {rust:?}"
            );
        }
    }

    // One line per request: route, model, status; generations with tokens, speed and queue.
    let (status, _) = post(&s.url, "/v1/chat/completions", &chat("smollm2-135m"));
    assert_eq!(status, 200);
    let (status, _) = post(
        &s.url,
        "/v1/completions",
        &json!({"model": "smollm2-135m", "prompt": "Hi", "max_tokens": 2}),
    );
    assert_eq!(status, 200);
    let _ = post(&s.url, "/v1/chat/completions", &chat("nope"));
    let _ = Client::new()
        .get(format!("{}/v1/models", s.url))
        .send()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let gen = log_lines(
        &log,
        &[
            "POST /v1/chat/completions smollm2-135m 200: prompt",
            "generated",
            "tok/s",
            "queue",
        ],
    );
    assert_eq!(gen.len(), 1, "{:?}", std::fs::read_to_string(&log));
    assert_eq!(
        log_lines(&log, &["POST /v1/completions smollm2-135m 200: prompt"]).len(),
        1
    );
    assert_eq!(
        log_lines(&log, &["POST /v1/chat/completions smollm2-135m 404"]).len(),
        1
    );
    assert_eq!(
        log_lines(&log, &["POST /v1/chat/completions smollm2-135m 413"]).len(),
        1
    );
    assert_eq!(
        log_lines(&log, &["POST /v1/chat/completions smollm2-135m 400"]).len(),
        5
    );
    assert_eq!(
        log_lines(&log, &["GET /v1/models smollm2-135m 200"]).len(),
        1
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
