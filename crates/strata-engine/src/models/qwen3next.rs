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

mod gated_attention;
mod gated_delta_net;

use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::kv_cache::LayerKv;
use crate::models::dense::{embed, output};
use crate::ops::add_in_place;
use crate::ops::linear::Activations;
use crate::ops::moe::moe_ffn;
use crate::ops::norm::rms_norm_rows;
use crate::ops::shared_expert::{shared_expert_add, SharedScratch};
use crate::recurrent_state::RecurrentState;
use crate::session::Workspace;
use crate::weights::{HybridWeights, Mixer};

/// Buffers of the hybrid layers, grown to the largest batch and reused.
#[derive(Default)]
pub struct HybridScratch {
    /// Projected q, k, v before the convolution `[T][conv_dim]`, then after it (+ SiLU).
    qkv: Vec<f32>,
    conv: Vec<f32>,
    /// Convolved, L2-normed queries and keys `[T][key_dim]`; values `[T][value_dim]`.
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// Output gate z `[T][value_dim]`.
    z: Vec<f32>,
    /// β and α logits `[T][2·n_v_heads]`, then β and the log decay `[T][n_v_heads]`.
    ba: Vec<f32>,
    beta: Vec<f32>,
    log_decay: Vec<f32>,
    /// Delta-rule output `[T][value_dim]`, and it normed and gated (input of `ssm_out`).
    core: Vec<f32>,
    gated: Activations,
    /// Gated attention's joint query + gate projection `[T][n_head·2·head_dim]`.
    qg: Vec<f32>,
    shared: SharedScratch,
}

/// Runs `tokens` (positions `pos0 .. pos0+T`) through every layer, updating the attention
/// layers' caches `kv` (one per attention layer, in order) and the recurrent state `rec`,
/// and writes the logits of all T positions (`all_logits`) or of the last into `ws.logits`.
///
/// The delta rule runs token by token for any T (batch invariance).
/// Errors: a token outside the vocabulary, unsupported weight types.
#[allow(clippy::too_many_arguments)]
pub fn forward_batch(
    cfg: &ModelConfig,
    w: &HybridWeights,
    kv: &mut [LayerKv],
    rec: &mut RecurrentState,
    ws: &mut Workspace,
    tokens: &[u32],
    pos0: usize,
    all_logits: bool,
) -> Result<(), EngineError> {
    let t_n = tokens.len();
    ws.prepare(cfg, t_n);
    embed(cfg, &w.token_embd, tokens, &mut ws.x)?;
    let n_rot = cfg.rope.n_rot;
    for t in 0..t_n {
        cfg.rope
            .angles(pos0 + t, &mut ws.rope_cs[t * n_rot..(t + 1) * n_rot]);
    }
    let (mut kv_layers, mut rec_layers) = (kv.iter_mut(), rec.layers.iter_mut());
    for lw in &w.layers {
        rms_norm_rows(&ws.x, &lw.attn_norm, cfg.rms_eps, ws.xb.write());
        match &lw.mixer {
            Mixer::DeltaNet(m) => {
                let st = rec_layers.next().expect("one state per recurrent layer");
                gated_delta_net::mixer(cfg, m, st, ws)?;
            }
            Mixer::Attention(m) => {
                let lkv = kv_layers.next().expect("one cache per attention layer");
                gated_attention::mixer(cfg, m, lkv, ws, pos0)?;
            }
        }
        add_in_place(&mut ws.x, &ws.xb2);
        rms_norm_rows(&ws.x, &lw.ffn_norm, cfg.rms_eps, ws.xb.write());
        moe_ffn(&lw.moe, &mut ws.xb, &mut ws.xb2, &mut ws.moe)?;
        shared_expert_add(&lw.shared, &mut ws.xb, &mut ws.xb2, &mut ws.hybrid.shared)?;
        add_in_place(&mut ws.x, &ws.xb2);
    }
    output(cfg, &w.output_norm, &w.output, ws, t_n, all_logits)
}
