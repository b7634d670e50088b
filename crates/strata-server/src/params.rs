//! Sampling fields common to every API, checked and turned into engine settings.

use serde::Deserialize;
use serde_json::Value;
use strata_engine::sampling::SamplingParams;

use crate::config::ServerConfig;
use crate::error::ApiError;

/// Sampling fields a request may set (OpenAI names; Anthropic's are mapped onto them).
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct SamplingFields {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub repeat_penalty: Option<f32>,
}

impl SamplingFields {
    /// The engine settings: the server's defaults overridden by the request. Errors name the
    /// field out of range (400).
    pub fn resolve(&self, config: &ServerConfig) -> Result<SamplingParams, ApiError> {
        let mut p = config.sampling.clone();
        let range = |name: &str, v: Option<f32>, lo: f32, hi: f32| match v {
            Some(x) if !(lo..=hi).contains(&x) => Err(ApiError::bad_param(
                name,
                format!("{name} must be between {lo} and {hi}, got {x}"),
            )),
            _ => Ok(v),
        };
        if let Some(t) = range("temperature", self.temperature, 0.0, 100.0)? {
            p.temperature = t;
        }
        if let Some(t) = range("top_p", self.top_p, 0.0, 1.0)? {
            p.top_p = if t == 0.0 { f32::MIN_POSITIVE } else { t };
        }
        if let Some(m) = range("min_p", self.min_p, 0.0, 1.0)? {
            p.min_p = m;
        }
        if let Some(x) = range("presence_penalty", self.presence_penalty, -2.0, 2.0)? {
            p.presence_penalty = x;
        }
        if let Some(x) = range("frequency_penalty", self.frequency_penalty, -2.0, 2.0)? {
            p.frequency_penalty = x;
        }
        if let Some(x) = range("repeat_penalty", self.repeat_penalty, 0.0, 10.0)? {
            p.repeat_penalty = if x == 0.0 { 1.0 } else { x };
        }
        match self.top_k {
            Some(k) if k < -1 => {
                return Err(ApiError::bad_param(
                    "top_k",
                    "top_k must be -1, 0 (off) or positive",
                ))
            }
            Some(k) => p.top_k = k.max(0) as usize,
            None => {}
        }
        p.seed = match self.seed {
            Some(s) => s as u64,
            None if config.fixed_seed => p.seed,
            None => rand::random(),
        };
        Ok(p)
    }
}

/// `stop`: a string or a list of strings (at most 16).
#[allow(missing_docs)] // Wire fields: same names and meanings as the API reference.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

impl StopField {
    /// The stop strings. Errors: more than 16 (400).
    pub fn strings(stop: Option<&StopField>) -> Result<Vec<String>, ApiError> {
        let v = match stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        if v.len() > 16 {
            return Err(ApiError::bad_param("stop", "at most 16 stop strings"));
        }
        Ok(v.into_iter().filter(|s| !s.is_empty()).collect())
    }
}

/// A token limit: absent means "until the context is full"; 0 is refused (400).
pub fn max_tokens(field: &str, v: Option<u64>, n_ctx: usize) -> Result<usize, ApiError> {
    match v {
        Some(0) => Err(ApiError::bad_param(
            field,
            format!("{field} must be at least 1"),
        )),
        Some(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX).min(n_ctx)),
        None => Ok(n_ctx),
    }
}

/// Reads an optional JSON value as a string list of text parts (OpenAI `content` parts or
/// Anthropic text blocks), joined with newlines. Errors: images and unknown part types (400).
pub fn text_of_content(field: &str, content: &Value) -> Result<String, ApiError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("text" | "input_text", Some(t)) => texts.push(t.to_string()),
                    ("image_url" | "image" | "input_image" | "input_audio" | "document", _) => {
                        return Err(ApiError::bad_param(field, format!("'{kind}' content is not supported: this server runs text-only models")))
                    }
                    _ => return Err(ApiError::bad_param(field, format!("unsupported content part of type '{kind}'"))),
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(ApiError::bad_param(
            field,
            "content must be a string or a list of parts",
        )),
    }
}
