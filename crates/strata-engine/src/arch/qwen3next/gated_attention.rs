//! The gated full-attention mixer of a Qwen3-Next layer: like Qwen3's attention (per-head
//! q/k RMS norms, GQA, NEOX RoPE on the first `rope.dimension_count` dims of each head), with
//! a second half of the q projection that gates the attention output through a sigmoid.
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_attn`.

use super::weights::GatedAttnWeights;
use crate::arch::dense::graph::cache_and_attend;
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::attention::AttnShape;
use crate::ops::gate::sigmoid;
use crate::ops::linear::matmul;
use crate::ops::norm::rms_norm_rows_in_place;
use crate::workspace::{SeqRun, Workspace};

/// Writes the mixer output for the T normed rows in `ws.xb` to `ws.xb2`, appending each
/// sequence's keys and values to its cache of attention layer `i_attn`.
pub(super) fn mixer(
    cfg: &ModelConfig,
    m: &GatedAttnWeights,
    i_attn: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Workspace,
) -> Result<(), EngineError> {
    let (hd, nh) = (cfg.head_dim, cfg.n_head);
    let (q_dim, kv_dim) = (nh * hd, cfg.kv_row());
    let t_n = ws.xb2.len() / cfg.n_embd;
    ws.hybrid.qg.resize(t_n * 2 * q_dim, 0.0);
    matmul(&m.wq, None, &mut ws.xb, &mut ws.hybrid.qg)?;
    matmul(&m.wk, None, &mut ws.xb, &mut ws.k)?;
    matmul(&m.wv, None, &mut ws.xb, &mut ws.v)?;
    // Each head's 2·head_dim outputs are its query, then its gate.
    for (q, pair) in
        ws.q.chunks_exact_mut(hd)
            .zip(ws.hybrid.qg.chunks_exact(2 * hd))
    {
        q.copy_from_slice(&pair[..hd]);
    }
    rms_norm_rows_in_place(&mut ws.q, &m.q_norm, cfg.rms_eps);
    rms_norm_rows_in_place(&mut ws.k, &m.k_norm, cfg.rms_eps);
    cfg.rope.apply_rows(&mut ws.q, q_dim, hd, &ws.rope_cs);
    cfg.rope.apply_rows(&mut ws.k, kv_dim, hd, &ws.rope_cs);
    let shape = AttnShape {
        n_head: nh,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: None,
    };
    cache_and_attend(seqs, i_attn, ws, &shape);
    for (o, pair) in ws
        .att
        .write()
        .chunks_exact_mut(hd)
        .zip(ws.hybrid.qg.chunks_exact(2 * hd))
    {
        for (oi, g) in o.iter_mut().zip(&pair[hd..]) {
            *oi *= sigmoid(*g);
        }
    }
    matmul(&m.wo, None, &mut ws.att, &mut ws.xb2)
}
