//! The Gated DeltaNet mixer of a Qwen3-Next layer:
//!
//! ```text
//! q,k,v = split(silu(conv1d(W_qkv·x)))   z = W_gate·x   (β, α) = W_ba·x
//! q, k ← l2_norm per head                β ← σ(β)        log g = softplus(α + dt_bias)·A
//! o = delta_rule(q, k, v, g, β)          (the recurrent form, token by token)
//! out = W_out · (rms_norm(o) per head ⊙ silu(z))
//! ```
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_attn_linear`.

use super::weights::DeltaNetWeights;
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, DeltaBufs, MatmulTo};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::delta_net::DeltaShape;
use crate::session::SeqRun;

/// Writes the mixer output for the T normed rows in `ws.xb` to `ws.xb2` (`[T][n_embd]`),
/// advancing each sequence's convolution and delta-rule state of recurrent layer `i_rec`.
pub(super) fn mixer<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    m: &DeltaNetWeights,
    i_rec: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let s = cfg.ssm.as_ref().expect("qwen3next has an ssm config");
    let h = &mut ws.hybrid;
    let mut outs = [
        MatmulTo::new(&m.wqkv, &mut h.qkv),
        MatmulTo::new(&m.wgate, &mut h.z),
        MatmulTo::new(&m.wba, &mut h.ba),
    ];
    be.matmuls(&mut ws.xb, &mut outs)?;

    be.conv1d(seqs, i_rec, &h.qkv, &m.conv, &mut h.conv);
    be.silu(&mut h.conv);
    let (kd, vd) = (s.key_dim(), s.value_dim());
    be.split(&h.conv, &[kd, kd, vd], &mut [&mut h.q, &mut h.k, &mut h.v]);
    be.l2_norm_heads(&mut h.q, s.head_k_dim, cfg.rms_eps);
    be.l2_norm_heads(&mut h.k, s.head_k_dim, cfg.rms_eps);
    be.delta_gates(
        &h.ba,
        &m.dt_bias,
        &m.a,
        s.n_k_heads,
        &mut h.beta,
        &mut h.log_decay,
    );

    let shape = DeltaShape {
        n_v_heads: s.n_v_heads,
        n_k_heads: s.n_k_heads,
        d_k: s.head_k_dim,
        d_v: s.head_v_dim,
        key_heads: Default::default(),
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
    be.mul_silu(&mut h.gated, &h.z);
    be.matmul(&m.wout, None, &mut h.gated, &mut ws.xb2)
}
