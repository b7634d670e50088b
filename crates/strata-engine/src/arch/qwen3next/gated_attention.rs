//! The gated full-attention mixer of a Qwen3-Next layer: like Qwen3's attention (per-head
//! q/k RMS norms, GQA, NEOX RoPE on the first `rope.dimension_count` dims of each head), with
//! a second half of the q projection that gates the attention output through a sigmoid.
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_attn`.

use super::weights::GatedAttnWeights;
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, MatmulTo};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::attention::AttnShape;
use crate::session::SeqRun;

/// Writes the mixer output for the T normed rows in `ws.xb` to `ws.xb2`, appending each
/// sequence's keys and values to its cache of attention layer `i_attn`.
pub(super) fn mixer<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    m: &GatedAttnWeights,
    i_attn: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let hd = cfg.head_dim;
    let h = &mut ws.hybrid;
    let mut outs = [
        MatmulTo::new(&m.wq, &mut h.qg),
        MatmulTo::new(&m.wk, &mut ws.k),
        MatmulTo::new(&m.wv, &mut ws.v),
    ];
    be.matmuls(&mut ws.xb, &mut outs)?;
    // Each head's 2·head_dim outputs are its query, then its gate.
    be.split(&h.qg, &[hd, hd], &mut [&mut ws.q, &mut h.gate]);
    be.rms_norm_in_place(&mut ws.q, &m.q_norm, cfg.rms_eps);
    be.rms_norm_in_place(&mut ws.k, &m.k_norm, cfg.rms_eps);
    be.rope(&cfg.rope, &mut ws.q, hd, &ws.rope_cs);
    be.rope(&cfg.rope, &mut ws.k, hd, &ws.rope_cs);
    let shape = AttnShape {
        n_head: cfg.n_head,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: None,
    };
    be.attend(seqs, i_attn, &ws.q, &ws.k, &ws.v, &shape, &mut ws.att);
    be.mul_sigmoid(&mut ws.att, &h.gate);
    be.matmul(&m.wo, None, &mut ws.att, &mut ws.xb2)
}
