//! The gated full-attention mixer of a Qwen3-Next layer: like Qwen3's attention (per-head
//! q/k RMS norms, GQA, NEOX RoPE on the first `rope.dimension_count` dims of each head), with
//! a second half of the q projection that gates the attention output through a sigmoid.
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_attn`.

use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::kv_cache::LayerKv;
use crate::ops::attention::{attention, AttnShape};
use crate::ops::gate::sigmoid;
use crate::ops::linear::matmul;
use crate::ops::norm::rms_norm_rows_in_place;
use crate::session::Workspace;
use crate::weights::GatedAttnWeights;

/// Writes the mixer output for the T normed rows in `ws.xb` (positions `pos0..`) to `ws.xb2`,
/// appending their keys and values to `kv`.
pub(super) fn mixer(
    cfg: &ModelConfig,
    m: &GatedAttnWeights,
    kv: &mut LayerKv,
    ws: &mut Workspace,
    pos0: usize,
) -> Result<(), EngineError> {
    let (hd, nh) = (cfg.head_dim, cfg.n_head);
    let (q_dim, kv_dim, n_rot) = (nh * hd, cfg.kv_row(), cfg.rope.n_rot);
    let t_n = ws.xb2.len() / cfg.n_embd;
    let qg = &mut ws.hybrid.qg;
    qg.resize(t_n * 2 * q_dim, 0.0);
    matmul(&m.wq, None, &mut ws.xb, qg)?;
    matmul(&m.wk, None, &mut ws.xb, &mut ws.k)?;
    matmul(&m.wv, None, &mut ws.xb, &mut ws.v)?;
    // Each head's 2·head_dim outputs are its query, then its gate.
    for (q, pair) in ws.q.chunks_exact_mut(hd).zip(qg.chunks_exact(2 * hd)) {
        q.copy_from_slice(&pair[..hd]);
    }
    rms_norm_rows_in_place(&mut ws.q, &m.q_norm, cfg.rms_eps);
    rms_norm_rows_in_place(&mut ws.k, &m.k_norm, cfg.rms_eps);
    for t in 0..t_n {
        let angles = &ws.rope_cs[t * n_rot..(t + 1) * n_rot];
        cfg.rope
            .apply(&mut ws.q[t * q_dim..(t + 1) * q_dim], hd, angles);
        cfg.rope
            .apply(&mut ws.k[t * kv_dim..(t + 1) * kv_dim], hd, angles);
        kv.write(
            pos0 + t,
            &ws.k[t * kv_dim..(t + 1) * kv_dim],
            &ws.v[t * kv_dim..(t + 1) * kv_dim],
        );
    }
    let shape = AttnShape {
        n_head: nh,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: None,
    };
    attention(&ws.q, kv, pos0, &shape, ws.att.write());
    for (o, pair) in ws
        .att
        .write()
        .chunks_exact_mut(hd)
        .zip(qg.chunks_exact(2 * hd))
    {
        for (oi, g) in o.iter_mut().zip(&pair[hd..]) {
            *oi *= sigmoid(*g);
        }
    }
    matmul(&m.wo, None, &mut ws.att, &mut ws.xb2)
}
