//! The qwen4exp recipe (Qwen3.8-Flash-Next). The residual is `hc` parallel streams
//! (`R`, `[T][hc·H]`), starting as `hc` copies of the token embedding; every layer is
//!
//! ```text
//! R += ple(R, ids)                                  PLE layer only
//! (x, w) = hc_mix(R, hc_attn)     R_s += w_s · mixer(x)     Gated DeltaNet or gated (QSA) attention
//! (x, w) = hc_mix(R, hc_ffn)      R_s += w_s · (moe(x) + σ(g·x)·shared(x))
//! ```
//!
//! and the logits are `output · hc_mix(R, output_hc)`: the final mixer stands in for the
//! output norm.
//!
//! Sources: transformers 5.23 `modeling_qwen4_exp.py` (`Qwen4ExpTextDecoderLayer.forward`,
//! `Qwen4ExpTextModel.forward`, `Qwen4ExpForCausalLM.forward`); llama.cpp
//! `src/models/qwen4exp.cpp` (`graph::graph`); docs/qwen4exp.md.

use super::weights::{Mixer, Qwen4ExpWeights};
use super::{attention, gated_delta_net, hyper, ple};
use crate::arch::dense::graph::Ws;
use crate::arch::qwen3next::shared_expert::{shared_expert_add, SharedScratch};
use crate::backend::{Backend, Memory};
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::session::SeqRun;

/// Buffers of the qwen4exp layers, grown to the largest run and reused.
#[derive(Default)]
pub struct Qwen4ExpScratch<M: Memory> {
    /// Table row ids of [`Backend::embed_rows`]: each token `hc` times, or its hashed n-gram
    /// rows (host memory).
    pub(super) ids: Vec<u32>,
    pub(super) hc: hyper::HcScratch<M>,
    pub(super) ple: ple::PleScratch<M>,
    pub(super) delta: gated_delta_net::DeltaScratch<M>,
    pub(super) attn: attention::AttnScratch<M>,
    pub(super) shared: SharedScratch<M>,
}

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions with its
/// own caches and state) through every layer, leaving the residual streams in `ws.x`
/// (`[T][hc·n_embd]`).
///
/// Errors: a token outside the vocabulary, unsupported weight types.
pub fn forward<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &Qwen4ExpWeights,
    ws: &mut Ws<B>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
) -> Result<(), EngineError> {
    let hc = cfg.hyper.map_or(1, |h| h.n_streams);
    let s = &mut ws.qwen4exp;
    s.ids.clear();
    s.ids
        .extend(tokens.iter().flat_map(|t| std::iter::repeat_n(*t, hc)));
    be.embed_rows(&w.token_embd, &s.ids, hc, &mut ws.x)?;
    be.rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    let (mut i_attn, mut i_rec) = (0, 0);
    for (il, lw) in w.layers.iter().enumerate() {
        if let (Some(p), Some(table)) = (&lw.ple, &w.ple_table) {
            ple::inject(be, cfg, p, table, seqs, tokens, ws)?;
        }
        hyper::mix(be, cfg, &lw.hc_attn, &ws.x, &mut ws.qwen4exp.hc, &mut ws.xb)?;
        match &lw.mixer {
            Mixer::DeltaNet(m) => {
                gated_delta_net::mixer(be, cfg, m, i_rec, seqs, ws)?;
                i_rec += 1;
            }
            Mixer::Attention(m) => {
                attention::mixer(be, cfg, m, il, i_attn, seqs, ws)?;
                i_attn += 1;
            }
        }
        be.hc_expand_add(&mut ws.x, &ws.xb2, &ws.qwen4exp.hc.inj);
        hyper::mix(be, cfg, &lw.hc_ffn, &ws.x, &mut ws.qwen4exp.hc, &mut ws.xb)?;
        be.moe(&lw.moe, &mut ws.xb, &mut ws.xb2, &mut ws.moe)?;
        let shared = &mut ws.qwen4exp.shared;
        shared_expert_add(be, &lw.shared, &mut ws.xb, &mut ws.xb2, shared)?;
        be.hc_expand_add(&mut ws.x, &ws.xb2, &ws.qwen4exp.hc.inj);
    }
    Ok(())
}

/// The final mixer and the LM head of `rows` (ascending row indices of `ws.x`) into
/// `ws.logits` (`[rows][n_vocab]`); their residual streams (`[rows][hc·n_embd]`, what the MTP
/// layer reads) stay in `ws.hidden`.
///
/// Errors: unsupported weight types.
pub fn output<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &Qwen4ExpWeights,
    ws: &mut Ws<B>,
    rows: &[usize],
) -> Result<(), EngineError> {
    be.gather_rows(&ws.x, rows, &mut ws.hidden);
    hyper::mix(
        be,
        cfg,
        &w.output_hc,
        &ws.hidden,
        &mut ws.qwen4exp.hc,
        &mut ws.xb,
    )?;
    be.matmul(&w.output, None, &mut ws.xb, &mut ws.logits)
}
