//! Strata's HTTP server: the OpenAI API (`/v1/chat/completions`, `/v1/completions`,
//! `/v1/models`), the Anthropic Messages API (`/v1/messages`), and operations routes
//! (`/health`, `/v1/status`, `/metrics`, `/tokenize`, `/detokenize`).
//!
//! The server binds first and loads the model in the background (`/health` answers 503 until
//! it is ready). Generation runs on one engine thread in FIFO order ([`worker`]); handlers only
//! parse, render prompts, and format answers.
//!
//! ```no_run
//! # fn demo(model: strata_engine::Model) -> Result<(), strata_server::ServerError> {
//! let config = strata_server::ServerConfig { port: 8080, ..Default::default() };
//! strata_server::serve_blocking(config, move || Ok::<_, String>(model))
//! # }
//! ```

#![warn(missing_docs)]

pub mod anthropic;
pub mod auth;
pub mod config;
pub mod error;
pub mod extract;
pub mod generation;
pub mod metrics;
pub mod openai;
pub mod ops;
pub mod output;
pub mod params;
pub mod prompt;
pub mod request_log;
pub mod schema;
pub mod sse;
pub mod state;
pub mod worker;

use std::any::Any;
use std::fmt::Display;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use strata_engine::Model;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub use config::ServerConfig;
pub use error::ApiError;
use state::{AppState, Shared};
use worker::Engine;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound (in use, not permitted).
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The model failed to load.
    #[error("loading the model failed: {0}")]
    Load(String),
    /// Any other I/O failure of the server.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Paths with a route (metrics label requests by these; others count as `unmatched`).
const ROUTES: [&str; 14] = [
    "/health",
    "/v1/health",
    "/v1/status",
    "/metrics",
    "/tokenize",
    "/detokenize",
    "/v1/models",
    "/models",
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
];

/// The application: routes, limits, panic catching, API keys and request counting.
pub fn router(state: Shared) -> Router {
    app(state, Router::new())
}

/// The application with `extra` routes behind the same layers (tests add failing routes).
fn app(state: Shared, extra: Router<Shared>) -> Router {
    use anthropic::messages as am;
    use openai::{chat, completions, models};
    extra
        .route("/health", get(ops::health))
        .route("/v1/health", get(ops::health))
        .route("/v1/status", get(ops::status))
        .route("/metrics", get(ops::metrics))
        .route("/tokenize", post(ops::tokenize))
        .route("/detokenize", post(ops::detokenize))
        .route("/v1/models", get(models::list_models))
        .route("/models", get(models::list_models))
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/chat/completions", post(chat::chat_completions))
        .route("/v1/completions", post(completions::completions))
        .route("/completions", post(completions::completions))
        .route("/v1/messages", post(am::messages))
        .route("/v1/messages/count_tokens", post(am::count_tokens))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), count_http))
        .with_state(state)
}

async fn not_found(req: Request) -> Response {
    let path = req.uri().path().to_string();
    let err = ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {} {path}", req.method()),
    );
    error::response_for_path(&path, err)
}

async fn method_not_allowed(req: Request) -> Response {
    let path = req.uri().path().to_string();
    let err = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {path}", req.method()),
    );
    error::response_for_path(&path, err)
}

fn panic_response(_: Box<dyn Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked; the server goes on");
    ApiError::internal("internal error while handling the request (the server goes on)")
        .into_response()
}

async fn count_http(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let route = ROUTES
        .iter()
        .find(|r| **r == path)
        .copied()
        .unwrap_or("unmatched");
    let (method, path) = (req.method().clone(), path.to_string());
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    state.metrics.http(route, status);
    request_log::http(
        &method,
        &path,
        &state.config.model_id,
        status,
        started.elapsed(),
    );
    resp
}

/// Binds, loads the model with `load` on a background thread, and serves until Ctrl-C or
/// SIGTERM. Errors: the address cannot be bound, the model fails to load.
pub async fn serve<F, E>(config: ServerConfig, load: F) -> Result<(), ServerError>
where
    F: FnOnce() -> Result<Model, E> + Send + 'static,
    E: Display + Send + 'static,
{
    let bind = format!("{}:{}", config.host, config.port);
    let listener = TcpListener::bind(&bind)
        .await
        .map_err(|error| ServerError::Bind { addr: bind, error })?;
    let addr = listener.local_addr()?;
    let state = AppState::new(config);
    eprintln!(
        "strata serve: listening on http://{addr} (loading {})",
        state.config.model_path
    );
    let (fail_tx, fail_rx) = tokio::sync::oneshot::channel::<String>();
    let st = state.clone();
    std::thread::Builder::new().name("strata-load".into()).spawn(move || {
        let started = std::time::Instant::now();
        let result = load().map_err(|e| e.to_string()).and_then(|model| {
            let c = model.config();
            let n_ctx = if st.config.n_ctx == 0 { c.n_ctx_train.min(8192) } else { st.config.n_ctx };
            let desc = format!("{}, {} layers, vocab {}", c.arch.name(), c.n_layer, c.n_vocab);
            let engine = Engine::start(Arc::new(model), &st.config.model_id, n_ctx, st.config.kv, st.metrics.clone()).map_err(|e| e.to_string())?;
            let _ = st.engine.set(Arc::new(engine));
            Ok((desc, n_ctx))
        });
        match result {
            Ok((desc, n_ctx)) => eprintln!(
                "strata serve: ready on http://{addr} — {} ({desc}), context {n_ctx}, loaded in {:.1}s",
                st.config.model_id,
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                let _ = fail_tx.send(e);
            }
        }
    })?;
    let app = router(state);
    tokio::select! {
        r = axum::serve(listener, app) => r.map_err(ServerError::Io),
        Ok(msg) = fail_rx => Err(ServerError::Load(msg)),
        _ = shutdown_signal() => {
            eprintln!("strata serve: shutting down");
            Ok(())
        }
    }
}

/// [`serve`] on its own Tokio runtime (for synchronous callers such as the CLI).
pub fn serve_blocking<F, E>(config: ServerConfig, load: F) -> Result<(), ServerError>
where
    F: FnOnce() -> Result<Model, E> + Send + 'static,
    E: Display + Send + 'static,
{
    // The engine computes on its own threads; the runtime only moves bytes.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(config, load))
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod app_tests;

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
