//! The shared expert of Qwen2-MoE / Qwen3-Next: one SwiGLU FFN that every token uses, scaled
//! per token by a learned sigmoid gate, and added to the routed experts' output.
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_ffn` (`ffn_*_shexp`,
//! `ffn_gate_inp_shexp`); HF transformers `Qwen3NextSparseMoeBlock`.

use crate::error::EngineError;
use crate::ops::activation::swiglu;
use crate::ops::gate::sigmoid;
use crate::ops::linear::{matmul, Activations, Matrix};

/// Weights of one layer's shared expert.
pub struct SharedExpert {
    /// `[n_ff_shexp][n_embd]` (`ffn_gate_shexp`).
    pub gate: Matrix<'static>,
    /// `[n_ff_shexp][n_embd]` (`ffn_up_shexp`).
    pub up: Matrix<'static>,
    /// `[n_embd][n_ff_shexp]` (`ffn_down_shexp`).
    pub down: Matrix<'static>,
    /// `[1][n_embd]` (`ffn_gate_inp_shexp`): one gate logit per token.
    pub gate_inp: Matrix<'static>,
}

/// Buffers of [`shared_expert_add`], grown to the largest batch and reused.
#[derive(Default)]
pub struct SharedScratch {
    /// Gate projection, then the SwiGLU product `[T][n_ff_shexp]`.
    h: Activations,
    /// Up projection `[T][n_ff_shexp]`.
    h2: Vec<f32>,
    /// Expert output `[T][n_embd]`.
    y: Vec<f32>,
    /// Gate logits `[T]`.
    g: Vec<f32>,
}

/// `out[t] += σ(gate_inp · x[t]) · down(silu(gate · x[t]) ⊙ up · x[t])` for the T rows of
/// `x` (`[T][n_embd]`, already normed); `out`: `[T][n_embd]`.
///
/// Errors: unsupported weight types.
pub fn shared_expert_add(
    w: &SharedExpert,
    x: &mut Activations,
    out: &mut [f32],
    s: &mut SharedScratch,
) -> Result<(), EngineError> {
    let d = w.down.rows;
    let t_n = out.len() / d;
    s.h.resize(t_n, w.gate.rows);
    s.h2.resize(t_n * w.up.rows, 0.0);
    s.y.resize(t_n * d, 0.0);
    s.g.resize(t_n, 0.0);
    matmul(&w.gate, None, x, s.h.write())?;
    matmul(&w.up, None, x, &mut s.h2)?;
    swiglu(s.h.write(), &s.h2);
    matmul(&w.down, None, &mut s.h, &mut s.y)?;
    matmul(&w.gate_inp, None, x, &mut s.g)?;
    for ((o, y), g) in out.chunks_exact_mut(d).zip(s.y.chunks_exact(d)).zip(&s.g) {
        let gate = sigmoid(*g);
        for (oi, yi) in o.iter_mut().zip(y) {
            *oi += yi * gate;
        }
    }
    Ok(())
}
