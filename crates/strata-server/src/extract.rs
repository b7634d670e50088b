//! JSON request bodies: read with the body-size limit, parsed with serde, and every failure
//! turned into an [`ApiError`] (413 for an oversized body, 400 for malformed JSON or a field of
//! the wrong type — never axum's plain-text rejections).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{AnthropicError, ApiError};

/// A JSON body for the OpenAI-style routes; rejections are OpenAI-shaped errors.
pub struct ApiJson<T>(pub T);

/// A JSON body for the Anthropic routes; rejections are Anthropic-shaped errors.
pub struct AnthropicJson<T>(pub T);

/// Reads the body (subject to `DefaultBodyLimit`) and parses it as `T`.
async fn read_json<T: DeserializeOwned, S: Send + Sync>(
    req: Request,
    state: &S,
) -> Result<T, ApiError> {
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                "the request body is larger than this server accepts; start `strata serve` with a larger --max-body-mib",
            )
        } else {
            ApiError::new(
                status,
                format!("could not read the request body: {rejection}"),
            )
        }
    })?;
    parse_json(&bytes)
}

/// Parses `bytes` as `T`: 400 naming the line, column and field for malformed JSON or a field
/// of the wrong type.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; expected a JSON object",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let what = if inner.is_syntax() || inner.is_eof() {
            "malformed JSON"
        } else {
            "invalid request"
        };
        let inner = for_people(&inner.to_string());
        let mut err = ApiError::bad_request(format!("{what}: {inner}"));
        if path != "." {
            err.message = format!("{what} at '{path}': {inner}");
            err.param = Some(path);
        }
        err
    })
}

/// serde's message with Rust's type names put in JSON's words (`expected u32` → `expected a
/// whole number of 0 or more`, `struct X` → `an object`).
pub fn for_people(msg: &str) -> String {
    const WORDS: [(&str, &str); 20] = [
        ("usize", "a whole number of 0 or more"),
        ("u64", "a whole number of 0 or more"),
        ("u32", "a whole number of 0 or more"),
        ("u16", "a whole number of 0 or more"),
        ("u8", "a whole number of 0 or more"),
        ("isize", "a whole number"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
        ("i16", "a whole number"),
        ("i8", "a whole number"),
        ("f64", "a number"),
        ("f32", "a number"),
        ("a sequence", "an array"),
        ("a map", "an object"),
        ("a boolean", "true or false"),
        ("a borrowed string", "a string"),
        ("unit", "null"),
        ("a string", "a string"),
        ("a character", "a one-character string"),
        ("a tuple", "an array"),
    ];
    let mut out = msg.replace(
        "data did not match any variant of untagged enum ",
        "the value has none of the accepted shapes; untagged enum ",
    );
    // `expected struct Foo` / `expected enum Foo` / `untagged enum Foo`: the shape, not the name.
    for (pat, word) in [
        ("expected struct ", "expected an object"),
        ("expected enum ", "expected one of the allowed values"),
        ("; untagged enum ", ""),
        ("expected tuple struct ", "expected a value"),
    ] {
        while let Some(at) = out.find(pat) {
            let rest = &out[at + pat.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out = format!("{}{word}{}", &out[..at], &rest[end..]);
        }
    }
    for (rust, json) in WORDS {
        for lead in ["expected ", "expected one of "] {
            let from = format!("{lead}{rust}");
            let to = format!("{lead}{json}");
            if let Some(at) = out.find(&from) {
                let after = at + from.len();
                let word_ends = out[after..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric());
                if word_ends {
                    out = format!("{}{to}{}", &out[..at], &out[after..]);
                }
            }
        }
    }
    out
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_json(req, state).await.map(ApiJson)
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for AnthropicJson<T> {
    type Rejection = AnthropicError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_json(req, state)
            .await
            .map(AnthropicJson)
            .map_err(AnthropicError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Req {
        max_tokens: Option<u32>,
    }

    #[test]
    fn malformed_json_and_wrong_types_are_400_with_the_field() {
        let e = parse_json::<Req>(b"{\"max_tokens\": ").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("malformed JSON"), "{}", e.message);
        let e = parse_json::<Req>(br#"{"max_tokens": "ten"}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        assert!(!e.message.contains("u32"), "{}", e.message);
        assert!(e.message.contains("a whole number"), "{}", e.message);
        assert!(parse_json::<Req>(b"  ").is_err());
        assert_eq!(
            for_people("data did not match any variant of untagged enum StopField at line 1"),
            "the value has none of the accepted shapes at line 1"
        );
        assert_eq!(
            for_people("invalid type: map, expected struct ChatMessage"),
            "invalid type: map, expected an object"
        );
        assert!(parse_json::<Req>(br#"{"max_tokens": 3, "other": [1]}"#).is_ok());
    }
}
