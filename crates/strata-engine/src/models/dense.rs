//! The decoder recipe: llama, qwen2, qwen3, gemma3 and qwen3moe share one layer whose optional
//! parts (q/k/v biases, q/k norms, sandwich norms, windowed layers, GeGLU, routed experts)
//! are present exactly when the architecture has them.
//!
//! Sources: llama.cpp `src/models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `gemma3.cpp`, `qwen3moe.cpp`;
//! Touvron et al. 2023 (Llama), Gemma Team 2025 (Gemma 3).

use crate::config::{Arch, ModelConfig};
use crate::error::EngineError;
use crate::kv_cache::LayerKv;
use crate::ops::activation::{geglu_tanh, swiglu};
use crate::ops::attention::{attention, AttnShape};
use crate::ops::linear::{matmul, Matrix};
use crate::ops::moe::moe_ffn;
use crate::ops::norm::{rms_norm_rows, rms_norm_rows_in_place};
use crate::ops::{add_in_place, par_chunks};
use crate::session::Workspace;
use crate::weights::{Ffn, LayerWeights, Weights};

/// Runs `tokens` (one batch, positions `pos0..pos0+T`) through every layer and writes
/// logits for all T positions (`all_logits`) or only the last into `ws.logits`.
pub fn forward_batch(
    cfg: &ModelConfig,
    w: &Weights,
    kv: &mut [LayerKv],
    ws: &mut Workspace,
    tokens: &[u32],
    pos0: usize,
    all_logits: bool,
) -> Result<(), EngineError> {
    let t_n = tokens.len();
    ws.prepare(cfg, t_n);
    embed(cfg, &w.token_embd, tokens, &mut ws.x)?;
    let n_rot = cfg.rope.n_rot;
    for (rope, cs) in [
        (&cfg.rope, &mut ws.rope_cs),
        (&cfg.rope_swa, &mut ws.rope_cs_swa),
    ] {
        par_chunks(&mut cs[..t_n * n_rot], n_rot, |r, cs| {
            for (t, cs) in cs.chunks_exact_mut(n_rot).enumerate() {
                rope.angles(pos0 + r.start / n_rot + t, cs);
            }
        });
    }
    for (il, (lw, lkv)) in w.layers.iter().zip(kv.iter_mut()).enumerate() {
        attention_block(cfg, il, lw, lkv, ws, pos0)?;
        ffn_block(cfg, lw, ws)?;
    }
    output(cfg, &w.output_norm, &w.output, ws, t_n, all_logits)
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
    kv: &mut LayerKv,
    ws: &mut Workspace,
    pos0: usize,
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
    for t in 0..ws.q.len() / q_dim {
        kv.write(
            pos0 + t,
            &ws.k[t * kv_dim..(t + 1) * kv_dim],
            &ws.v[t * kv_dim..(t + 1) * kv_dim],
        );
    }
    let shape = AttnShape {
        n_head: cfg.n_head,
        n_kv_head: cfg.n_head_kv,
        head_dim: hd,
        scale: cfg.attn_scale,
        window: if swa { cfg.sliding_window } else { None },
    };
    attention(&ws.q, kv, pos0, &shape, ws.att.write());
    matmul(&lw.wo, None, &mut ws.att, &mut ws.xb2)?;
    if let Some(n) = &lw.post_attn_norm {
        rms_norm_rows_in_place(&mut ws.xb2, n, cfg.rms_eps);
    }
    add_in_place(&mut ws.x, &ws.xb2);
    Ok(())
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

/// Final norm and LM head for the last row (or all rows), then the optional soft cap.
pub(crate) fn output(
    cfg: &ModelConfig,
    output_norm: &[f32],
    output: &Matrix<'_>,
    ws: &mut Workspace,
    t_n: usize,
    all: bool,
) -> Result<(), EngineError> {
    let d = cfg.n_embd;
    let first = if all { 0 } else { t_n - 1 };
    let rows = t_n - first;
    ws.xb.resize(rows, d);
    rms_norm_rows(
        &ws.x[first * d..t_n * d],
        output_norm,
        cfg.rms_eps,
        ws.xb.write(),
    );
    ws.logits.resize(rows * cfg.n_vocab, 0.0);
    matmul(output, None, &mut ws.xb, &mut ws.logits)?;
    if let Some(cap) = cfg.final_logit_softcap {
        ws.logits
            .iter_mut()
            .for_each(|l| *l = (*l / cap).tanh() * cap);
    }
    Ok(())
}
