//! API keys (`--api-key` or `STRATA_API_KEY`): `Authorization: Bearer KEY` (OpenAI clients) or
//! `x-api-key: KEY` (Anthropic clients). `/health` stays open for load balancers.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::{response_for_path, ApiError};
use crate::state::Shared;

/// The key a request presents, if any.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// Compares without an early exit, so the time taken does not reveal the key.
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Middleware: 401 unless the request carries the configured key.
pub async fn require_key(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let Some(key) = state.config.api_key.as_deref() else {
        return next.run(req).await;
    };
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    match presented_key(req.headers()) {
        Some(given) if same_key(given, key) => next.run(req).await,
        given => {
            let msg = if given.is_some() {
                "invalid API key"
            } else {
                "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
            };
            response_for_path(
                req.uri().path(),
                ApiError::new(StatusCode::UNAUTHORIZED, msg),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_key(&h), None);
        h.insert("x-api-key", "k1".parse().unwrap());
        assert_eq!(presented_key(&h), Some("k1"));
        h.insert("authorization", "Bearer k2".parse().unwrap());
        assert_eq!(presented_key(&h), Some("k2"));
        assert!(same_key("abc", "abc") && !same_key("abc", "abd") && !same_key("abc", "ab"));
    }
}
