//! Mixture-of-experts feed-forward: router → softmax → top-k → optional renormalisation →
//! one SwiGLU FFN per chosen expert → weighted sum.
//!
//! Source: llama.cpp `llm_graph_context::build_moe_ffn` (`src/llama-graph.cpp`) with
//! `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX` and `LLM_FFN_SILU`; Qwen3-MoE (`qwen3moe.cpp`).
//! Experts are read in place: an expert is a [`Matrix`] view of its rows of the 3-D
//! `blk.N.ffn_{gate,up,down}_exps.weight` tensors, never dequantized as a whole.

mod grouped;

use std::ops::Range;

use crate::error::EngineError;
use crate::ops::activation::swiglu;
use crate::ops::axpy;
use crate::ops::linear::{matmul, ActRows, Activations, Matrix};
use grouped::{grouped_matmul, GroupedScratch};

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
    /// The (token, slot) pairs grouped by expert.
    groups: Groups,
    /// Inputs in group order `[R][·]`, as the gate and the up weights read them.
    x_gate: Gathered,
    x_up: Gathered,
    /// Gate, then SwiGLU, `[R][n_ff_exp]` in group order; up `[R][n_ff_exp]`.
    h: Activations,
    h_up: Vec<f32>,
    /// Expert outputs `[R][n_embd]` in group order.
    y: Vec<f32>,
    grouped: GroupedScratch,
}

/// The `R = T·n_used` (token, slot) pairs of a batch ordered by expert, then slot: the rows
/// of one expert are consecutive (`ggml`'s `mul_mat_id` grouping).
#[derive(Default)]
struct Groups {
    /// `order[pos]`: the slot `t·n_used + j` at group-order position `pos`.
    order: Vec<usize>,
    /// `pos_of[slot]`: inverse of `order`.
    pos_of: Vec<usize>,
    /// (expert, positions) of every expert that got a row, experts ascending.
    spans: Vec<(usize, Range<usize>)>,
    /// Counting-sort scratch `[n_expert + 1]`.
    count: Vec<usize>,
}

impl Groups {
    fn build(&mut self, ids: &[usize], n_expert: usize) {
        self.order.clear();
        self.spans.clear();
        // Counting sort by expert; slots stay ascending within an expert.
        let count = &mut self.count;
        count.clear();
        count.resize(n_expert + 1, 0);
        ids.iter().for_each(|e| count[e + 1] += 1);
        for e in 0..n_expert {
            count[e + 1] += count[e];
            if count[e + 1] > count[e] {
                self.spans.push((e, count[e]..count[e + 1]));
            }
        }
        self.order.resize(ids.len(), 0);
        self.pos_of.resize(ids.len(), 0);
        for (slot, e) in ids.iter().enumerate() {
            self.order[count[*e]] = slot;
            self.pos_of[slot] = count[*e];
            count[*e] += 1;
        }
    }
}

/// A batch's rows copied into group order, quantized or float as one weight type reads them.
#[derive(Default)]
struct Gathered {
    bytes: Vec<u8>,
    floats: Vec<f32>,
}

impl Gathered {
    /// Row `order[pos] / k` of `src` (`[T][·]`) at row `pos`, for every `pos`.
    fn gather(&mut self, src: ActRows<'_>, t_n: usize, order: &[usize], k: usize) -> ActRows<'_> {
        fn copy<T: Copy + Default>(
            dst: &mut Vec<T>,
            src: &[T],
            t_n: usize,
            order: &[usize],
            k: usize,
        ) {
            let w = src.len() / t_n;
            dst.resize(order.len() * w, T::default());
            for (row, slot) in dst.chunks_exact_mut(w).zip(order) {
                row.copy_from_slice(&src[slot / k * w..][..w]);
            }
        }
        match src {
            ActRows::Quantized(b) => {
                copy(&mut self.bytes, b, t_n, order, k);
                ActRows::Quantized(&self.bytes)
            }
            ActRows::Float(f) => {
                copy(&mut self.floats, f, t_n, order, k);
                ActRows::Float(&self.floats)
            }
        }
    }
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
/// `mul_mat_id`). Gate and up of all chosen experts are one pool run, down another (see
/// [`grouped`]); the activations are quantized once. Slots are summed in rank order, as
/// llama.cpp adds its expert views. Bit-identical to one [`matmul`] per expert and matrix.
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
    if t_n == 0 {
        return Ok(());
    }
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
    s.groups.build(&s.ids, n_expert);
    let (order, spans) = (&s.groups.order, &s.groups.spans);
    let (n_pos, n_ff) = (order.len(), w.gate.rows());

    let x_gate = s.x_gate.gather(x.rows_for(w.gate.all.ty)?, t_n, order, k);
    let x_up = if w.up.all.ty == w.gate.all.ty {
        x_gate
    } else {
        s.x_up.gather(x.rows_for(w.up.all.ty)?, t_n, order, k)
    };
    s.h.resize(n_pos, n_ff);
    s.h_up.resize(n_pos * n_ff, 0.0);
    grouped_matmul(
        &[(w.gate, x_gate), (w.up, x_up)],
        spans,
        &mut [s.h.write(), &mut s.h_up],
        &mut s.grouped,
    )?;
    swiglu(s.h.write(), &s.h_up);

    s.y.resize(n_pos * d, 0.0);
    let h = s.h.rows_for(w.down.all.ty)?;
    grouped_matmul(&[(w.down, h)], spans, &mut [&mut s.y], &mut s.grouped)?;

    for t in 0..t_n {
        let o = &mut out[t * d..(t + 1) * d];
        o.fill(0.0);
        for slot in t * k..(t + 1) * k {
            let pos = s.groups.pos_of[slot];
            axpy(s.weights[slot], &s.y[pos * d..(pos + 1) * d], o);
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

    /// The pre-grouping algorithm: one `matmul` per expert and matrix, as the oracle.
    fn per_expert_matmuls(w: &MoeWeights, x: &[f32], t_n: usize) -> Vec<f32> {
        let (n_expert, k, d, n_ff) = (w.gate.n_expert, w.n_used, w.router.cols, w.gate.rows());
        let mut xa = Activations::default();
        xa.resize(t_n, d);
        xa.write().copy_from_slice(x);
        let mut probs = vec![0.0; t_n * n_expert];
        matmul(&w.router, None, &mut xa, &mut probs).unwrap();
        let (mut ids, mut wts) = (vec![0; t_n * k], vec![0.0; t_n * k]);
        for t in 0..t_n {
            let r = t * k..(t + 1) * k;
            let p = &mut probs[t * n_expert..(t + 1) * n_expert];
            route(p, w.norm_topk, &mut ids[r.clone()], &mut wts[r]);
        }
        let mut slots = vec![0.0; t_n * k * d];
        for e in 0..n_expert {
            let routed: Vec<usize> = (0..t_n * k).filter(|i| ids[*i] == e).collect();
            let (mut xe, mut he) = (Activations::default(), Activations::default());
            xe.resize(routed.len(), d);
            for (r, slot) in routed.iter().enumerate() {
                xe.write()[r * d..(r + 1) * d].copy_from_slice(&x[slot / k * d..][..d]);
            }
            he.resize(routed.len(), n_ff);
            let mut up = vec![0.0; routed.len() * n_ff];
            let mut ye = vec![0.0; routed.len() * d];
            matmul(&w.gate.expert(e), None, &mut xe, he.write()).unwrap();
            matmul(&w.up.expert(e), None, &mut xe, &mut up).unwrap();
            swiglu(he.write(), &up);
            matmul(&w.down.expert(e), None, &mut he, &mut ye).unwrap();
            for (r, slot) in routed.iter().enumerate() {
                slots[slot * d..(slot + 1) * d].copy_from_slice(&ye[r * d..(r + 1) * d]);
            }
        }
        let mut out = vec![0.0; t_n * d];
        for t in 0..t_n {
            for slot in t * k..(t + 1) * k {
                axpy(
                    wts[slot],
                    &slots[slot * d..(slot + 1) * d],
                    &mut out[t * d..][..d],
                );
            }
        }
        out
    }

    fn leak_quantized(
        ty: strata_gguf::GgmlType,
        rows: usize,
        cols: usize,
        seed: usize,
    ) -> Matrix<'static> {
        let rb = ty.row_bytes(cols as u64).unwrap() as usize;
        let mut bytes = vec![0u8; rows * rb];
        for (r, b) in bytes.chunks_exact_mut(rb).enumerate() {
            let row: Vec<f32> = (0..cols)
                .map(|c| (((r * cols + c) * 7919 + seed) % 211) as f32 / 100.0 - 1.05)
                .collect();
            strata_quant::quantize(ty, &row, b).unwrap();
        }
        Matrix {
            ty,
            rows,
            cols,
            data: Box::leak(bytes.into_boxed_slice()),
        }
    }

    #[test]
    fn grouped_experts_equal_one_matmul_per_expert_bit_for_bit_on_any_pool() {
        use strata_gguf::GgmlType::{F16, F32, Q4_K, Q8_0};
        let (n_expert, k, d, n_ff) = (6, 3, 256, 512);
        for (ty, down_ty) in [(Q4_K, Q8_0), (F16, F32)] {
            let w = MoeWeights {
                router: leak_quantized(F32, n_expert, d, 1),
                gate: ExpertTensor::new(leak_quantized(ty, n_expert * n_ff, d, 2), n_expert),
                up: ExpertTensor::new(leak_quantized(ty, n_expert * n_ff, d, 3), n_expert),
                down: ExpertTensor::new(leak_quantized(down_ty, n_expert * d, n_ff, 4), n_expert),
                n_used: k,
                norm_topk: true,
            };
            for t_n in [1, 5, 130] {
                let x: Vec<f32> = (0..t_n * d).map(|i| (i as f32 * 0.37).sin()).collect();
                let want = per_expert_matmuls(&w, &x, t_n);
                for workers in [1, 3] {
                    let pool = crate::pool::Pool::new(crate::pool::PoolOptions {
                        workers,
                        ..Default::default()
                    });
                    let mut xa = Activations::default();
                    xa.resize(t_n, d);
                    xa.write().copy_from_slice(&x);
                    let mut out = vec![0.0; t_n * d];
                    let mut s = MoeScratch::default();
                    pool.install(|| moe_ffn(&w, &mut xa, &mut out, &mut s))
                        .unwrap();
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{ty} T={t_n} workers={workers}");
                }
            }
        }
    }
}
