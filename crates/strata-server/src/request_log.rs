//! One line on stderr per request: route, model, status, and for generations the prompt and
//! generated tokens, decode speed and time in the queue.
//!
//! Generations are logged by the engine thread when they end (a stream's status is sent
//! before its answer is written); every other request, and a generation refused before it
//! reached the engine, by the HTTP layer. Health probes that succeed are not logged.

use std::time::Duration;

use axum::http::Method;

use crate::error::ApiError;
use crate::worker::{Finish, Stats};

/// Routes whose successful requests the engine thread logs.
const GENERATION_ROUTES: [&str; 5] = [
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/messages",
];

/// A request seen by the HTTP layer (skipped where the engine thread logs it instead).
pub fn http(method: &Method, path: &str, model: &str, status: u16, took: Duration) {
    let ok = (200..300).contains(&status);
    if ok && (GENERATION_ROUTES.contains(&path) || path.ends_with("health")) {
        return;
    }
    eprintln!(
        "strata serve: {method} {path} {model} {status} ({:.3} s)",
        took.as_secs_f64()
    );
}

/// A generation that ended (for whatever reason but a failure).
pub fn generation(route: &str, model: &str, s: &Stats) {
    let status = match s.finish {
        Finish::Cancelled => "499 cancelled by the client",
        _ => "200",
    };
    eprintln!(
        "strata serve: POST {route} {model} {status}: prompt {} tokens ({} cached), generated {}, {:.1} tok/s, queue {:.3} s",
        s.prompt_tokens,
        s.cached_tokens,
        s.generated_tokens,
        s.decode_tps(),
        s.queue_time.as_secs_f64()
    );
}

/// A generation whose client left while it was queued.
pub fn cancelled(route: &str, model: &str, queued: Duration) {
    eprintln!(
        "strata serve: POST {route} {model} 499 cancelled by the client while queued ({:.3} s)",
        queued.as_secs_f64()
    );
}

/// A generation that failed on the engine thread.
pub fn failed(route: &str, model: &str, e: &ApiError) {
    eprintln!(
        "strata serve: POST {route} {model} {}: {}",
        e.status.as_u16(),
        e.message
    );
}
