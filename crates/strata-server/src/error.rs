//! API errors: one type, rendered as an OpenAI error object (`{"error": {...}}`) or, on the
//! Anthropic routes, as an Anthropic one (`{"type": "error", "error": {...}}`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// An error a request gets back: an HTTP status and a message that says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: StatusCode,
    /// What went wrong, for people.
    pub message: String,
    /// The request field at fault, when one is (`messages`, `max_tokens`, ...).
    pub param: Option<String>,
    /// OpenAI's `error.code` (`model_not_found`); the status number when `None`.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
            code: None,
        }
    }

    /// 400: the request is malformed or asks for something impossible.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 400 naming the field at fault.
    pub fn bad_param(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.to_string()),
            ..Self::bad_request(message)
        }
    }

    /// 500: a bug or an engine failure; the server keeps serving.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 503 while the model loads.
    pub fn loading() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the model is still loading; retry when GET /health returns 200",
        )
    }

    /// The OpenAI `error.type` for this status.
    pub fn openai_type(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 413 | 422 => "invalid_request_error",
            401 => "authentication_error",
            404 => "not_found_error",
            503 => "unavailable_error",
            _ => "server_error",
        }
    }

    /// The Anthropic `error.type` for this status.
    pub fn anthropic_type(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            404 => "not_found_error",
            413 => "request_too_large",
            503 => "overloaded_error",
            _ => "api_error",
        }
    }

    /// The OpenAI error body.
    pub fn openai_body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.openai_type(),
            "param": self.param,
            "code": match self.code {
                Some(c) => json!(c),
                None => json!(self.status.as_u16()),
            },
        }})
    }

    /// The Anthropic error body.
    pub fn anthropic_body(&self) -> serde_json::Value {
        json!({"type": "error", "error": {"type": self.anthropic_type(), "message": self.message}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.openai_body())).into_response()
    }
}

/// An [`ApiError`] rendered in the Anthropic shape (the `anthropic` SDK parses that one).
#[derive(Debug, Clone)]
pub struct AnthropicError(pub ApiError);

impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> Self {
        AnthropicError(e)
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        (self.0.status, Json(self.0.anthropic_body())).into_response()
    }
}

/// Renders `err` in the shape the API under `path` uses.
pub fn response_for_path(path: &str, err: ApiError) -> Response {
    if path.starts_with("/v1/messages") {
        AnthropicError(err).into_response()
    } else {
        err.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_have_each_apis_shape() {
        let e = ApiError::bad_param("messages", "messages must not be empty");
        let o = e.openai_body();
        assert_eq!(o["error"]["type"], "invalid_request_error");
        assert_eq!(o["error"]["param"], "messages");
        let a = e.anthropic_body();
        assert_eq!(a["type"], "error");
        assert_eq!(a["error"]["message"], "messages must not be empty");
    }
}
