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

use super::weights::{HybridWeights, Mixer};
use super::{gated_attention, gated_delta_net};
use crate::arch::dense::graph::{embed, rope_angles};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::add_in_place;
use crate::ops::linear::Activations;
use crate::ops::moe::moe_ffn;
use crate::ops::norm::rms_norm_rows;
use crate::ops::shared_expert::{shared_expert_add, SharedScratch};
use crate::workspace::{SeqRun, Workspace};

/// Buffers of the hybrid layers, grown to the largest batch and reused.
#[derive(Default)]
pub struct HybridScratch {
    /// Projected q, k, v before the convolution `[T][conv_dim]`, then after it (+ SiLU).
    pub(super) qkv: Vec<f32>,
    pub(super) conv: Vec<f32>,
    /// Convolved, L2-normed queries and keys `[T][key_dim]`; values `[T][value_dim]`.
    pub(super) q: Vec<f32>,
    pub(super) k: Vec<f32>,
    pub(super) v: Vec<f32>,
    /// Output gate z `[T][value_dim]`.
    pub(super) z: Vec<f32>,
    /// β and α logits `[T][2·n_v_heads]`, then β and the log decay `[T][n_v_heads]`.
    pub(super) ba: Vec<f32>,
    pub(super) beta: Vec<f32>,
    pub(super) log_decay: Vec<f32>,
    /// Delta-rule output `[T][value_dim]`, and it normed and gated (input of `ssm_out`).
    pub(super) core: Vec<f32>,
    pub(super) gated: Activations,
    /// Gated attention's joint query + gate projection `[T][n_head·2·head_dim]`.
    pub(super) qg: Vec<f32>,
    pub(super) shared: SharedScratch,
}

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions and with
/// its own caches and recurrent state) through every layer, leaving the final residual stream
/// in `ws.x` (`[T][n_embd]`).
///
/// Errors: a token outside the vocabulary, unsupported weight types.
pub fn forward(
    cfg: &ModelConfig,
    w: &HybridWeights,
    ws: &mut Workspace,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
) -> Result<(), EngineError> {
    embed(cfg, &w.token_embd, tokens, &mut ws.x)?;
    rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    let (mut i_attn, mut i_rec) = (0, 0);
    for lw in &w.layers {
        rms_norm_rows(&ws.x, &lw.attn_norm, cfg.rms_eps, ws.xb.write());
        match &lw.mixer {
            Mixer::DeltaNet(m) => {
                gated_delta_net::mixer(cfg, m, i_rec, seqs, ws)?;
                i_rec += 1;
            }
            Mixer::Attention(m) => {
                gated_attention::mixer(cfg, m, i_attn, seqs, ws)?;
                i_attn += 1;
            }
        }
        add_in_place(&mut ws.x, &ws.xb2);
        rms_norm_rows(&ws.x, &lw.ffn_norm, cfg.rms_eps, ws.xb.write());
        moe_ffn(&lw.moe, &mut ws.xb, &mut ws.xb2, &mut ws.moe)?;
        shared_expert_add(&lw.shared, &mut ws.xb, &mut ws.xb2, &mut ws.hybrid.shared)?;
        add_in_place(&mut ws.x, &ws.xb2);
    }
    Ok(())
}
