//! The shared expert of Qwen2-MoE / Qwen3-Next: one SwiGLU FFN that every token uses, scaled
//! per token by a learned sigmoid gate, and added to the routed experts' output.
//!
//! Source: llama.cpp `llama_model_qwen3next::graph::build_layer_ffn` (`ffn_*_shexp`,
//! `ffn_gate_inp_shexp`); HF transformers `Qwen3NextSparseMoeBlock`.

use crate::backend::{Backend, Buf, Glu, MatmulTo, Memory};
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::MoeWeights;

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
pub struct SharedScratch<M: Memory> {
    /// Gate projection, then the SwiGLU product `[T][n_ff_shexp]`.
    h: M::Buf,
    /// Up projection `[T][n_ff_shexp]`.
    h2: M::Buf,
    /// Expert output `[T][n_embd]`.
    y: M::Buf,
    /// Gate logits `[T][1]`.
    g: M::Buf,
}

/// `out[t] += σ(gate_inp · x[t]) · down(silu(gate · x[t]) ⊙ up · x[t])` for the T rows of
/// `x` (`[T][n_embd]`, already normed); `out`: `[T][n_embd]`.
///
/// Errors: unsupported weight types.
pub fn shared_expert_add<B: Backend>(
    be: &B,
    w: &SharedExpert,
    x: &mut Buf<B>,
    out: &mut Buf<B>,
    s: &mut SharedScratch<B::Mem>,
) -> Result<(), EngineError> {
    be.matmuls(x, &mut projections(w, s))?;
    shared_expert_finish(be, w, out, s)
}

/// The FFN block of a layer: `out = moe(x) + σ(gate_inp · x)·shared(x)` for the T rows of
/// `x` (`[T][n_embd]`, already normed), with the shared expert's three projections of `x`
/// given to [`Backend::moe_and_matmuls`] (the CPU computes them in the router's pool round).
/// Bit for bit [`Backend::moe`] followed by [`shared_expert_add`]. `out`: `[T][n_embd]`.
///
/// Errors: unsupported weight types; an expert placed on a unit the backend lacks.
pub fn moe_and_shared_expert<B: Backend>(
    be: &B,
    moe: &MoeWeights,
    w: &SharedExpert,
    x: &mut Buf<B>,
    out: &mut Buf<B>,
    moe_scratch: &mut <B::Mem as Memory>::MoeScratch,
    s: &mut SharedScratch<B::Mem>,
) -> Result<(), EngineError> {
    be.moe_and_matmuls(moe, x, out, moe_scratch, &mut projections(w, s))?;
    shared_expert_finish(be, w, out, s)
}

/// Gate, up and the gate logit, all of the normed input.
fn projections<'a, B: Backend>(
    w: &'a SharedExpert,
    s: &'a mut SharedScratch<B::Mem>,
) -> [MatmulTo<'a, 'static, B>; 3] {
    [
        MatmulTo::new(&w.gate, &mut s.h),
        MatmulTo::new(&w.up, &mut s.h2),
        MatmulTo::new(&w.gate_inp, &mut s.g),
    ]
}

/// From the projections in `s`: SwiGLU, down, and the gated add into `out`.
fn shared_expert_finish<B: Backend>(
    be: &B,
    w: &SharedExpert,
    out: &mut Buf<B>,
    s: &mut SharedScratch<B::Mem>,
) -> Result<(), EngineError> {
    be.glu(Glu::SwiGlu, &mut s.h, &s.h2);
    be.matmul(&w.down, None, &mut s.h, &mut s.y)?;
    be.add_gated(out, &s.y, &s.g);
    Ok(())
}
