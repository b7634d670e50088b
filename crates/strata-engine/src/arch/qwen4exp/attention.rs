//! The gated attention mixer of a qwen4exp layer, with QSA sparse attention on layers with a
//! compress ratio: Qwen3-Next's gated attention (q and its sigmoid output gate interleaved per
//! head, per-head q/k RMS norms, NeoX RoPE on the first `n_rot` dims), whose queries attend
//! only to the blocks of tokens the indexer picks.
//!
//! ```text
//! q|gate = W_q·x   k = W_k·x   v = W_v·x      q, k ← rope(rms_norm(·) · w)
//! qi = rope(rms_norm(W_qi·x) · w_qi)          kr = W_ki·x (cached raw)      QSA layers only
//! out = W_o · (attend(q, K, V; kept tokens) ⊙ σ(gate))
//! ```
//!
//! For text the interleaved M-RoPE of the checkpoint has the same position in all sections,
//! so it is this plain partial rotation.
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextAttention.forward`,
//! `Qwen4ExpTextQSAIndexer.forward`, `apply_rotary_pos_emb`; llama.cpp `build_layer_attn`.

use super::weights::AttnWeights;
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, MatmulTo, Memory, QsaBufs};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::attention::AttnShape;
use crate::ops::qsa::{BlockKeyWeights, QsaShape};
use crate::session::SeqRun;

/// Buffers of the attention mixer, grown to the largest run and reused.
#[derive(Default)]
pub struct AttnScratch<M: Memory> {
    /// Joint query + gate projection `[T][n_head·2·head_dim]`, and the gate half.
    qg: M::Buf,
    gate: M::Buf,
    /// Indexer queries `[T][ni·di]` and raw indexer keys `[T][di]`.
    iq: M::Buf,
    ik: M::Buf,
}

/// Writes the mixer output for the T mixed rows in `ws.xb` to `ws.xb2`, appending each
/// sequence's keys and values (and raw indexer keys on QSA layers) to its cache of attention
/// layer `i_attn` (model layer `il`).
///
/// Errors: unsupported weight types.
pub(super) fn mixer<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    m: &AttnWeights,
    il: usize,
    i_attn: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let hd = cfg.head_dim;
    let (a, h) = (&m.attn, &mut ws.qwen4exp.attn);
    let mut outs = [
        MatmulTo::new(&a.wq, &mut h.qg),
        MatmulTo::new(&a.wk, &mut ws.k),
        MatmulTo::new(&a.wv, &mut ws.v),
    ];
    be.matmuls(&mut ws.xb, &mut outs)?;
    // Each head's 2·head_dim outputs are its query, then its gate.
    be.split(&h.qg, &[hd, hd], &mut [&mut ws.q, &mut h.gate]);
    be.rms_norm_in_place(&mut ws.q, &a.q_norm, cfg.rms_eps);
    be.rms_norm_in_place(&mut ws.k, &a.k_norm, cfg.rms_eps);
    be.rope(&cfg.rope, &mut ws.q, hd, &ws.rope_cs);
    be.rope(&cfg.rope, &mut ws.k, hd, &ws.rope_cs);
    let shape = AttnShape {
        n_head: cfg.n_head,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: None,
    };
    let sparse = cfg.qsa.as_ref().filter(|q| q.is_sparse(il));
    match (sparse, &m.indexer) {
        (Some(q), Some(ix)) => {
            let di = q.head_dim;
            let mut outs = [
                MatmulTo::new(&ix.wq, &mut h.iq),
                MatmulTo::new(&ix.wk, &mut h.ik),
            ];
            be.matmuls(&mut ws.xb, &mut outs)?;
            be.rms_norm_in_place(&mut h.iq, &ix.q_norm, cfg.rms_eps);
            be.rope(&cfg.rope, &mut h.iq, di, &ws.rope_cs);
            let qsa = QsaShape {
                ratio: q.ratios[il],
                budget: q.budget,
                n_head: q.n_head,
                head_dim: di,
                eps: cfg.rms_eps,
            };
            let bk = BlockKeyWeights {
                k_norm: &ix.k_norm,
                rope: &cfg.rope,
            };
            let x = QsaBufs {
                q: &ws.q,
                k: &ws.k,
                v: &ws.v,
                iq: &h.iq,
                ik: &h.ik,
            };
            be.attend_qsa(seqs, i_attn, x, &shape, &qsa, bk, &mut ws.att);
        }
        _ => be.attend(seqs, i_attn, &ws.q, &ws.k, &ws.v, &shape, &mut ws.att),
    }
    be.mul_sigmoid(&mut ws.att, &h.gate);
    be.matmul(&a.wo, None, &mut ws.att, &mut ws.xb2)
}
