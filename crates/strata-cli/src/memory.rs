//! Sizing a session before making it: an allocation the machine cannot hold aborts the
//! process, so run, chat, serve and bench compare what a context needs with what is free and
//! fail with one line instead.

use anyhow::{bail, Result};
use strata_engine::config::ModelConfig;
use strata_engine::KvType;

/// The context `--ctx 0` means: the model's training context, at most 8192 tokens.
pub fn resolve_ctx(ctx: usize, cfg: &ModelConfig) -> usize {
    match ctx {
        0 => cfg.n_ctx_train.clamp(1, 8192),
        n => n,
    }
}

/// What a session's size depends on, read from a [`ModelConfig`].
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Layers with a KV cache (recurrent layers have none; an MTP draft layer has one, filled
    /// when the session drafts: [`ModelConfig::n_kv_layers`]).
    pub n_attn_layers: usize,
    /// Cached values per position and layer (`n_kv_head · head_dim`).
    pub kv_row: usize,
    /// f32 indexer keys cached per position, all QSA layers together, the MTP layer's
    /// included (qwen4exp).
    pub index_keys: usize,
    /// Width of a residual row (`hc · n_embd` with hyper-connections).
    pub n_embd: usize,
    /// Query width (`n_head · head_dim`).
    pub q: usize,
    /// Widest feed-forward activation of a token (dense or the routed experts together).
    pub ff: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    /// Tokens per forward run (`--ubatch`): the rows the activations are sized for.
    pub ubatch: usize,
}

impl Shape {
    /// The shape of `cfg`, run in micro-batches of `ubatch` tokens.
    pub fn of(cfg: &ModelConfig, ubatch: usize) -> Shape {
        let ff = match &cfg.moe {
            Some(m) => cfg.n_ff.max(m.n_ff_exp * m.n_expert_used),
            None => cfg.n_ff,
        };
        Shape {
            n_attn_layers: cfg.n_kv_layers(),
            kv_row: cfg.kv_row(),
            index_keys: cfg.index_key_widths().iter().sum(),
            n_embd: cfg.residual_width(),
            q: cfg.n_head * cfg.head_dim,
            ff,
            n_vocab: cfg.n_vocab,
            n_ctx_train: cfg.n_ctx_train,
            ubatch,
        }
    }
}

/// Bytes of the KV cache of `n_ctx` positions: `2 · n_attn_layers · n_ctx · n_kv_head ·
/// head_dim · sizeof(kv)` (keys and values of every attention layer), plus `4 · n_ctx ·
/// index_keys` for the indexer keys of QSA layers.
pub fn kv_bytes(cfg: &Shape, n_ctx: usize, kv: KvType) -> u128 {
    let elem = match kv {
        KvType::F16 => 2,
        KvType::F32 => 4,
    };
    2 * cfg.n_attn_layers as u128 * n_ctx as u128 * cfg.kv_row as u128 * elem
        + 4 * n_ctx as u128 * cfg.index_keys as u128
}

/// Bytes of one session besides its KV cache: the token record (4 per position), the
/// activations of one run of `--ubatch` tokens and the logits. An estimate from above of
/// the engine's buffers, which grow to these sizes on the first long prompt.
pub fn scratch_bytes(cfg: &Shape, n_ctx: usize) -> u128 {
    let per_token = 4 * cfg.n_embd + 2 * cfg.q + 2 * cfg.kv_row + 3 * cfg.ff;
    let batch = n_ctx.min(cfg.ubatch) as u128;
    4 * n_ctx as u128 + 4 * batch * per_token as u128 + 4 * cfg.n_vocab as u128
}

/// Fails with one line when a session of `n_ctx` positions needs more than the available
/// memory (`MemAvailable`), naming what it needs, what is free and a `--ctx` that fits.
/// Where available memory is unknown (not Linux) nothing is checked.
pub fn check_session(cfg: &ModelConfig, n_ctx: usize, kv: KvType, ubatch: usize) -> Result<()> {
    check_session_or(cfg, n_ctx, kv, ubatch, None)
}

/// [`check_session`] with `advice` in place of "try --ctx N" (for commands whose context
/// follows from other flags).
pub fn check_session_or(
    cfg: &ModelConfig,
    n_ctx: usize,
    kv: KvType,
    ubatch: usize,
    advice: Option<&str>,
) -> Result<()> {
    let Some(free) = strata_engine::residency::available_memory_bytes() else {
        return Ok(());
    };
    check_against(&Shape::of(cfg, ubatch), n_ctx, kv, free as u128, advice)
}

/// [`check_session_or`] against `free` bytes.
pub fn check_against(
    cfg: &Shape,
    n_ctx: usize,
    kv: KvType,
    free: u128,
    advice: Option<&str>,
) -> Result<()> {
    let kv_need = kv_bytes(cfg, n_ctx, kv);
    let need = kv_need + scratch_bytes(cfg, n_ctx);
    if need <= free {
        return Ok(());
    }
    let kv_name = match kv {
        KvType::F16 => "f16",
        KvType::F32 => "f32",
    };
    let mut try_this = match (advice, fitting_ctx(cfg, kv, free)) {
        (Some(a), _) => a.to_string(),
        (None, Some(n)) => format!("try --ctx {n}"),
        (None, None) => "close other programs or use a smaller model".to_string(),
    };
    if kv == KvType::F32 {
        try_this.push_str(" or --kv f16 (half the size)");
    }
    bail!(
        "a context of {n_ctx} tokens needs {} of memory ({} for the {kv_name} KV cache) but {} is free; {try_this}",
        human(need),
        human(kv_need),
        human(free)
    )
}

/// The largest power of two from 512 up to the model's training context whose session takes
/// at most three quarters of `free` (the rest stays for the weights' pages and the system).
fn fitting_ctx(cfg: &Shape, kv: KvType, free: u128) -> Option<usize> {
    let budget = free / 4 * 3;
    let top = cfg.n_ctx_train.max(512);
    let mut n = 512usize;
    let mut best = None;
    while n <= top {
        if kv_bytes(cfg, n, kv) + scratch_bytes(cfg, n) > budget {
            break;
        }
        best = Some(n);
        n *= 2;
    }
    best
}

/// `38.4 GB`-style sizes in GiB or MiB.
pub fn human(bytes: u128) -> String {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M's shape: 30 layers, 3 KV heads of 64.
    fn smollm2() -> Shape {
        Shape {
            n_attn_layers: 30,
            kv_row: 3 * 64,
            index_keys: 0,
            n_embd: 576,
            q: 9 * 64,
            ff: 1536,
            n_vocab: 49152,
            n_ctx_train: 8192,
            ubatch: 512,
        }
    }

    #[test]
    fn kv_bytes_follow_the_formula() {
        let c = smollm2();
        // 2 · 30 layers · 4096 positions · 192 values · 2 bytes.
        assert_eq!(kv_bytes(&c, 4096, KvType::F16), 2 * 30 * 4096 * 192 * 2);
        assert_eq!(
            kv_bytes(&c, 4096, KvType::F32),
            2 * kv_bytes(&c, 4096, KvType::F16)
        );
        assert!(kv_bytes(&c, usize::MAX, KvType::F32) > u64::MAX as u128);
    }

    #[test]
    fn too_large_context_names_need_free_and_a_ctx_that_fits() {
        let c = smollm2();
        let free = 4u128 << 30;
        let err = check_against(&c, 100_000_000, KvType::F16, free, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("100000000 tokens needs"), "{err}");
        assert!(err.contains("4.0 GiB is free"), "{err}");
        assert!(err.contains("try --ctx 8192"), "{err}");
        assert!(check_against(&c, 8192, KvType::F16, free, None).is_ok());
        let tiny = check_against(&c, 8192, KvType::F32, 1 << 20, None).unwrap_err();
        assert!(tiny.to_string().contains("--kv f16"), "{tiny}");
    }
}
