//! The PLE injection of the PLE layer (`Qwen4ExpTextPLELayer.forward`, `_short_conv`;
//! llama.cpp `build_ple`): the hashed n-gram rows of each token, gated per residual stream,
//! added to the streams together with a dilated causal convolution of them.
//!
//! ```text
//! E     = concat_h table[row_h]                          [T][n_heads·row]  (ngram.rs)
//! key   = rms_norm_g(W_key · E) · w_key                  [T][hc·H]   (_g: per stream)
//! val   = W_val · E                                      [T][H]
//! qry   = rms_norm_g(R) · w_query
//! gv_s  = σ(sign(σ_s)·√max(|σ_s|, 1e-6)) · val,  σ_s = key_s · qry_s / √H
//! cv    = rms_norm_g(gv) · w_conv
//! R    += gv + silu(dilated_conv(cv))                    taps n-gram-size rows apart
//! ```

use super::ngram::hashed_rows;
use super::weights::PleWeights;
use crate::arch::dense::graph::Ws;
use crate::backend::{Backend, MatmulTo, Memory};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::session::SeqRun;

/// Buffers of the PLE injection, grown to the largest run and reused.
#[derive(Default)]
pub struct PleScratch<M: Memory> {
    /// Gathered n-gram embeddings `[T][n_heads·row]`.
    emb: M::Buf,
    /// Key projection, then normed `[T][hc·H]`; value `[T][H]`; normed residual `[T][hc·H]`.
    key: M::Buf,
    key_n: M::Buf,
    val: M::Buf,
    qry: M::Buf,
    /// Gated value, its norm, and the convolution output `[T][hc·H]`.
    gv: M::Buf,
    cv: M::Buf,
    conv: M::Buf,
}

/// `ws.x += gv + silu(conv(cv))` for the run's `tokens` (the rows of `seqs`), advancing each
/// sequence's n-gram window and convolution history.
///
/// Errors: unsupported weight types.
pub(super) fn inject<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &PleWeights,
    table: &Matrix<'_>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let p = cfg.ple.as_ref().expect("a PLE layer has a PLE config");
    let (d, eps) = (cfg.n_embd, cfg.rms_eps);
    let ids = &mut ws.qwen4exp.ids;
    ids.clear();
    for seq in seqs.iter_mut() {
        let rows = seq.rows.clone();
        hashed_rows(p, seq.ple_state(), &tokens[rows], ids);
    }
    let s = &mut ws.qwen4exp.ple;
    be.embed_rows(table, ids, p.n_heads(), &mut s.emb)?;
    let mut outs = [
        MatmulTo::new(&w.key, &mut s.key),
        MatmulTo::new(&w.value, &mut s.val),
    ];
    be.matmuls(&mut s.emb, &mut outs)?;
    be.rms_norm_grouped(&s.key, &w.norm_key, d, eps, &mut s.key_n);
    be.rms_norm_grouped(&ws.x, &w.norm_query, d, eps, &mut s.qry);
    be.ple_gate(&s.key_n, &s.qry, &s.val, &mut s.gv);
    be.rms_norm_grouped(&s.gv, &w.norm_conv, d, eps, &mut s.cv);
    be.ple_conv(seqs, &s.cv, &w.conv, p.ngram, &mut s.conv);
    be.silu(&mut s.conv);
    // R + (gv + conv), in transformers' order.
    be.add(&mut s.conv, &s.gv);
    be.add(&mut ws.x, &s.conv);
    Ok(())
}
