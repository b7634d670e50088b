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

use std::ops::Range;

use super::weights::{Layer, Mixer, Qwen4ExpWeights};
use super::{attention, gated_delta_net, hyper, ple};
use crate::arch::dense::graph::Ws;
use crate::arch::qwen3next::shared_expert::{moe_and_shared_expert, SharedScratch};
use crate::backend::{Backend, Buf, Memory};
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
    /// The MTP input's streams `[T][H]` each, then the eh_proj outputs (`hc` buffers), and
    /// one `[T][2·H]` eh_proj input.
    pub(super) mtp_streams: Vec<M::Buf>,
    pub(super) mtp_cat: M::Buf,
    /// `0..T`: every row of an MTP step is output.
    pub(super) mtp_rows: Vec<usize>,
}

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions with its
/// own caches and state) through `layers`, leaving the residual streams after them in `ws.x`
/// (`[T][hc·n_embd]`). The range starting at 0 embeds the tokens first (`hc` copies of each
/// embedding row); otherwise `ws.x` holds the streams entering it. The PLE layer reads the
/// run's `tokens` wherever it runs.
///
/// Errors: a token outside the vocabulary, unsupported weight types.
pub fn forward<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &Qwen4ExpWeights,
    ws: &mut Ws<B>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
    layers: Range<usize>,
) -> Result<(), EngineError> {
    if layers.start == 0 {
        let hc = cfg.hyper.map_or(1, |h| h.n_streams);
        let s = &mut ws.qwen4exp;
        s.ids.clear();
        s.ids
            .extend(tokens.iter().flat_map(|t| std::iter::repeat_n(*t, hc)));
        be.embed_rows(&w.token_embd, &s.ids, hc, &mut ws.x)?;
    }
    be.rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    let (mut i_attn, mut i_rec) = cfg.state_slots(layers.start);
    for il in layers {
        let lw = &w.layers[il];
        if let (Some(p), Some(table)) = (&lw.ple, &w.ple_table) {
            ple::inject(be, cfg, p, table, seqs, tokens, ws)?;
        }
        let i = match &lw.mixer {
            Mixer::DeltaNet(_) => &mut i_rec,
            Mixer::Attention(_) => &mut i_attn,
        };
        layer(be, cfg, lw, il, *i, seqs, ws)?;
        *i += 1;
    }
    Ok(())
}

/// One layer's token mixer and MoE, each read through its hyper-connection mixer and
/// combined back into the residual streams `ws.x` (`[T][hc·H]`, in place). `il` is the model
/// layer (its QSA ratio), `i` its index among the layers of its kind (attention KV layer or
/// recurrent state). PLE, on the layer that has it, is the caller's.
///
/// Errors: unsupported weight types.
fn layer<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    lw: &Layer,
    il: usize,
    i: usize,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    hyper::mix(be, cfg, &lw.hc_attn, &ws.x, &mut ws.qwen4exp.hc, &mut ws.xb)?;
    match &lw.mixer {
        Mixer::DeltaNet(m) => gated_delta_net::mixer(be, cfg, m, i, seqs, ws)?,
        Mixer::Attention(m) => attention::mixer(be, cfg, m, il, i, seqs, ws)?,
    }
    be.hc_expand_add(&mut ws.x, &ws.xb2, &ws.qwen4exp.hc.inj);
    hyper::mix(be, cfg, &lw.hc_ffn, &ws.x, &mut ws.qwen4exp.hc, &mut ws.xb)?;
    let (x, out, shared) = (&mut ws.xb, &mut ws.xb2, &mut ws.qwen4exp.shared);
    moe_and_shared_expert(be, &lw.moe, &lw.shared, x, out, &mut ws.moe, shared)?;
    be.hc_expand_add(&mut ws.x, &ws.xb2, &ws.qwen4exp.hc.inj);
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

/// One MTP draft step over the run's rows (docs/qwen4exp.md, "The MTP layer"; vLLM
/// `Qwen4ExpMultiTokenPredictor.forward`, scripts/make_tiny_qwen4exp.py `mtp_draft_logits`).
/// Row `t` reads the residual `R_t` in `ws.x` (`[T][hc·H]`: the trunk's final residual of
/// position `p` — [`crate::SeqOutput::hidden`] — or the previous draft step's output) and
/// `tokens[t]` (the token after `p`), at position `ws.pos[t]` = `p` (RoPE and the MTP's KV
/// slot; vLLM's convention, which the reference follows):
///
/// ```text
/// X_s    = eh_proj · [enorm(token_embd[t]); hnorm(R)_s]      [T][hc·H], hnorm over the whole row
/// X      = mtp_layer(X)                                      its own KV: KV layer n_attn_layers
/// logits = output · hc_mix(X, hc_head)                       [T][n_vocab] into ws.logits
/// ```
///
/// `X` (`[T][hc·H]`) is left in `ws.hidden`: the input of the next draft step. Each
/// sequence's keys and values (and raw indexer keys) go to its KV layer `cfg.n_attn_layers()`.
///
/// Errors: [`EngineError::NoMtp`] without an MTP layer, a token outside the vocabulary,
/// unsupported weight types.
pub fn mtp<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &Qwen4ExpWeights,
    ws: &mut Ws<B>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
) -> Result<(), EngineError> {
    let m = w.mtp.as_ref().ok_or(EngineError::NoMtp)?;
    let (hc, d) = (cfg.hyper.map_or(1, |h| h.n_streams), cfg.n_embd);
    be.embed(&w.token_embd, 1.0, tokens, &mut ws.xb)?;
    be.rms_norm_in_place(&mut ws.xb, &m.enorm, cfg.rms_eps);
    be.rms_norm_in_place(&mut ws.x, &m.hnorm, cfg.rms_eps);
    let s = &mut ws.qwen4exp;
    s.mtp_streams.resize_with(hc, Default::default);
    {
        let mut outs: Vec<&mut Buf<B>> = s.mtp_streams.iter_mut().collect();
        be.split(&ws.x, &vec![d; hc], &mut outs);
    }
    // eh_proj · [e; h_s] = fc_embedding · e + fc_hidden · h_s, one stream at a time.
    for st in s.mtp_streams.iter_mut() {
        be.concat(&[&ws.xb, &*st], &mut s.mtp_cat);
        be.matmul(&m.eh_proj, None, &mut s.mtp_cat, st)?;
    }
    let parts: Vec<&Buf<B>> = s.mtp_streams.iter().collect();
    be.concat(&parts, &mut ws.x);
    be.rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    layer(
        be,
        cfg,
        &m.layer,
        cfg.n_layer,
        cfg.n_attn_layers(),
        seqs,
        ws,
    )?;
    let s = &mut ws.qwen4exp;
    s.mtp_rows.clear();
    s.mtp_rows.extend(0..tokens.len());
    be.gather_rows(&ws.x, &s.mtp_rows, &mut ws.hidden);
    hyper::mix(be, cfg, &m.hc_head, &ws.hidden, &mut s.hc, &mut ws.xb)?;
    be.matmul(&w.output, None, &mut ws.xb, &mut ws.logits)
}
