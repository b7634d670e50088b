//! The Qwen3-Next recipe (`qwen3next`): every layer is
//!
//! ```text
//! x += mixer(rms_norm(x))          mixer: Gated DeltaNet (recurrent layers) or gated attention
//! x += moe(h) + σ(w·h)·shared(h)   h = rms_norm(x) (`post_attention_norm`)
//! ```
//!
//! then a final norm and the LM head. Which layers are recurrent comes from the metadata
//! (`attention.recurrent_layers` / `full_attention_interval`).
//!
//! Sources: llama.cpp `src/models/qwen3next.cpp`; HF transformers `modeling_qwen3_next.py`;
//! Qwen team, "Qwen3-Next" (2025).

use std::ops::Range;

use super::shared_expert::{moe_and_shared_expert, SharedScratch};
use super::weights::{HybridWeights, Mixer};
use super::{gated_attention, gated_delta_net};
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, Memory};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::session::SeqRun;

/// Buffers of the hybrid layers, grown to the largest batch and reused.
#[derive(Default)]
pub struct HybridScratch<M: Memory> {
    /// Projected q, k, v before the convolution `[T][conv_dim]`, then after it (+ SiLU).
    pub(super) qkv: M::Buf,
    pub(super) conv: M::Buf,
    /// Convolved, L2-normed queries and keys `[T][key_dim]`; values `[T][value_dim]`.
    pub(super) q: M::Buf,
    pub(super) k: M::Buf,
    pub(super) v: M::Buf,
    /// Output gate z `[T][value_dim]`.
    pub(super) z: M::Buf,
    /// β and α logits `[T][2·n_v_heads]`, then β and the log decay `[T][n_v_heads]`.
    pub(super) ba: M::Buf,
    pub(super) beta: M::Buf,
    pub(super) log_decay: M::Buf,
    /// Delta-rule output `[T][value_dim]`, and it normed and gated (input of `ssm_out`).
    pub(super) core: M::Buf,
    pub(super) gated: M::Buf,
    /// Gated attention's joint query + gate projection `[T][n_head·2·head_dim]`, and the
    /// gate half `[T][n_head·head_dim]`.
    pub(super) qg: M::Buf,
    pub(super) gate: M::Buf,
    pub(super) shared: SharedScratch<M>,
}

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions and with
/// its own caches and recurrent state) through `layers`, leaving the residual stream after
/// them in `ws.x` (`[T][n_embd]`). The range starting at 0 embeds the tokens first;
/// otherwise `ws.x` holds the residual entering it.
///
/// Errors: a token outside the vocabulary, unsupported weight types.
pub fn forward<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &HybridWeights,
    ws: &mut Ws<B>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
    layers: Range<usize>,
) -> Result<(), EngineError> {
    if layers.start == 0 {
        be.embed(&w.token_embd, cfg.embd_scale, tokens, &mut ws.x)?;
    }
    be.rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    let (mut i_attn, mut i_rec) = cfg.state_slots(layers.start);
    for lw in &w.layers[layers] {
        be.rms_norm(&ws.x, &lw.attn_norm, cfg.rms_eps, &mut ws.xb);
        match &lw.mixer {
            Mixer::DeltaNet(m) => {
                gated_delta_net::mixer(be, cfg, m, i_rec, seqs, ws)?;
                i_rec += 1;
            }
            Mixer::Attention(m) => {
                gated_attention::mixer(be, cfg, m, i_attn, seqs, ws)?;
                i_attn += 1;
            }
        }
        be.add(&mut ws.x, &ws.xb2);
        be.rms_norm(&ws.x, &lw.ffn_norm, cfg.rms_eps, &mut ws.xb);
        moe_and_shared_expert(
            be,
            &lw.moe,
            &lw.shared,
            &mut ws.xb,
            &mut ws.xb2,
            &mut ws.moe,
            &mut ws.hybrid.shared,
        )?;
        be.add(&mut ws.x, &ws.xb2);
    }
    Ok(())
}
