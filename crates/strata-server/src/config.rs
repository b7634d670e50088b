//! Server settings, filled in by `strata serve`.

use std::time::Duration;

use strata_engine::sampling::SamplingParams;
use strata_engine::KvType;

/// Everything the server needs besides the model.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to bind (default loopback).
    pub host: String,
    /// Port to bind (0 picks a free one).
    pub port: u16,
    /// When set, every route but `/health` needs `Authorization: Bearer KEY` or `x-api-key: KEY`.
    pub api_key: Option<String>,
    /// Context size in tokens (0 = the model's training context, at most 8192).
    pub n_ctx: usize,
    /// KV cache type.
    pub kv: KvType,
    /// The model id reported by `/v1/models` and in responses.
    pub model_id: String,
    /// Other model names a request may give (`--alias`); `*` accepts any name. A request
    /// naming another model gets 404.
    pub aliases: Vec<String>,
    /// Where the model was loaded from (for `/v1/status`).
    pub model_path: String,
    /// Sampling used where a request does not say (its `seed` is used only when a request asks
    /// for sampling without one and `fixed_seed` is set).
    pub sampling: SamplingParams,
    /// Use `sampling.seed` for requests without a seed (otherwise each gets a random seed).
    pub fixed_seed: bool,
    /// Largest request body accepted, bytes (larger gets 413).
    pub max_body_bytes: usize,
    /// Interval of SSE keep-alive comments while a stream waits.
    pub keep_alive: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            host: "127.0.0.1".into(),
            port: 8080,
            api_key: None,
            n_ctx: 4096,
            kv: KvType::default(),
            model_id: "strata".into(),
            aliases: Vec::new(),
            model_path: String::new(),
            sampling: SamplingParams::default(),
            fixed_seed: false,
            max_body_bytes: 8 << 20,
            keep_alive: Duration::from_secs(5),
        }
    }
}
