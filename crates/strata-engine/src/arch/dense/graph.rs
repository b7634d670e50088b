//! The decoder recipe: llama, qwen2, qwen3, gemma3 and qwen3moe share one layer whose optional
//! parts (q/k/v biases, q/k norms, sandwich norms, windowed layers, GeGLU, routed experts)
//! are present exactly when the architecture has them.
//!
//! Sources: llama.cpp `src/models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `gemma3.cpp`, `qwen3moe.cpp`;
//! Touvron et al. 2023 (Llama), Gemma Team 2025 (Gemma 3).

use super::weights::{Ffn, LayerWeights, Weights};
use crate::config::{Arch, ModelConfig};
use crate::error::EngineError;
use crate::ops::activation::{geglu_tanh, swiglu};
use crate::ops::attention::{attention, AttnShape};
use crate::ops::linear::{matmul, Matrix};
use crate::ops::moe::moe_ffn;
use crate::ops::norm::{rms_norm_rows, rms_norm_rows_in_place};
use crate::ops::rope::Rope;
use crate::ops::{add_in_place, par_chunks};
use crate::workspace::{SeqRun, Workspace};

/// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions) through
/// every layer, leaving the final residual stream in `ws.x` (`[T][n_embd]`).
pub fn forward(
    cfg: &ModelConfig,
    w: &Weights,
    ws: &mut Workspace,
    seqs: &mut [SeqRun<'_>],
    tokens: &[u32],
) -> Result<(), EngineError> {
    embed(cfg, &w.token_embd, tokens, &mut ws.x)?;
    rope_angles(&cfg.rope, &ws.pos, &mut ws.rope_cs);
    rope_angles(&cfg.rope_swa, &ws.pos, &mut ws.rope_cs_swa);
    for (il, lw) in w.layers.iter().enumerate() {
        attention_block(cfg, il, lw, seqs, ws)?;
        ffn_block(cfg, lw, ws)?;
    }
    Ok(())
}

/// `cs[t] = angles(pos[t])` for every row (`cs`: `[T][n_rot]`).
pub(crate) fn rope_angles(rope: &Rope, pos: &[usize], cs: &mut [f32]) {
    let n_rot = rope.n_rot;
    par_chunks(&mut cs[..pos.len() * n_rot], n_rot, |r, cs| {
        for (t, cs) in cs.chunks_exact_mut(n_rot).enumerate() {
            rope.angles(pos[r.start / n_rot + t], cs);
        }
    });
}

/// `x[t] = embd_scale · token_embd[tokens[t]]`.
pub(crate) fn embed(
    cfg: &ModelConfig,
    token_embd: &Matrix<'_>,
    tokens: &[u32],
    x: &mut [f32],
) -> Result<(), EngineError> {
    for (tok, row) in tokens.iter().zip(x.chunks_exact_mut(cfg.n_embd)) {
        if *tok as usize >= cfg.n_vocab {
            return Err(EngineError::InvalidToken {
                id: *tok,
                n_vocab: cfg.n_vocab,
            });
        }
        token_embd.dequantize_row(*tok as usize, row)?;
        if cfg.embd_scale != 1.0 {
            row.iter_mut().for_each(|v| *v *= cfg.embd_scale);
        }
    }
    Ok(())
}

/// norm → q,k,v (+bias) → q/k norm → RoPE → cache → attention → out proj → post-norm → residual.
fn attention_block(
    cfg: &ModelConfig,
    il: usize,
    lw: &LayerWeights,
    seqs: &mut [SeqRun<'_>],
    ws: &mut Workspace,
) -> Result<(), EngineError> {
    let hd = cfg.head_dim;
    rms_norm_rows(&ws.x, &lw.attn_norm, cfg.rms_eps, ws.xb.write());
    matmul(&lw.wq, lw.bq.as_deref(), &mut ws.xb, &mut ws.q)?;
    matmul(&lw.wk, lw.bk.as_deref(), &mut ws.xb, &mut ws.k)?;
    matmul(&lw.wv, lw.bv.as_deref(), &mut ws.xb, &mut ws.v)?;
    if let Some(n) = &lw.q_norm {
        rms_norm_rows_in_place(&mut ws.q, n, cfg.rms_eps);
    }
    if let Some(n) = &lw.k_norm {
        rms_norm_rows_in_place(&mut ws.k, n, cfg.rms_eps);
    }
    let swa = cfg.swa_layers[il];
    let (rope, cs) = if swa {
        (&cfg.rope_swa, &ws.rope_cs_swa)
    } else {
        (&cfg.rope, &ws.rope_cs)
    };
    let (q_dim, kv_dim) = (cfg.n_head * hd, cfg.kv_row());
    rope.apply_rows(&mut ws.q, q_dim, hd, &cs[..]);
    rope.apply_rows(&mut ws.k, kv_dim, hd, &cs[..]);
    let shape = AttnShape {
        n_head: cfg.n_head,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: if swa { cfg.sliding_window } else { None },
    };
    cache_and_attend(seqs, il, ws, &shape);
    matmul(&lw.wo, None, &mut ws.att, &mut ws.xb2)?;
    if let Some(n) = &lw.post_attn_norm {
        rms_norm_rows_in_place(&mut ws.xb2, n, cfg.rms_eps);
    }
    add_in_place(&mut ws.x, &ws.xb2);
    Ok(())
}

/// For every sequence of the run: appends the keys and values of its rows (`ws.k`, `ws.v`,
/// positions `pos0..`) to its cache of attention layer `layer`, and writes its rows' attention
/// outputs (queries `ws.q`) into `ws.att`.
pub(crate) fn cache_and_attend(
    seqs: &mut [SeqRun<'_>],
    layer: usize,
    ws: &mut Workspace,
    shape: &AttnShape,
) {
    let kv_dim = shape.n_kv_head * shape.head_dim;
    let q_dim = shape.n_head * shape.head_dim;
    let att = ws.att.write();
    for seq in seqs.iter_mut() {
        let kv = &mut seq.kv[layer];
        for (t, r) in seq.rows.clone().enumerate() {
            kv.write(
                seq.pos0 + t,
                &ws.k[r * kv_dim..(r + 1) * kv_dim],
                &ws.v[r * kv_dim..(r + 1) * kv_dim],
            );
        }
        let (a, b) = (seq.rows.start * q_dim, seq.rows.end * q_dim);
        attention(&ws.q[a..b], kv, seq.pos0, shape, &mut att[a..b]);
    }
}

/// norm → gate, up → SwiGLU / GeGLU → down (or the routed experts) → post-norm → residual.
fn ffn_block(cfg: &ModelConfig, lw: &LayerWeights, ws: &mut Workspace) -> Result<(), EngineError> {
    rms_norm_rows(&ws.x, &lw.ffn_norm, cfg.rms_eps, ws.xb.write());
    match &lw.ffn {
        Ffn::Dense {
            w_gate,
            w_up,
            w_down,
        } => {
            let hb = ws.hb.write();
            matmul(w_gate, None, &mut ws.xb, hb)?;
            matmul(w_up, None, &mut ws.xb, &mut ws.hb2)?;
            match cfg.arch {
                Arch::Gemma3 => geglu_tanh(ws.hb.write(), &ws.hb2),
                _ => swiglu(ws.hb.write(), &ws.hb2),
            }
            matmul(w_down, None, &mut ws.hb, &mut ws.xb2)?;
        }
        Ffn::Moe(m) => moe_ffn(m, &mut ws.xb, &mut ws.xb2, &mut ws.moe)?,
    }
    if let Some(n) = &lw.post_ffn_norm {
        rms_norm_rows_in_place(&mut ws.xb2, n, cfg.rms_eps);
    }
    add_in_place(&mut ws.x, &ws.xb2);
    Ok(())
}

/// Final norm and LM head of `rows` (ascending row indices of `ws.x`) into `ws.logits`
/// (`[rows][n_vocab]`), then the optional soft cap.
pub(crate) fn output(
    cfg: &ModelConfig,
    output_norm: &[f32],
    output: &Matrix<'_>,
    ws: &mut Workspace,
    rows: &[usize],
) -> Result<(), EngineError> {
    let d = cfg.n_embd;
    ws.xb.resize(rows.len(), d);
    let xb = ws.xb.write();
    let contiguous = rows.last().map(|l| l + 1 - rows[0]) == Some(rows.len());
    if contiguous {
        let r0 = rows[0];
        rms_norm_rows(
            &ws.x[r0 * d..(r0 + rows.len()) * d],
            output_norm,
            cfg.rms_eps,
            xb,
        );
    } else {
        for (i, r) in rows.iter().enumerate() {
            let dst = &mut xb[i * d..(i + 1) * d];
            rms_norm_rows(&ws.x[r * d..(r + 1) * d], output_norm, cfg.rms_eps, dst);
        }
    }
    ws.logits.resize(rows.len() * cfg.n_vocab, 0.0);
    matmul(output, None, &mut ws.xb, &mut ws.logits)?;
    if let Some(cap) = cfg.final_logit_softcap {
        ws.logits
            .iter_mut()
            .for_each(|l| *l = (*l / cap).tanh() * cap);
    }
    Ok(())
}
