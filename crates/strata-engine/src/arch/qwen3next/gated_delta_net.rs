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
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::conv1d::causal_conv1d;
use crate::ops::delta_net::{
    delta_rule_recurrent, l2_norm_heads_in_place, DeltaInputs, DeltaShape,
};
use crate::ops::gate::{mul_silu_in_place, sigmoid, silu_in_place, softplus};
use crate::ops::linear::matmul;
use crate::ops::norm::rms_norm_rows;
use crate::recurrent_state::DeltaState;
use crate::workspace::{SeqRun, Workspace};

/// A sequence's state of recurrent layer `i_rec`.
fn layer_state<'s>(seq: &'s mut SeqRun<'_>, i_rec: usize) -> &'s mut DeltaState {
    let rec = seq
        .rec
        .as_mut()
        .expect("sessions of a hybrid model have recurrent state");
    &mut rec.layers[i_rec]
}

/// Writes the mixer output for the T normed rows in `ws.xb` to `ws.xb2` (`[T][n_embd]`),
/// advancing each sequence's convolution and delta-rule state of recurrent layer `i_rec`.
pub(super) fn mixer(
    cfg: &ModelConfig,
    m: &DeltaNetWeights,
    i_rec: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Workspace,
) -> Result<(), EngineError> {
    let s = cfg.ssm.as_ref().expect("qwen3next has an ssm config");
    let (kd, vd, cd, nv) = (s.key_dim(), s.value_dim(), s.conv_dim(), s.n_v_heads);
    let t_n = ws.xb2.len() / cfg.n_embd;
    let h = &mut ws.hybrid;
    h.qkv.resize(t_n * cd, 0.0);
    h.conv.resize(t_n * cd, 0.0);
    h.z.resize(t_n * vd, 0.0);
    h.ba.resize(t_n * 2 * nv, 0.0);
    matmul(&m.wqkv, None, &mut ws.xb, &mut h.qkv)?;
    matmul(&m.wgate, None, &mut ws.xb, &mut h.z)?;
    matmul(&m.wba, None, &mut ws.xb, &mut h.ba)?;

    for seq in seqs.iter_mut() {
        let r = seq.rows.start * cd..seq.rows.end * cd;
        let st = layer_state(seq, i_rec);
        causal_conv1d(&h.qkv[r.clone()], &m.conv, &mut st.conv, &mut h.conv[r]);
    }
    silu_in_place(&mut h.conv);
    h.q.clear();
    h.k.clear();
    h.v.clear();
    for row in h.conv.chunks_exact(cd) {
        h.q.extend_from_slice(&row[..kd]);
        h.k.extend_from_slice(&row[kd..2 * kd]);
        h.v.extend_from_slice(&row[2 * kd..]);
    }
    l2_norm_heads_in_place(&mut h.q, s.head_k_dim, cfg.rms_eps);
    l2_norm_heads_in_place(&mut h.k, s.head_k_dim, cfg.rms_eps);

    // W_ba rows come per key head: its r value heads' β logits, then their α logits.
    let r = nv / s.n_k_heads;
    h.beta.resize(t_n * nv, 0.0);
    h.log_decay.resize(t_n * nv, 0.0);
    for t in 0..t_n {
        let ba = &h.ba[t * 2 * nv..(t + 1) * 2 * nv];
        for vh in 0..nv {
            let (g, j) = (vh / r, vh % r);
            h.beta[t * nv + vh] = sigmoid(ba[g * 2 * r + j]);
            let alpha = ba[g * 2 * r + r + j];
            h.log_decay[t * nv + vh] = softplus(alpha + m.dt_bias[vh]) * m.a[vh];
        }
    }

    let shape = DeltaShape {
        n_v_heads: nv,
        n_k_heads: s.n_k_heads,
        d_k: s.head_k_dim,
        d_v: s.head_v_dim,
    };
    h.core.resize(t_n * vd, 0.0);
    for seq in seqs.iter_mut() {
        let rows = seq.rows.clone();
        let st = layer_state(seq, i_rec);
        let (kr, vr, hr) = (
            rows.start * kd..rows.end * kd,
            rows.start * vd..rows.end * vd,
            rows.start * nv..rows.end * nv,
        );
        let inputs = DeltaInputs {
            q: &h.q[kr.clone()],
            k: &h.k[kr],
            v: &h.v[vr.clone()],
            log_decay: &h.log_decay[hr.clone()],
            beta: &h.beta[hr],
        };
        // Token by token for any T, so a position's output never depends on how many tokens
        // came in its call (batch invariance); the chunked form rounds differently.
        delta_rule_recurrent(&shape, inputs, &mut st.ssm, &mut h.core[vr]);
    }

    h.gated.resize(t_n, vd);
    let gated = h.gated.write();
    rms_norm_rows(&h.core, &m.norm, cfg.rms_eps, gated);
    mul_silu_in_place(gated, &h.z);
    matmul(&m.wout, None, &mut h.gated, &mut ws.xb2)
}
