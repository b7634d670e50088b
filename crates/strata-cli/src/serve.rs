//! `strata serve`: the OpenAI- and Anthropic-compatible HTTP server (crate `strata-server`).

use std::path::{Path, PathBuf};

use clap::Args;
use strata_server::ServerConfig;

use crate::{ModelArgs, SamplingArgs};

/// Options of `strata serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on (loopback by default; 0.0.0.0 exposes the server to the network).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Key clients must send as `Authorization: Bearer KEY` or `x-api-key: KEY`.
    #[arg(long, env = "STRATA_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Model id reported to clients (default: the model name or file stem).
    #[arg(long)]
    pub alias: Option<String>,
    /// Largest request body accepted, in MiB.
    #[arg(long, default_value_t = 8)]
    pub max_body_mib: usize,
    /// Default sampling for requests that do not set it (a request's `seed` wins; without one
    /// each request draws a random seed).
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

fn model_id(args: &ServeArgs) -> String {
    if let Some(a) = &args.alias {
        return a.clone();
    }
    let m = args
        .model
        .model
        .as_deref()
        .unwrap_or(crate::models::DEFAULT_MODEL);
    let stem = Path::new(m)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(m);
    stem.to_string()
}

/// Binds, loads the model in the background, and serves until Ctrl-C.
pub fn run(args: ServeArgs, models_dir: &Path) -> anyhow::Result<()> {
    let config = ServerConfig {
        host: args.host.clone(),
        port: args.port,
        api_key: args.api_key.clone().filter(|k| !k.is_empty()),
        n_ctx: args.model.ctx,
        kv: args.model.kv,
        model_id: model_id(&args),
        model_path: args
            .model
            .model
            .clone()
            .unwrap_or_else(|| crate::models::DEFAULT_MODEL.to_string()),
        sampling: args.sampling.params(),
        fixed_seed: false,
        max_body_bytes: args.max_body_mib.max(1) << 20,
        ..ServerConfig::default()
    };
    let model_args = args.model.clone();
    let dir: PathBuf = models_dir.to_path_buf();
    strata_server::serve_blocking(config, move || {
        crate::load_model(&model_args, &dir).map_err(|e| format!("{e:#}"))
    })?;
    Ok(())
}
