//! A small blocking HTTP client for OpenAI-compatible servers — `strata serve` and
//! llama.cpp's `llama-server` alike: JSON requests, server-sent-event streams with the arrival
//! time of every event, `/tokenize` + `/detokenize`, and a probe of what the server is
//! (model, context size, settings) from `/v1/status` (Strata) or `/props` (llama-server).

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// A client bound to one server base URL (`http://127.0.0.1:8080`, with or without `/v1`).
pub struct Client {
    base: String,
    api_key: Option<String>,
    http: reqwest::blocking::Client,
}

impl Client {
    /// A client for `url`; `timeout` bounds each whole request (long prompts take minutes on
    /// a CPU). Errors: the HTTP client cannot be built.
    pub fn new(url: &str, api_key: Option<String>, timeout: Duration) -> Result<Client> {
        let mut base = url.trim_end_matches('/').to_string();
        if let Some(stripped) = base.strip_suffix("/v1") {
            base = stripped.to_string();
        }
        if !base.starts_with("http://") && !base.starts_with("https://") {
            bail!("--url must start with http:// or https://, got '{url}'");
        }
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
            .context("building the HTTP client")?;
        Ok(Client {
            base,
            api_key,
            http,
        })
    }

    /// The base URL without a trailing `/v1`.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::blocking::RequestBuilder {
        let rb = self.http.request(method, format!("{}{path}", self.base));
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    /// `GET path` as JSON. Errors: connection failure, a non-2xx status (with the server's
    /// message), or a body that is not JSON.
    pub fn get_json(&self, path: &str) -> Result<Value> {
        let resp = self
            .request(reqwest::Method::GET, path)
            .send()
            .with_context(|| format!("GET {}{path}", self.base))?;
        json_body(resp, path)
    }

    /// `GET path` as JSON, or `None` on any failure (for optional probes).
    pub fn try_get_json(&self, path: &str) -> Option<Value> {
        self.get_json(path).ok()
    }

    /// `POST path` with a JSON body; the answer as JSON. Errors as [`Client::get_json`].
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        let resp = self
            .request(reqwest::Method::POST, path)
            .json(body)
            .send()
            .with_context(|| format!("POST {}{path}", self.base))?;
        json_body(resp, path)
    }

    /// `POST path` with `stream: true` semantics: calls `on_event(data, since_start)` for every
    /// `data:` line of the server-sent-event stream (until `[DONE]` or the end of the body).
    ///
    /// Errors: connection failure, a non-2xx status, an event that is not JSON, or an event
    /// carrying an `error` object.
    pub fn post_stream(
        &self,
        path: &str,
        body: &Value,
        mut on_event: impl FnMut(&Value, Duration),
    ) -> Result<()> {
        let start = Instant::now();
        let resp = self
            .request(reqwest::Method::POST, path)
            .json(body)
            .send()
            .with_context(|| format!("POST {}{path}", self.base))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().unwrap_or_default();
            bail!("POST {path}: HTTP {status}: {}", error_message(&text));
        }
        for line in BufReader::new(resp).lines() {
            let line = line.with_context(|| format!("reading the stream of {path}"))?;
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(data)
                .with_context(|| format!("{path}: bad event '{data}'"))?;
            if let Some(e) = v.get("error") {
                bail!(
                    "{path}: the server reported an error: {}",
                    e.get("message").unwrap_or(e)
                );
            }
            on_event(&v, start.elapsed());
        }
        Ok(())
    }

    /// Waits until `GET /health` answers 200, polling every 250 ms. Errors after `timeout`.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let ok = self
                .request(reqwest::Method::GET, "/health")
                .send()
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("{} did not become ready within {:.0?}", self.base, timeout);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Token ids of `text` without special tokens, or `None` if the server has no
    /// `/tokenize`. Errors: the server has one but it failed.
    pub fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>> {
        let resp = self
            .request(reqwest::Method::POST, "/tokenize")
            .json(&json!({"content": text, "add_special": false}))
            .send()
            .context("POST /tokenize")?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let v = json_body(resp, "/tokenize")?;
        let ids = v["tokens"]
            .as_array()
            .ok_or_else(|| anyhow!("/tokenize: no 'tokens' array in the answer"))?
            .iter()
            .map(|t| t.as_u64().or_else(|| t["id"].as_u64()).map(|x| x as u32))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| anyhow!("/tokenize: a token is not an id"))?;
        Ok(Some(ids))
    }

    /// The text of `ids` from `/detokenize`. Errors: no such route, or it failed.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String> {
        let v = self.post_json("/detokenize", &json!({"tokens": ids}))?;
        v["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("/detokenize: no 'content' in the answer"))
    }
}

fn json_body(resp: reqwest::blocking::Response, path: &str) -> Result<Value> {
    let status = resp.status();
    let text = resp
        .text()
        .with_context(|| format!("reading the answer of {path}"))?;
    if !status.is_success() {
        bail!("{path}: HTTP {status}: {}", error_message(&text));
    }
    serde_json::from_str(&text).with_context(|| format!("{path}: the answer is not JSON"))
}

/// The `error.message` of an OpenAI-style error body, else the body itself (shortened).
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    match parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str().or(v["message"].as_str()))
    {
        Some(m) => m.to_string(),
        None => body.chars().take(300).collect(),
    }
}

/// What a server says about itself.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServerInfo {
    /// `strata`, `llama.cpp` or `unknown`.
    pub kind: String,
    /// The model id to put in requests (`/v1/models`).
    pub model: String,
    /// The model file as the server reports it, if it does.
    pub model_path: Option<String>,
    /// Context size in tokens, if reported.
    pub n_ctx: Option<usize>,
    /// Server build (`build_info` of llama-server), if reported.
    pub build: Option<String>,
    /// The raw status or props object (settings), for the JSON report.
    pub settings: Value,
}

/// Probes `/v1/status` (Strata), `/props` (llama-server) and `/v1/models`.
/// Errors: the server does not answer `/v1/models`.
pub fn probe(c: &Client) -> Result<ServerInfo> {
    let models = c.get_json("/v1/models")?;
    let first = &models["data"][0];
    let model = first["id"].as_str().unwrap_or("default").to_string();
    if let Some(st) = c
        .try_get_json("/v1/status")
        .filter(|s| s.get("n_ctx").is_some())
    {
        return Ok(ServerInfo {
            kind: "strata".into(),
            model,
            model_path: st["model_path"].as_str().map(str::to_string),
            n_ctx: st["n_ctx"].as_u64().map(|n| n as usize),
            build: st["version"].as_str().map(str::to_string),
            settings: st,
        });
    }
    if let Some(props) = c.try_get_json("/props") {
        let dgs = &props["default_generation_settings"];
        let n_ctx = props["n_ctx"]
            .as_u64()
            .or(dgs["n_ctx"].as_u64())
            .map(|n| n as usize);
        let mut settings = props.clone();
        // The chat template is long and says nothing about speed.
        if let Some(o) = settings.as_object_mut() {
            o.remove("chat_template");
            o.remove("chat_template_tool_use");
        }
        return Ok(ServerInfo {
            kind: "llama.cpp".into(),
            model,
            model_path: props["model_path"].as_str().map(str::to_string),
            n_ctx,
            build: props["build_info"].as_str().map(str::to_string),
            settings,
        });
    }
    Ok(ServerInfo {
        kind: "unknown".into(),
        model,
        model_path: None,
        n_ctx: first["meta"]["n_ctx_train"].as_u64().map(|n| n as usize),
        build: None,
        settings: models,
    })
}
