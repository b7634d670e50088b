//! Mixture-of-experts feed-forward as four steps:
//!
//! 1. **route** ([`route`]): router logits → softmax → top-k → optional renormalisation gives
//!    (expert, weight) for each of a token's `n_used` slots;
//! 2. **place** ([`placement`]): each chosen (layer, expert) goes to the unit that computes it
//!    (today every expert runs on the CPU);
//! 3. **compute**: each unit runs one SwiGLU FFN per chosen expert over the tokens routed to
//!    it, grouped by expert so each expert's weights are read once per run ([`grouped`]). The
//!    CPU's share is one pool job per matrix step; when another unit holds some of the spans,
//!    that job is what goes to [`crate::pool::Pool::scope`]'s `submit`, returning a ticket at
//!    once so the calling thread drives the device meanwhile (the hybrid tier). With every
//!    expert on the CPU the caller takes part in the job instead (and nothing is allocated);
//! 4. **combine**: every token's expert outputs summed in slot (rank) order with their weights.
//!
//! Source: llama.cpp `llm_graph_context::build_moe_ffn` (`src/llama-graph.cpp`) with
//! `LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX` and `LLM_FFN_SILU`; Qwen3-MoE (`qwen3moe.cpp`).
//! Experts are read in place: an expert is a [`Matrix`] view of its rows of the 3-D
//! `blk.N.ffn_{gate,up,down}_exps.weight` tensors, never dequantized as a whole.

mod grouped;
pub mod placement;
pub mod route;

use std::ops::Range;

use crate::error::EngineError;
use crate::ops::activation::swiglu;
use crate::ops::linear::{matmul_many, ActRows, Activations, MatmulOut, Matrix, FUSED};
use crate::ops::{axpy, par_chunks};
use crate::pool::Pool;
use grouped::{grouped_matmul, GroupedScratch};
pub use placement::{Placement, Unit};
pub use route::{route, Groups, Routing};
use smallvec::SmallVec;

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

    /// Expert `e`'s rows of the whole tensor.
    pub fn rows_of(&self, e: usize) -> Range<usize> {
        e * self.rows()..(e + 1) * self.rows()
    }

    /// The `[rows][cols]` matrix of expert `e` (a view into the same bytes).
    pub fn expert(&self, e: usize) -> Matrix<'a> {
        let r = self.rows_of(e);
        let rb = self.all.row_bytes();
        Matrix {
            ty: self.all.ty,
            rows: r.len(),
            cols: self.all.cols,
            data: &self.all.data[r.start * rb..r.end * rb],
        }
    }
}

/// The routed experts of one layer.
pub struct MoeWeights {
    /// The model layer (`blk.N`) these experts belong to: [`Placement`] addresses them by it.
    pub layer: usize,
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

/// One expert's three matrices: what a unit must hold to compute it.
#[derive(Clone, Copy, Debug)]
pub struct ExpertRows {
    pub gate: Matrix<'static>,
    pub up: Matrix<'static>,
    pub down: Matrix<'static>,
}

impl MoeWeights {
    /// Expert `e`'s gate, up and down matrices (views of its rows in the mapped tensors).
    pub fn expert_rows(&self, e: usize) -> ExpertRows {
        ExpertRows {
            gate: self.gate.expert(e),
            up: self.up.expert(e),
            down: self.down.expert(e),
        }
    }
}

/// Scratch buffers of [`moe_ffn`], grown to the largest batch and reused.
#[derive(Default)]
pub struct MoeScratch {
    /// Router logits, then probabilities `[T][n_expert]`.
    probs: Vec<f32>,
    routing: Routing,
    groups: Groups,
    /// The spans of `groups` that the CPU computes.
    cpu_spans: Vec<(usize, Range<usize>)>,
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

/// `out[t] = Σ_slot weight[t][slot] · down_e(silu(gate_e(x[t])) ⊙ up_e(x[t]))` over the
/// experts the router picks for each of the T rows of `x` (`[T][n_embd]`, already normed),
/// in the four steps of the module docs, with experts placed by `place`.
///
/// Gate and up of all chosen experts are one pool run, down another; the activations are
/// quantized once. Bit-identical to one [`crate::ops::linear::matmul`] per expert and
/// matrix, for any pool. `out`: `[T][n_embd]`, overwritten.
///
/// Errors: unsupported weight types; [`EngineError::NoExpertUnit`] when `place` puts a chosen
/// expert on a device (this function computes the CPU's share only).
pub fn moe_ffn(
    pool: &Pool,
    place: &Placement,
    w: &MoeWeights,
    x: &mut Activations,
    out: &mut [f32],
    s: &mut MoeScratch,
) -> Result<(), EngineError> {
    moe_ffn_with(pool, place, w, x, out, s, &mut [])
}

/// [`moe_ffn`], and the products `also` of the same input `x` (a shared expert's gate, up and
/// gate logit) computed in the router's pool round: one fork-join instead of two, and the
/// router's 4 MiB of F32 rows share the round's tiles with them. Each output keeps the bits
/// of its own [`crate::ops::linear::matmul`] ([`matmul_many`]); `also[i].y`: `[T][w.rows]`.
///
/// Errors: as [`moe_ffn`].
pub fn moe_ffn_with(
    pool: &Pool,
    place: &Placement,
    w: &MoeWeights,
    x: &mut Activations,
    out: &mut [f32],
    s: &mut MoeScratch,
    also: &mut [MatmulOut<'_, '_>],
) -> Result<(), EngineError> {
    let (n_expert, k) = (w.gate.n_expert, w.n_used);
    let d = w.router.cols;
    let t_n = out.len() / d;
    // 1. Route (the router's logits with the other products of `x`).
    s.probs.resize(t_n * n_expert, 0.0);
    {
        // On the stack: decode allocates nothing (tests/decode_allocations.rs).
        let mut parts: SmallVec<[MatmulOut<'_, '_>; FUSED]> = SmallVec::new();
        parts.push(MatmulOut {
            w: &w.router,
            bias: None,
            y: &mut s.probs,
        });
        parts.extend(also.iter_mut().map(|o| MatmulOut {
            w: o.w,
            bias: o.bias,
            y: &mut *o.y,
        }));
        matmul_many(pool, x, &mut parts)?;
    }
    if t_n == 0 {
        return Ok(());
    }
    s.routing.fill(&mut s.probs, n_expert, k, w.norm_topk);
    s.groups.build(&s.routing.ids, n_expert);

    // 2. Place.
    s.cpu_spans.clear();
    let mut elsewhere = 0;
    for (e, span) in &s.groups.spans {
        match place.unit(w.layer, *e) {
            Unit::Cpu => s.cpu_spans.push((*e, span.clone())),
            Unit::Device(_) => elsewhere += 1,
        }
    }
    if elsewhere > 0 {
        return Err(EngineError::NoExpertUnit {
            layer: w.layer,
            experts: elsewhere,
        });
    }

    // 3. Compute (the CPU's spans).
    let (order, spans) = (&s.groups.order, &s.cpu_spans);
    let (n_pos, n_ff) = (order.len(), w.gate.rows());
    let x_gate = s
        .x_gate
        .gather(x.rows_for(pool, w.gate.all.ty)?, t_n, order, k);
    let x_up = if w.up.all.ty == w.gate.all.ty {
        x_gate
    } else {
        s.x_up.gather(x.rows_for(pool, w.up.all.ty)?, t_n, order, k)
    };
    s.h.resize(n_pos, n_ff);
    s.h_up.resize(n_pos * n_ff, 0.0);
    grouped_matmul(
        pool,
        &[(w.gate, x_gate), (w.up, x_up)],
        spans,
        &mut [s.h.write(), &mut s.h_up],
        &mut s.grouped,
    )?;
    swiglu(pool, s.h.write(), &s.h_up);
    s.y.resize(n_pos * d, 0.0);
    let h = s.h.rows_for(pool, w.down.all.ty)?;
    grouped_matmul(pool, &[(w.down, h)], spans, &mut [&mut s.y], &mut s.grouped)?;

    // 4. Combine, slots in rank order (as llama.cpp adds its expert views); tokens in
    // parallel, each token's sum in the same order on any thread.
    let (r, pos_of, y) = (&s.routing, &s.groups.pos_of, &s.y);
    par_chunks(pool, out, d, |elems, out| {
        let t0 = elems.start / d;
        for (t, o) in (t0..).zip(out.chunks_exact_mut(d)) {
            o.fill(0.0);
            let slots = t * k..(t + 1) * k;
            for (&pos, &weight) in pos_of[slots.clone()].iter().zip(&r.weights[slots]) {
                axpy(weight, &y[pos * d..(pos + 1) * d], o);
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests;
