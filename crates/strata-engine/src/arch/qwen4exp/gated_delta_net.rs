//! The Gated DeltaNet mixer of a qwen4exp layer: Qwen3-Next's, with separate β and α
//! projections, value heads in the converter's tiled order, and a sigmoid output gate.
//!
//! ```text
//! q,k,v = split(silu(conv1d(W_qkv·x)))   z = W_gate·x   β = σ(W_β·x)   log g = softplus(W_α·x + dt_bias)·A
//! q, k ← l2_norm per head;  o = delta_rule(q, k, v, g, β)   (value head j reads key head j mod n_k)
//! out = W_out · (rms_norm(o) per head · w ⊙ σ(z))
//! ```
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextGatedDeltaNet.forward`
//! (`output_gate_type = "sigmoid"`); llama.cpp `build_layer_attn_linear`, `build_norm_gated`.

use super::weights::DeltaNetWeights;
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, DeltaBufs, MatmulTo, Memory};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::delta_net::{DeltaShape, KeyHeads};
use crate::session::SeqRun;

/// Buffers of the DeltaNet mixer, grown to the largest run and reused.
#[derive(Default)]
pub struct DeltaScratch<M: Memory> {
    /// Projected q, k, v `[T][conv_dim]`, then convolved (+ SiLU).
    qkv: M::Buf,
    conv: M::Buf,
    /// L2-normed queries and keys `[T][key_dim]`; values `[T][value_dim]`.
    q: M::Buf,
    k: M::Buf,
    v: M::Buf,
    /// Output gate z `[T][value_dim]`.
    z: M::Buf,
    /// β and α logits `[T][n_v_heads]` each, side by side `[T][2·n_v_heads]`.
    b: M::Buf,
    a: M::Buf,
    ba: M::Buf,
    /// β and the log decay `[T][n_v_heads]`.
    beta: M::Buf,
    log_decay: M::Buf,
    /// Delta-rule output `[T][value_dim]`, then normed and gated.
    core: M::Buf,
    gated: M::Buf,
}

/// Writes the mixer output for the T mixed rows in `ws.xb` to `ws.xb2` (`[T][n_embd]`),
/// advancing each sequence's convolution and delta-rule state of recurrent layer `i_rec`.
///
/// Errors: unsupported weight types.
pub(super) fn mixer<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    m: &DeltaNetWeights,
    i_rec: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let s = cfg.ssm.as_ref().expect("qwen4exp has an ssm config");
    let h = &mut ws.qwen4exp.delta;
    let mut outs = [
        MatmulTo::new(&m.wqkv, &mut h.qkv),
        MatmulTo::new(&m.wgate, &mut h.z),
        MatmulTo::new(&m.wbeta, &mut h.b),
        MatmulTo::new(&m.walpha, &mut h.a),
    ];
    be.matmuls(&mut ws.xb, &mut outs)?;

    be.conv1d(seqs, i_rec, &h.qkv, &m.conv, &mut h.conv);
    be.silu(&mut h.conv);
    let (kd, vd) = (s.key_dim(), s.value_dim());
    be.split(&h.conv, &[kd, kd, vd], &mut [&mut h.q, &mut h.k, &mut h.v]);
    be.l2_norm_heads(&mut h.q, s.head_k_dim, cfg.rms_eps);
    be.l2_norm_heads(&mut h.k, s.head_k_dim, cfg.rms_eps);
    // One "key head group" holding every value head: [β_0..β_nv | α_0..α_nv] per row.
    be.concat(&[&h.b, &h.a], &mut h.ba);
    be.delta_gates(&h.ba, &m.dt_bias, &m.a, 1, &mut h.beta, &mut h.log_decay);

    let shape = DeltaShape {
        n_v_heads: s.n_v_heads,
        n_k_heads: s.n_k_heads,
        d_k: s.head_k_dim,
        d_v: s.head_v_dim,
        key_heads: KeyHeads::Tiled,
    };
    let inputs = DeltaBufs {
        q: &h.q,
        k: &h.k,
        v: &h.v,
        log_decay: &h.log_decay,
        beta: &h.beta,
    };
    be.delta_rule(seqs, i_rec, &shape, inputs, &mut h.core);

    be.rms_norm(&h.core, &m.norm, cfg.rms_eps, &mut h.gated);
    be.mul_sigmoid(&mut h.gated, &h.z);
    be.matmul(&m.wout, None, &mut h.gated, &mut ws.xb2)
}
