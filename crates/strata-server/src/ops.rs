//! Operations routes: `/health`, `/v1/status`, `/metrics`, `/tokenize`, `/detokenize`.

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::Shared;

/// `GET /health`: 200 `{"status": "ok"}` when ready, 503 while the model loads.
pub async fn health(State(state): State<Shared>) -> Response {
    if state.engine.get().is_some() {
        Json(json!({"status": "ok"})).into_response()
    } else {
        let mut body = ApiError::loading().openai_body();
        body["status"] = json!("loading");
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

/// `GET /v1/status`: model, context, settings, queue.
pub async fn status(State(state): State<Shared>) -> Json<Value> {
    let c = &state.config;
    let s = &c.sampling;
    let mut body = json!({
        "status": if state.engine.get().is_some() { "ready" } else { "loading" },
        "model": c.model_id,
        "model_path": c.model_path,
        "kv_type": format!("{:?}", c.kv).to_lowercase(),
        "api_key_required": c.api_key.is_some(),
        "uptime_seconds": state.started.elapsed().as_secs_f64(),
        "scheduling": "fifo, one generation at a time",
        "requests_waiting": state.metrics.waiting().max(0),
        "default_sampling": {
            "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, "min_p": s.min_p,
            "repeat_penalty": s.repeat_penalty, "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
        },
    });
    if let Some(e) = state.engine.get() {
        let m = e.model().config();
        body["n_ctx"] = json!(e.n_ctx());
        body["n_ctx_train"] = json!(m.n_ctx_train);
        body["n_vocab"] = json!(m.n_vocab);
        body["n_layer"] = json!(m.n_layer);
        body["arch"] = json!(m.arch.name());
        body["chat_template"] = json!(e.model().chat_template().is_some());
    }
    Json(body)
}

/// `?format=json` on `/metrics`.
#[derive(Debug, Deserialize)]
pub struct MetricsQuery {
    #[serde(default)]
    format: Option<String>,
}

/// `GET /metrics`: Prometheus text, or JSON with `?format=json` or `Accept: application/json`.
pub async fn metrics(
    State(state): State<Shared>,
    Query(q): Query<MetricsQuery>,
    headers: HeaderMap,
) -> Response {
    let ready = state.engine.get().is_some();
    let accept_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    if q.format.as_deref() == Some("json") || accept_json {
        return Json(state.metrics.json(ready)).into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.prometheus(ready),
    )
        .into_response()
}

/// `POST /tokenize` body (llama.cpp's fields).
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    content: String,
    #[serde(default)]
    add_special: bool,
    #[serde(default = "yes")]
    parse_special: bool,
    #[serde(default)]
    with_pieces: bool,
}

fn yes() -> bool {
    true
}

/// `POST /tokenize`: `{"tokens": [ids]}`, or `[{"id", "piece"}]` with `with_pieces`.
pub async fn tokenize(
    State(state): State<Shared>,
    ApiJson(req): ApiJson<TokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let tok = state.engine()?.model().tokenizer();
    let ids = tok.encode(&req.content, req.add_special, req.parse_special);
    let tokens: Vec<Value> = if req.with_pieces {
        ids.iter().map(|&id| json!({"id": id, "piece": String::from_utf8_lossy(tok.token_to_piece_with(id, true))})).collect()
    } else {
        ids.iter().map(|&id| json!(id)).collect()
    };
    Ok(Json(json!({"tokens": tokens})))
}

/// `POST /detokenize` body.
#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    tokens: Vec<u32>,
}

/// `POST /detokenize`: `{"content": text}`. Errors: an id outside the vocabulary (400).
pub async fn detokenize(
    State(state): State<Shared>,
    ApiJson(req): ApiJson<DetokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let engine = state.engine()?;
    let n_vocab = engine.model().config().n_vocab;
    if let Some(bad) = req.tokens.iter().find(|t| **t as usize >= n_vocab) {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token id {bad} is outside the vocabulary of {n_vocab}"),
        ));
    }
    Ok(Json(
        json!({"content": engine.model().tokenizer().decode(&req.tokens)}),
    ))
}
