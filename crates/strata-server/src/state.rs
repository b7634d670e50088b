//! State shared by the handlers: settings, the engine once loaded, metrics.

use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::worker::Engine;

/// Shared server state.
pub struct AppState {
    /// Settings.
    pub config: ServerConfig,
    /// Set once the model has loaded; until then requests get 503.
    pub engine: OnceLock<Arc<Engine>>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// When the server started.
    pub started: Instant,
    /// Start time as Unix seconds (the `created` of `/v1/models`).
    pub started_unix: u64,
}

/// The handlers' view of the state.
pub type Shared = Arc<AppState>;

impl AppState {
    /// A server that is still loading its model.
    pub fn new(config: ServerConfig) -> Shared {
        Arc::new(AppState {
            config,
            engine: OnceLock::new(),
            metrics: Arc::new(Metrics::default()),
            started: Instant::now(),
            started_unix: unix_now(),
        })
    }

    /// Ok when a request may name `requested` (absent, the model id, or an alias); otherwise
    /// 404 in OpenAI's shape (`model_not_found`), saying which model is loaded.
    pub fn check_model(&self, requested: Option<&str>) -> Result<(), ApiError> {
        let Some(name) = requested.filter(|n| !n.is_empty()) else {
            return Ok(());
        };
        let c = &self.config;
        if name == c.model_id || c.aliases.iter().any(|a| a == name || a == "*") {
            return Ok(());
        }
        Err(ApiError {
            code: Some("model_not_found"),
            param: Some("model".into()),
            ..ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                format!(
                    "the model '{name}' is not loaded: this server runs '{}' (start it with --alias {name} to accept that name too)",
                    c.model_id
                ),
            )
        })
    }

    /// The engine, or 503 while the model loads.
    pub fn engine(&self) -> Result<&Arc<Engine>, ApiError> {
        self.engine.get().ok_or_else(ApiError::loading)
    }
}

/// Seconds since the Unix epoch (the `created` field of responses).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A random id with `prefix` (`chatcmpl-…`, `call_…`, `msg_…`).
pub fn new_id(prefix: &str) -> String {
    use rand::distributions::{Alphanumeric, DistString};
    format!(
        "{prefix}{}",
        Alphanumeric.sample_string(&mut rand::thread_rng(), 24)
    )
}
