//! Mixture-of-experts feed-forward: router → softmax → top-k → optional renormalisation →
//! one SwiGLU FFN per chosen expert → weighted sum.
//!
//! Source: llama.cpp `llm_graph_context::build_moe_ffn` (`src/llama-graph.cpp`) with
//! `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX` and `LLM_FFN_SILU`; Qwen3-MoE (`qwen3moe.cpp`).
//! Experts are read in place: an expert is a [`Matrix`] view of its rows of the 3-D
//! `blk.N.ffn_{gate,up,down}_exps.weight` tensors, never dequantized as a whole.

use crate::error::EngineError;
use crate::ops::activation::swiglu;
use crate::ops::axpy;
use crate::ops::linear::{matmul, Activations, Matrix};

/// A 3-D expert tensor `[n_expert][rows][cols]` (ggml `ne = [cols, rows, n_expert]`).
#[derive(Clone, Copy, Debug)]
pub struct ExpertTensor<'a> {
    /// Every expert's `[rows][cols]` matrix, back to back, in one ggml type.
    pub all: Matrix<'a>,
    pub n_expert: usize,
}

impl<'a> ExpertTensor<'a> {
    /// Wraps `n_expert · rows` rows of `cols` as one tensor per expert.
    pub fn new(all: Matrix<'a>, n_expert: usize) -> ExpertTensor<'a> {
        ExpertTensor { all, n_expert }
    }

    /// Rows (outputs) of one expert's matrix.
    pub fn rows(&self) -> usize {
        self.all.rows / self.n_expert
    }

    /// The `[rows][cols]` matrix of expert `e` (a view into the same bytes).
    pub fn expert(&self, e: usize) -> Matrix<'a> {
        let rows = self.rows();
        let rb = self.all.row_bytes();
        Matrix {
            ty: self.all.ty,
            rows,
            cols: self.all.cols,
            data: &self.all.data[e * rows * rb..(e + 1) * rows * rb],
        }
    }
}

/// The routed experts of one layer.
pub struct MoeWeights {
    /// Router `[n_expert][n_embd]` (`ffn_gate_inp`).
    pub router: Matrix<'static>,
    /// `[n_expert][n_ff_exp][n_embd]`.
    pub gate: ExpertTensor<'static>,
    /// `[n_expert][n_ff_exp][n_embd]`.
    pub up: ExpertTensor<'static>,
    /// `[n_expert][n_embd][n_ff_exp]`.
    pub down: ExpertTensor<'static>,
    /// Experts per token (`{arch}.expert_used_count`).
    pub n_used: usize,
    /// Divide the chosen weights by their sum (`norm_topk_prob`; llama.cpp's `norm_w`).
    pub norm_topk: bool,
}

/// Scratch buffers of [`moe_ffn`], grown to the largest batch and reused.
#[derive(Default)]
pub struct MoeScratch {
    /// Router logits, then probabilities `[T][n_expert]`.
    probs: Vec<f32>,
    /// Chosen experts and their weights `[T][n_used]`, best first.
    ids: Vec<usize>,
    weights: Vec<f32>,
    /// Rows routed to the current expert `[n_e][n_embd]`, its gate/up `[n_e][n_ff_exp]`.
    xe: Activations,
    he: Activations,
    he2: Vec<f32>,
    ye: Vec<f32>,
    /// Each (token, slot)'s expert output `[T][n_used][n_embd]`.
    slots: Vec<f32>,
}

/// Softmax of `logits` in place, then the `ids.len()` largest probabilities (descending;
/// ties keep the lower id) into `ids`/`weights`, divided by their sum when `norm`.
///
/// The sum is clamped below at 6.103515625e-5 (the smallest normal f16), as llama.cpp does.
pub fn route(logits: &mut [f32], norm: bool, ids: &mut [usize], weights: &mut [f32]) {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for l in logits.iter_mut() {
        *l = (*l - max).exp();
        sum += *l as f64;
    }
    let inv = (1.0 / sum) as f32;
    logits.iter_mut().for_each(|l| *l *= inv);
    let mut taken = 0;
    for slot in 0..ids.len() {
        let mut best = usize::MAX;
        for (e, p) in logits.iter().enumerate() {
            let used = ids[..slot].contains(&e);
            if !used && (best == usize::MAX || *p > logits[best]) {
                best = e;
            }
        }
        ids[slot] = best;
        weights[slot] = logits[best];
        taken += 1;
    }
    if norm && taken > 0 {
        let s = weights.iter().sum::<f32>().max(6.103_515_6e-5);
        weights.iter_mut().for_each(|w| *w /= s);
    }
}

/// `out[t] = Σ_slot weight[t][slot] · down_e(silu(gate_e(x[t])) ⊙ up_e(x[t]))` over the
/// experts the router picks for each of the T rows of `x` (`[T][n_embd]`, already normed).
///
/// Tokens are grouped by expert so each expert's weights are read once per batch (ggml's
/// `mul_mat_id`); slots are summed in rank order, as llama.cpp adds its expert views.
/// `out`: `[T][n_embd]`, overwritten. Errors: unsupported weight types.
pub fn moe_ffn(
    w: &MoeWeights,
    x: &mut Activations,
    out: &mut [f32],
    s: &mut MoeScratch,
) -> Result<(), EngineError> {
    let (n_expert, k) = (w.gate.n_expert, w.n_used);
    let d = w.router.cols;
    let t_n = out.len() / d;
    s.probs.resize(t_n * n_expert, 0.0);
    matmul(&w.router, None, x, &mut s.probs)?;
    s.ids.resize(t_n * k, 0);
    s.weights.resize(t_n * k, 0.0);
    for t in 0..t_n {
        route(
            &mut s.probs[t * n_expert..(t + 1) * n_expert],
            w.norm_topk,
            &mut s.ids[t * k..(t + 1) * k],
            &mut s.weights[t * k..(t + 1) * k],
        );
    }
    s.slots.resize(t_n * k * d, 0.0);
    let n_ff = w.gate.rows();
    let mut routed: Vec<usize> = Vec::with_capacity(t_n * k);
    for e in 0..n_expert {
        routed.clear();
        routed.extend((0..t_n * k).filter(|i| s.ids[*i] == e));
        if routed.is_empty() {
            continue;
        }
        let n_e = routed.len();
        s.xe.resize(n_e, d);
        let xe = s.xe.write();
        for (r, slot) in routed.iter().enumerate() {
            let t = slot / k;
            xe[r * d..(r + 1) * d].copy_from_slice(&x.read()[t * d..(t + 1) * d]);
        }
        s.he.resize(n_e, n_ff);
        s.he2.resize(n_e * n_ff, 0.0);
        matmul(&w.gate.expert(e), None, &mut s.xe, s.he.write())?;
        matmul(&w.up.expert(e), None, &mut s.xe, &mut s.he2)?;
        swiglu(s.he.write(), &s.he2);
        s.ye.resize(n_e * d, 0.0);
        matmul(&w.down.expert(e), None, &mut s.he, &mut s.ye)?;
        for (r, slot) in routed.iter().enumerate() {
            s.slots[slot * d..(slot + 1) * d].copy_from_slice(&s.ye[r * d..(r + 1) * d]);
        }
    }
    for t in 0..t_n {
        let o = &mut out[t * d..(t + 1) * d];
        o.fill(0.0);
        for slot in t * k..(t + 1) * k {
            axpy(s.weights[slot], &s.slots[slot * d..(slot + 1) * d], o);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_picks_the_largest_probabilities_and_renormalises() {
        let mut logits = [0.0f32, 2.0, 1.0, -1.0];
        let (mut ids, mut w) = ([0usize; 2], [0.0f32; 2]);
        route(&mut logits, false, &mut ids, &mut w);
        assert_eq!(ids, [1, 2]);
        let z: f32 = [0.0f32, 2.0, 1.0, -1.0].iter().map(|l| l.exp()).sum();
        assert!((w[0] - 2.0f32.exp() / z).abs() < 1e-6);
        let mut logits = [0.0f32, 2.0, 1.0, -1.0];
        route(&mut logits, true, &mut ids, &mut w);
        assert!((w[0] + w[1] - 1.0).abs() < 1e-6);
        assert!((w[0] / w[1] - 1.0f32.exp()).abs() < 1e-5);
    }

    #[test]
    fn expert_views_address_consecutive_row_blocks() {
        let data: Vec<u8> = (0..3 * 2 * 4 * 4).map(|i| i as u8).collect();
        let all = Matrix {
            ty: strata_gguf::GgmlType::F32,
            rows: 6,
            cols: 4,
            data: &data,
        };
        let t = ExpertTensor::new(all, 3);
        assert_eq!(t.rows(), 2);
        assert_eq!(t.expert(1).data, &data[32..64]);
        assert_eq!(t.expert(2).row(1), &data[80..96]);
    }
}
