//! `strata quality`: teacher-forced comparison of our logits with a reference on the same
//! text — llama.cpp on the same GGUF (`--reference llama.cpp`), or another GGUF of the same
//! model in our engine (`--reference FILE.gguf`, e.g. Q4_K_M against F16).
//!
//! The text is tokenized once and cut into chunks of `--ctx` tokens; each chunk is evaluated
//! from an empty cache (its first token replaced by BOS when the model adds one), and the
//! positions of its second half are scored — llama.cpp's `llama-perplexity` conventions, so
//! the perplexities are comparable with its output.

pub mod metrics;
pub mod reference;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use strata_engine::{KvType, Model};

use metrics::{PosStats, Summary};
use reference::{LlamaCpp, Reference};

/// Options of `strata quality`.
#[derive(Args)]
pub struct QualityArgs {
    /// Our model: a GGUF path or known name (default: smollm2-135m).
    #[arg(short = 'm', long)]
    pub model: Option<String>,
    /// `llama.cpp` (the same GGUF through llama-cpp-python), or another GGUF path / known name
    /// run by our engine.
    #[arg(long)]
    pub reference: String,
    /// UTF-8 text to evaluate (default: the prose shipped with strata).
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Tokens per chunk; the second half of each chunk is scored.
    #[arg(short = 'c', long = "ctx", default_value_t = 512)]
    pub ctx: usize,
    /// Evaluate at most this many chunks (default: all the text holds).
    #[arg(long)]
    pub chunks: Option<usize>,
    /// KV cache type of our engine (llama.cpp's default is f16).
    #[arg(long, default_value = "f16")]
    pub kv: KvType,
    /// CPU pool of our engine; its worker count is also llama.cpp's thread count.
    #[command(flatten)]
    pub pool: crate::PoolArgs,
    /// Python with llama-cpp-python, for `--reference llama.cpp`.
    #[arg(long, env = "STRATA_PYTHON", default_value = "python3")]
    pub python: String,
    /// Write the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Runs the comparison and prints the summary.
pub fn run(args: QualityArgs, models_dir: &Path) -> Result<()> {
    if args.ctx < 8 {
        bail!("--ctx {} is too small (at least 8 tokens)", args.ctx);
    }
    let model_args = crate::ModelArgs {
        model: args.model.clone(),
        ctx: args.ctx,
        kv: args.kv,
        ubatch: None,
        gpu_layers: None,
        vram_budget: None,
        device: 0,
        pool: args.pool,
    };
    let model_path = crate::models::resolve_model(args.model.as_deref(), models_dir)?;
    let model = crate::load_model(&model_args, models_dir)?;
    let n_vocab = model.config().n_vocab;
    let (text, text_name) = match &args.text {
        Some(p) => (
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            p.display().to_string(),
        ),
        None => (
            crate::haystack::TEXT.to_string(),
            "strata haystack.txt".to_string(),
        ),
    };
    let chunks = chunk_tokens(&model, &text, args.ctx, args.chunks)?;
    let first = args.ctx / 2;
    let threads = if args.pool.pool_workers > 0 {
        args.pool.pool_workers
    } else {
        strata_engine::pool::current_workers()
    };

    let (mut reference, ref_name) = if args.reference == "llama.cpp" {
        let l = LlamaCpp::start(&args.python, &model_path, args.ctx, threads, first, &chunks)?;
        if l.n_vocab != n_vocab {
            bail!(
                "llama.cpp reports a vocabulary of {} tokens, strata {}",
                l.n_vocab,
                n_vocab
            );
        }
        let name = format!("llama.cpp (llama-cpp-python {})", l.version);
        (Reference::LlamaCpp(l), name)
    } else {
        let path = crate::models::resolve_model(Some(&args.reference), models_dir)?;
        let other = Model::load(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        same_vocabulary(&model, &other)?;
        (
            Reference::Engine(Box::new(other)),
            format!("strata on {}", path.display()),
        )
    };

    let mut stats: Vec<PosStats> = Vec::new();
    let mut ours = Vec::new();
    for (c, chunk) in chunks.iter().enumerate() {
        let mut session = model.new_session(chunk.len(), args.kv);
        model
            .forward_all(&mut session, chunk, &mut ours)
            .context("forward")?;
        let theirs = reference.logits(chunk, first, n_vocab, args.kv)?;
        for (row, i) in (first..chunk.len() - 1).enumerate() {
            let r = &theirs[row * n_vocab..(row + 1) * n_vocab];
            let o = &ours[i * n_vocab..(i + 1) * n_vocab];
            stats.push(metrics::compare(r, o, chunk[i + 1] as usize));
        }
        let s = Summary::of(&stats);
        eprintln!(
            "  chunk {}/{}: same top {:.2} %, mean KL {:.6}, ppl {:.4} vs {:.4}",
            c + 1,
            chunks.len(),
            s.same_top_pct,
            s.kl_mean,
            s.ppl_ours,
            s.ppl_reference
        );
    }
    let s = Summary::of(&stats);
    println!("strata quality: {} vs {ref_name}", model_path.display());
    println!(
        "text: {text_name}, {} chunks of {} tokens, positions {first}..{} of each scored: {} positions",
        chunks.len(),
        args.ctx,
        args.ctx - 2,
        s.positions
    );
    println!("same top token:    {:.2} %", s.same_top_pct);
    println!(
        "KL divergence:     mean {:.6}  median {:.6}  p99 {:.6}  max {:.6}",
        s.kl_mean, s.kl_median, s.kl_p99, s.kl_max
    );
    println!(
        "Δp correct token:  mean {:+.3} %  rms {:.3} %",
        s.delta_p_mean_pct, s.delta_p_rms_pct
    );
    println!(
        "perplexity:        ours {:.4}  reference {:.4}  (ratio {:.5})",
        s.ppl_ours,
        s.ppl_reference,
        s.ppl_ours / s.ppl_reference
    );
    if let Some(p) = &args.json {
        let v = json!({"model": model_path, "reference": ref_name, "text": text_name, "ctx": args.ctx,
            "chunks": chunks.len(), "first_scored": first, "kv": format!("{:?}", args.kv).to_lowercase(),
            "strata_version": env!("CARGO_PKG_VERSION"), "summary": s});
        std::fs::write(p, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The text's tokens cut into chunks of `ctx` (llama-perplexity: whole chunks only, each
/// starting with BOS when the model adds one). Errors: the text is shorter than one chunk.
fn chunk_tokens(
    model: &Model,
    text: &str,
    ctx: usize,
    max_chunks: Option<usize>,
) -> Result<Vec<Vec<u32>>> {
    let tok = model.tokenizer();
    let tokens = tok.encode(text, true, false);
    let bos = tok.bos_id().filter(|b| tokens.first() == Some(b));
    let n = (tokens.len() / ctx).min(max_chunks.unwrap_or(usize::MAX));
    if n == 0 {
        bail!(
            "the text has {} tokens; one chunk needs --ctx {ctx}",
            tokens.len()
        );
    }
    Ok((0..n)
        .map(|c| {
            let mut chunk = tokens[c * ctx..(c + 1) * ctx].to_vec();
            if let Some(b) = bos {
                chunk[0] = b;
            }
            chunk
        })
        .collect())
}

/// Errors unless both models have the same token list (logits are compared id by id).
fn same_vocabulary(a: &Model, b: &Model) -> Result<()> {
    let key = "tokenizer.ggml.tokens";
    let ta = a.gguf().metadata().string_array(key).context(key)?;
    let tb = b.gguf().metadata().string_array(key).context(key)?;
    if ta != tb || a.config().n_vocab != b.config().n_vocab {
        bail!(
            "the two models have different vocabularies ({} and {} tokens)",
            ta.len(),
            tb.len()
        );
    }
    Ok(())
}
