//! `strata serve`: the OpenAI- and Anthropic-compatible HTTP server (crate `strata-server`).

use std::path::{Path, PathBuf};

use clap::Args;
use strata_server::ServerConfig;

use crate::models::{find_model, known_models, DEFAULT_MODEL};
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
    /// Another model name requests may give (repeat for more; `*` accepts any name). The first
    /// that is not `*` is also the id reported to clients (default: the known model name or
    /// the file name without `.gguf`). Requests naming another model get 404.
    #[arg(long, value_name = "NAME")]
    pub alias: Vec<String>,
    /// Largest request body accepted, in MiB.
    #[arg(long, default_value_t = 8, value_parser = crate::flags::body_mib)]
    pub max_body_mib: usize,
    /// Default sampling for requests that do not set it (a request's `seed` wins; without one
    /// each request draws a random seed).
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// The id clients see: the first alias that is not `*`, else [`default_id`].
fn model_id(args: &ServeArgs) -> String {
    match args.alias.iter().find(|a| *a != "*") {
        Some(a) => a.clone(),
        None => default_id(args.model.model.as_deref().unwrap_or(DEFAULT_MODEL)),
    }
}

/// The names requests may give besides the reported id: every alias, and the default id
/// when an alias replaced it.
fn accepted_names(args: &ServeArgs) -> Vec<String> {
    let mut names = args.alias.clone();
    names.push(default_id(
        args.model.model.as_deref().unwrap_or(DEFAULT_MODEL),
    ));
    names
}

/// A known model's name (also when given as the path of its cached file), else the file name
/// without `.gguf` and without a split suffix (`-00001-of-00003`): dots inside a name stay
/// (`qwen2.5-coder-0.5b`).
pub fn default_id(model: &str) -> String {
    if find_model(model).is_some() {
        return model.to_string();
    }
    let file = Path::new(model)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(model);
    if let Some(known) = known_models().iter().find(|k| k.file_name == file) {
        return known.name.to_string();
    }
    let stem = file.strip_suffix(".gguf").unwrap_or(file);
    match stem.rsplit_once("-of-") {
        Some((head, tail)) if tail.len() == 5 && tail.bytes().all(|b| b.is_ascii_digit()) => {
            match head.rsplit_once('-') {
                Some((name, n)) if n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()) => {
                    name.to_string()
                }
                _ => stem.to_string(),
            }
        }
        _ => stem.to_string(),
    }
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
        aliases: accepted_names(&args),
        model_path: args
            .model
            .model
            .clone()
            .unwrap_or_else(|| crate::models::DEFAULT_MODEL.to_string()),
        sampling: args.sampling.params(),
        fixed_seed: false,
        max_body_bytes: args.max_body_mib << 20,
        ..ServerConfig::default()
    };
    let model_args = args.model.clone();
    let dir: PathBuf = models_dir.to_path_buf();
    strata_server::serve_blocking(config, move || {
        crate::load_model(&model_args, &dir).map_err(|e| format!("{e:#}"))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::default_id;

    #[test]
    fn model_ids_keep_dots_and_drop_gguf_and_split_suffixes() {
        assert_eq!(default_id("qwen2.5-coder-0.5b"), "qwen2.5-coder-0.5b");
        assert_eq!(
            default_id("/m/SmolLM2-135M-Instruct.Q4_1.gguf"),
            "smollm2-135m"
        );
        assert_eq!(default_id("/m/my-model.v2.Q8_0.gguf"), "my-model.v2.Q8_0");
        assert_eq!(default_id("big-00001-of-00003.gguf"), "big");
        assert_eq!(default_id("plain"), "plain");
    }
}
