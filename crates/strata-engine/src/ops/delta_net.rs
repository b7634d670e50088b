//! The gated delta rule of Gated DeltaNet (Yang, Kautz & Hatamizadeh, "Gated Delta Networks:
//! Improving Mamba2 with Delta Rule", 2024), per value head h with key head h / (H_v / H_k)
//! (or h mod H_k, [`KeyHeads`]):
//!
//! ```text
//! S ← g·S                       g = exp(log_decay), the gate
//! δ = β·(v − Sᵀk)               β ∈ (0, 1), the write strength
//! S ← S + k·δᵀ
//! o = Sᵀq / √d_k
//! ```
//!
//! S is `d_k × d_v`, stored row-major (`[d_k][d_v]`; ggml stores it transposed: Strata's state
//! never leaves the process, and this way the value dimensions are the vector lanes).
//! [`delta_rule_recurrent`] runs it one token at a time for decode and prefill alike, so a position's output never
//! depends on how many tokens came in its call (batch invariance). Semantics as llama.cpp's
//! `ggml_gated_delta_net` (`ggml-cpu/ops.cpp`) and `llm_build_delta_net_base`. (A chunkwise
//! form (Yang et al., "Parallelizing Linear Transformers with the Delta Rule over Sequence
//! Length", 2024) computes the same in matrix products but rounds differently; it can return
//! only as chunks aligned to absolute positions whose partial chunks round as full ones.)
//!
//! Value heads are independent (they share only read-only key heads), so both forms run
//! groups of heads as tasks on the given pool. A head's
//! arithmetic is the same in any task on any worker, so results are bit-identical for any
//! worker count.

use std::cell::RefCell;

use super::par_chunks;
use crate::pool::{Blocks, Pool};

use super::exp::{vectorized, VectorBody};

/// Fewest state elements × tokens worth a pool task: heads are grouped until a task updates
/// at least this much state. One 64 × 64 head of one decode token is a task of its own; a
/// smaller head shares its task.
const MIN_TASK_WORK: usize = 64 * 64;

thread_local! {
    /// Outputs `[n_v_heads][T][d_v]` of a multi-token call, head-major so that each head's
    /// share is one slice (calling thread).
    static BY_HEAD: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Which query/key head a value head reads, when there are fewer key heads than value heads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyHeads {
    /// Value head h reads key head `h / (n_v_heads / n_k_heads)` (Qwen3-Next's GGUF order).
    #[default]
    Grouped,
    /// Value head h reads key head `h % n_k_heads` (qwen4exp: the converter reorders the
    /// value heads, `_LinearAttentionVReorderBase`).
    Tiled,
}

/// Head counts and widths of one delta-rule call.
#[derive(Clone, Copy, Debug)]
pub struct DeltaShape {
    /// Value heads (each has its own state); a multiple of `n_k_heads`.
    pub n_v_heads: usize,
    /// Query/key heads; which one a value head reads: `key_heads`.
    pub n_k_heads: usize,
    pub d_k: usize,
    pub d_v: usize,
    pub key_heads: KeyHeads,
}

/// The inputs of T tokens. `q`, `k`: `[T][n_k_heads][d_k]` (L2-normalised);
/// `v`: `[T][n_v_heads][d_v]`; `log_decay` (≤ 0) and `beta`: `[T][n_v_heads]`.
#[derive(Clone, Copy)]
pub struct DeltaInputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub log_decay: &'a [f32],
    pub beta: &'a [f32],
}

impl DeltaShape {
    fn kv_head(&self, h: usize) -> usize {
        match self.key_heads {
            KeyHeads::Grouped => h / (self.n_v_heads / self.n_k_heads),
            KeyHeads::Tiled => h % self.n_k_heads,
        }
    }
}

/// Borrowed rows of token `t`, head `h`.
struct Rows<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    g: f32,
    b: f32,
}

impl<'a> DeltaInputs<'a> {
    fn rows(&self, s: &DeltaShape, t: usize, h: usize) -> Rows<'a> {
        let kh = s.kv_head(h);
        let qk = (t * s.n_k_heads + kh) * s.d_k;
        let vi = (t * s.n_v_heads + h) * s.d_v;
        let i = t * s.n_v_heads + h;
        Rows {
            q: &self.q[qk..qk + s.d_k],
            k: &self.k[qk..qk + s.d_k],
            v: &self.v[vi..vi + s.d_v],
            g: self.log_decay[i],
            b: self.beta[i],
        }
    }
}

/// Value dimensions per block of [`Head::run`]: a block of a 128-wide key head is 32 KiB of
/// state.
const COLUMNS: usize = 64;

/// Runs the recurrence token by token. `state`: `[n_v_heads][d_k][d_v]`, updated;
/// `out`: `[T][n_v_heads][d_v]`. Heads run in parallel on `pool`.
pub fn delta_rule_recurrent(
    pool: &Pool,
    s: &DeltaShape,
    x: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
) {
    let scale = 1.0 / (s.d_k as f32).sqrt();
    for_each_head(pool, s, x, state, out, |h, st, o| {
        recurrent_head(s, x, h, st, o, scale)
    });
}

/// [`delta_rule_recurrent`] of head `h`: `st` is its `[d_k][d_v]` state, `o` its `[T][d_v]`
/// outputs.
///
/// Run through [`vectorized`]: compiled for the widest vector unit [`strata_quant::Isa::best`]
/// allows, with FMA. Every path does the same arithmetic in the same order (lanes are value
/// dimensions; each update and sum is one fused multiply-add, `f32::mul_add`, which is
/// correctly rounded wherever it runs: an FMA instruction on the vector paths, libm's `fmaf`
/// on the portable one), so the bits do not depend on the path, only the speed does. (Fused,
/// the per-element work is four operations instead of seven: +2 % Qwen3-Next pp512 on 2
/// cores.)
fn recurrent_head(
    s: &DeltaShape,
    x: DeltaInputs<'_>,
    h: usize,
    st: &mut [f32],
    o: &mut [f32],
    scale: f32,
) {
    let head = Head {
        s,
        x,
        h,
        st,
        o,
        scale,
    };
    vectorized(head);
}

/// The arguments of [`recurrent_head`].
struct Head<'a, 'b> {
    s: &'b DeltaShape,
    x: DeltaInputs<'a>,
    h: usize,
    st: &'b mut [f32],
    o: &'b mut [f32],
    scale: f32,
}

impl VectorBody for Head<'_, '_> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        self.recur()
    }
}

impl Head<'_, '_> {
    /// The recurrence of one head, token by token, in blocks of value dimensions (columns of
    /// S): [`COLUMNS`] at a time, then 16, then one.
    ///
    /// Column `j` of S (value dimension `j`) evolves on its own: `δ_j` reads only column `j`,
    /// and the update adds `k·δ_j` to it. So each block of columns runs every token before the
    /// next block starts, its `d_k × COLUMNS` floats staying in L1 (32 KiB for 128-wide keys), and every loop runs along
    /// the columns (the vector lanes) with each sum over `i` (the key dimension) taken in
    /// order: the same bits at any vector width and in any block.
    #[inline(always)]
    fn recur(mut self) {
        let dv = self.s.d_v;
        let mut j0 = 0;
        while j0 + COLUMNS <= dv {
            self.columns::<COLUMNS>(j0);
            j0 += COLUMNS;
        }
        while j0 + 16 <= dv {
            self.columns::<16>(j0);
            j0 += 16;
        }
        while j0 < dv {
            self.columns::<1>(j0);
            j0 += 1;
        }
    }

    /// Columns `j0..j0 + N` for every token (`N` a constant, so the sums stay in registers).
    /// One pass over the block per token: token t's correction and read-out share it with
    /// token t + 1's decay and `Sᵀk` (each element's operations in the recurrence's order).
    #[inline(always)]
    fn columns<const N: usize>(&mut self, j0: usize) {
        let (s, x, dv) = (self.s, self.x, self.s.d_v);
        let t_n = self.o.len() / dv;
        // Decays S and returns Sᵀk for token `t` (the first token's pass of its own).
        let mut sk = [0.0f32; N];
        let r0 = x.rows(s, 0, self.h);
        let decay = r0.g.exp();
        for (i, &ki) in r0.k.iter().enumerate() {
            let row: &mut [f32; N] = (&mut self.st[i * dv + j0..][..N]).try_into().unwrap();
            for (a, v) in sk.iter_mut().zip(row.iter_mut()) {
                *v *= decay;
                *a = v.mul_add(ki, *a);
            }
        }
        for t in 0..t_n {
            let r = x.rows(s, t, self.h);
            // δ = β·(v − Sᵀk).
            let v: &[f32; N] = r.v[j0..j0 + N].try_into().unwrap();
            let delta: [f32; N] = std::array::from_fn(|j| (v[j] - sk[j]) * r.b);
            // S += k·δᵀ and Sᵀq; then the next token's decay and Sᵀk.
            let mut sq = [0.0f32; N];
            sk = [0.0f32; N];
            if t + 1 < t_n {
                let next = x.rows(s, t + 1, self.h);
                let decay = next.g.exp();
                let ks = r.k.iter().zip(r.q).zip(next.k);
                for (i, ((&ki, &qi), &kn)) in ks.enumerate() {
                    let row: &mut [f32; N] = (&mut self.st[i * dv + j0..][..N]).try_into().unwrap();
                    for j in 0..N {
                        let mut v = ki.mul_add(delta[j], row[j]);
                        sq[j] = v.mul_add(qi, sq[j]);
                        v *= decay;
                        sk[j] = v.mul_add(kn, sk[j]);
                        row[j] = v;
                    }
                }
            } else {
                for (i, (&ki, &qi)) in r.k.iter().zip(r.q).enumerate() {
                    let row: &mut [f32; N] = (&mut self.st[i * dv + j0..][..N]).try_into().unwrap();
                    for j in 0..N {
                        row[j] = ki.mul_add(delta[j], row[j]);
                        sq[j] = row[j].mul_add(qi, sq[j]);
                    }
                }
            }
            let out = &mut self.o[t * dv + j0..][..N];
            for (o, a) in out.iter_mut().zip(sq) {
                *o = a * self.scale;
            }
        }
    }
}

/// Runs `f(h, state_h, out_h)` for every value head `h` in tasks of `pool`, with
/// `state_h` the head's `[d_k][d_v]` state and `out_h` its `[T][d_v]` outputs, which end up in
/// `out` (`[T][n_v_heads][d_v]`).
///
/// Task `g` runs the `g`-th group of heads; group size depends only on the shape, and what is
/// computed for a head does not depend on the worker that runs it.
fn for_each_head(
    pool: &Pool,
    s: &DeltaShape,
    x: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
    f: impl Fn(usize, &mut [f32], &mut [f32]) + Sync,
) {
    let (nv, dk, dv) = (s.n_v_heads, s.d_k, s.d_v);
    let t_n = x.beta.len() / nv;
    if t_n == 0 {
        return;
    }
    let per_task = MIN_TASK_WORK.div_ceil(dv * dk * t_n).min(nv);
    let mut run = |by_head: &mut [f32]| {
        let (states, outs) = (Blocks::new(state), Blocks::new(by_head));
        pool.run(nv.div_ceil(per_task), |g| {
            let heads = g * per_task..((g + 1) * per_task).min(nv);
            // SAFETY: the pool runs each task index once, and the head groups of distinct
            // indices are disjoint.
            let (st, o) = unsafe {
                (
                    states.get(heads.start * dv * dk..heads.end * dv * dk),
                    outs.get(heads.start * t_n * dv..heads.end * t_n * dv),
                )
            };
            let per_head = st
                .chunks_exact_mut(dv * dk)
                .zip(o.chunks_exact_mut(t_n * dv));
            for (h, (st_h, o_h)) in heads.zip(per_head) {
                f(h, st_h, o_h);
            }
        });
    };
    if t_n == 1 {
        // One token: `[n_v_heads][d_v]` is already head-major.
        return run(out);
    }
    BY_HEAD.with(|cell| {
        let mut by_head = cell.borrow_mut();
        by_head.resize(nv * t_n * dv, 0.0);
        run(&mut by_head);
        for (h, o_h) in by_head.chunks_exact(t_n * dv).enumerate() {
            for (t, row) in o_h.chunks_exact(dv).enumerate() {
                out[(t * nv + h) * dv..][..dv].copy_from_slice(row);
            }
        }
    });
}

/// `x / √(Σx² + eps)` for every `d`-wide head of `x`, in place, computed as llama.cpp's
/// `build_gdn_l2_norm` does: an RMS norm with eps/d (f32 squares summed in f64), then a
/// scale by 1/√d. Groups of heads run in parallel on `pool`.
pub fn l2_norm_heads_in_place(pool: &Pool, x: &mut [f32], d: usize, eps: f32) {
    let n = d as f32;
    let inv_sqrt_n = 1.0 / n.sqrt();
    par_chunks(pool, x, d, |_, x| {
        for head in x.chunks_exact_mut(d) {
            let sum = super::norm::sum_f64(head, |v| (v * v) as f64);
            let mean = (sum / d as f64) as f32;
            let scale = 1.0 / (mean + eps / n).sqrt();
            head.iter_mut().for_each(|v| *v = (*v * scale) * inv_sqrt_n);
        }
    });
}

#[cfg(test)]
mod tests;
