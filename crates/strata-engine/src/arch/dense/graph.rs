//! The decoder recipe: llama, qwen2, qwen3, gemma3 and qwen3moe share one layer whose optional
//! parts (q/k/v biases, q/k norms, sandwich norms, windowed layers, GeGLU, routed experts)
//! are present exactly when the architecture has them.
//!
//! Sources: llama.cpp `src/models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `gemma3.cpp`, `qwen3moe.cpp`;
//! Touvron et al. 2023 (Llama), Gemma Team 2025 (Gemma 3).

use std::ops::Range;

use super::weights::{Ffn, LayerWeights, Weights};
use crate::backend::{Backend, Glu, MatmulTo};
use crate::config::{Arch, ModelConfig};
use crate::error::EngineError;
use crate::ops::attention::AttnShape;
use crate::ops::linear::Matrix;
use crate::session::SeqRun;
use crate::workspace::Workspace;

/// The workspace of backend `B`.
pub(crate) type Ws<B> = Workspace<<B as Backend>::Mem>;

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions) through
/// `layers`, leaving the residual stream after them in `ws.x` (`[T][n_embd]`). The range
/// starting at 0 embeds the tokens first; otherwise `ws.x` holds the residual entering it.
pub fn forward<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &Weights,
    ws: &mut Ws<B>,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
    layers: Range<usize>,
) -> Result<(), EngineError> {
    if layers.start == 0 {
        be.embed(&w.token_embd, cfg.embd_scale, tokens, &mut ws.x)?;
    }
    be.rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    be.rope_angles(&cfg.rope_swa, &ws.pos, &mut ws.rope_cs_swa);
    for il in layers {
        let lw = &w.layers[il];
        attention_block(be, cfg, il, lw, seqs, ws)?;
        ffn_block(be, cfg, lw, ws)?;
    }
    Ok(())
}

/// norm → q,k,v (+bias) → q/k norm → RoPE → cache → attention → out proj → post-norm → residual.
fn attention_block<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    il: usize,
    lw: &LayerWeights,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    let hd = cfg.head_dim;
    be.rms_norm(&ws.x, &lw.attn_norm, cfg.rms_eps, &mut ws.xb);
    let qkv = [
        (&lw.wq, lw.bq.as_deref(), &mut ws.q),
        (&lw.wk, lw.bk.as_deref(), &mut ws.k),
        (&lw.wv, lw.bv.as_deref(), &mut ws.v),
    ];
    be.matmuls(
        &mut ws.xb,
        &mut qkv.map(|(w, bias, y)| MatmulTo { w, bias, y }),
    )?;
    if let Some(n) = &lw.q_norm {
        be.rms_norm_in_place(&mut ws.q, n, cfg.rms_eps);
    }
    if let Some(n) = &lw.k_norm {
        be.rms_norm_in_place(&mut ws.k, n, cfg.rms_eps);
    }
    let swa = cfg.swa_layers[il];
    let (rope, cs) = if swa {
        (&cfg.rope_swa, &ws.rope_cs_swa)
    } else {
        (&cfg.rope, &ws.rope_cs)
    };
    be.rope(rope, &mut ws.q, hd, cs);
    be.rope(rope, &mut ws.k, hd, cs);
    let shape = AttnShape {
        n_head: cfg.n_head,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: if swa { cfg.sliding_window } else { None },
    };
    be.attend(seqs, il, &ws.q, &ws.k, &ws.v, &shape, &mut ws.att);
    be.matmul(&lw.wo, None, &mut ws.att, &mut ws.xb2)?;
    if let Some(n) = &lw.post_attn_norm {
        be.rms_norm_in_place(&mut ws.xb2, n, cfg.rms_eps);
    }
    be.add(&mut ws.x, &ws.xb2);
    Ok(())
}

/// norm → gate, up → SwiGLU / GeGLU → down (or the routed experts) → post-norm → residual.
fn ffn_block<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    lw: &LayerWeights,
    ws: &mut Ws<B>,
) -> Result<(), EngineError> {
    be.rms_norm(&ws.x, &lw.ffn_norm, cfg.rms_eps, &mut ws.xb);
    match &lw.ffn {
        Ffn::Dense {
            w_gate,
            w_up,
            w_down,
        } => {
            let gate_up = [(w_gate, &mut ws.hb), (w_up, &mut ws.hb2)];
            let mut outs = gate_up.map(|(w, y)| MatmulTo { w, bias: None, y });
            be.matmuls(&mut ws.xb, &mut outs)?;
            let act = match cfg.arch {
                Arch::Gemma3 => Glu::GegluTanh,
                _ => Glu::SwiGlu,
            };
            be.glu(act, &mut ws.hb, &ws.hb2);
            be.matmul(w_down, None, &mut ws.hb, &mut ws.xb2)?;
        }
        Ffn::Moe(m) => be.moe(m, &mut ws.xb, &mut ws.xb2, &mut ws.moe)?,
    }
    if let Some(n) = &lw.post_ffn_norm {
        be.rms_norm_in_place(&mut ws.xb2, n, cfg.rms_eps);
    }
    be.add(&mut ws.x, &ws.xb2);
    Ok(())
}

/// Final norm and LM head of `rows` (ascending row indices of `ws.x`) into `ws.logits`
/// (`[rows][n_vocab]`), then the optional soft cap; their residual stream (the hidden states
/// an MTP head reads) stays in `ws.hidden` (`[rows][n_embd]`).
pub(crate) fn output<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    output_norm: &[f32],
    output: &Matrix<'_>,
    ws: &mut Ws<B>,
    rows: &[usize],
) -> Result<(), EngineError> {
    be.gather_rows(&ws.x, rows, &mut ws.hidden);
    be.rms_norm(&ws.hidden, output_norm, cfg.rms_eps, &mut ws.xb);
    be.matmul(output, None, &mut ws.xb, &mut ws.logits)?;
    if let Some(cap) = cfg.final_logit_softcap {
        be.softcap(&mut ws.logits, cap);
    }
    Ok(())
}
