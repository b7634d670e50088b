//! The kernels of a Gated DeltaNet layer on `[T][dim]` f32 buffers: the L2 norm of the query
//! and key heads, the causal depthwise convolution with its history, the per-head gates and
//! the gated delta rule with its state.
//!
//! Each op records one dispatch; the formulas are strata-engine's CPU ops
//! (`ops/delta_net.rs`, `ops/conv1d.rs`, `backend/cpu.rs` `delta_gates`), which the tests
//! compare against. The per-sequence state buffers are the caller's (the backend uploads a
//! sequence's host state into them and reads it back, `backend/hybrid.rs`).

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, grid, push, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// The shape of one sequence's part of a delta-rule run (strata-engine's `DeltaShape`).
#[derive(Clone, Copy, Debug)]
pub struct DeltaDims {
    /// Value heads (one `[d_k][d_v]` state each) and query/key heads (`n_v_heads` is a
    /// multiple of `n_k_heads`).
    pub n_v_heads: usize,
    pub n_k_heads: usize,
    pub d_k: usize,
    pub d_v: usize,
    /// Value head h reads key head `h % n_k_heads` (`true`, qwen4exp) or
    /// `h / (n_v_heads / n_k_heads)` (`false`, Qwen3-Next).
    pub tiled: bool,
    /// The sequence's rows: `n_t` of them from row `row0` of the run's buffers.
    pub n_t: usize,
    pub row0: usize,
}

/// The shape of one sequence's part of a causal convolution run.
#[derive(Clone, Copy, Debug)]
pub struct ConvDims {
    /// Channels (a row's width), taps per channel and rows between taps.
    pub c: usize,
    pub k: usize,
    pub dilation: usize,
    /// The sequence's rows: `n_t` of them from row `row0` of the run's buffers.
    pub n_t: usize,
    pub row0: usize,
}

impl ConvDims {
    /// Rows of history the convolution keeps: `(k − 1)·dilation`.
    pub fn keep(&self) -> usize {
        (self.k - 1) * self.dilation
    }
}

impl Kernels {
    /// Records `x[e] /= √(Σ_head x² + eps)` in place for `n_pieces` heads of `n` values
    /// (strata-engine's `l2_norm_heads_in_place`, llama.cpp's GDN L2 norm). The sum of
    /// squares is f32 (the CPU's f64): ~1e-7 relative.
    ///
    /// Errors: [`VkError::Shape`] for `n` = 0 or a buffer that is too small.
    pub fn l2_norm<'a>(
        &self,
        rec: &mut Recorder<'a>,
        x: &'a Buffer,
        n_pieces: usize,
        n: usize,
        eps: f32,
    ) -> Result<(), VkError> {
        if n == 0 {
            return Err(VkError::Shape {
                op: "l2_norm",
                what: "heads of 0 values".into(),
            });
        }
        check_f32("l2_norm", "x", x, n_pieces * n)?;
        if n_pieces == 0 {
            return Ok(());
        }
        let p = self.pipeline("l2_norm", shaders::L2_NORM, 1, 12, &[self.wg])?;
        let args = push(&[
            u32_of("l2_norm", n)?,
            u32_of("l2_norm", n_pieces)?,
            eps.to_bits(),
        ]);
        rec.dispatch(&p, &[x], &args, grid(u32_of("l2_norm", n_pieces)?))
    }

    /// Records one sequence's causal depthwise convolution (strata-engine's
    /// `dilated_causal_conv1d`): rows `row0..row0 + n_t` of `x` (`[T][c]`) through the taps
    /// `w` (`[c][k]`, `dilation` rows apart) after the history `state`
    /// (`[(k − 1)·dilation][c]`, oldest first) into the same rows of `out`; the new history
    /// (the last `keep` rows of history + rows) into `state_out` (same shape as `state`).
    ///
    /// Errors: [`VkError::Shape`] for `k` or `c` = 0 or buffers that are too small.
    #[allow(clippy::too_many_arguments)]
    pub fn conv1d<'a>(
        &self,
        rec: &mut Recorder<'a>,
        d: &ConvDims,
        x: &'a Buffer,
        w: &'a Buffer,
        state: &'a Buffer,
        out: &'a Buffer,
        state_out: &'a Buffer,
    ) -> Result<(), VkError> {
        if d.k == 0 || d.c == 0 || d.dilation == 0 {
            return Err(VkError::Shape {
                op: "conv1d",
                what: format!("{} channels of {} taps, dilation {}", d.c, d.k, d.dilation),
            });
        }
        let rows = (d.row0 + d.n_t) * d.c;
        check_f32("conv1d", "x", x, rows)?;
        check_f32("conv1d", "out", out, rows)?;
        check_f32("conv1d", "w", w, d.c * d.k)?;
        check_f32("conv1d", "state", state, d.keep() * d.c)?;
        check_f32("conv1d", "state_out", state_out, d.keep() * d.c)?;
        let n = (d.n_t + d.keep()) * d.c;
        let extra = [d.c, d.k, d.dilation, d.n_t, d.row0]
            .iter()
            .map(|v| u32_of("conv1d", *v))
            .collect::<Result<Vec<_>, _>>()?;
        let bufs = [x, w, state, out, state_out];
        self.elementwise(rec, ("conv1d", shaders::CONV1D), &bufs, n, &extra, &[])
    }

    /// Records the gated delta rule over one sequence's rows (strata-engine's
    /// `delta_rule_recurrent`): `q`, `k` `[T][n_k_heads·d_k]` (L2-normed), `v`
    /// `[T][n_v_heads·d_v]`, `log_decay`, `beta` `[T][n_v_heads]`; `state`
    /// `[n_v_heads][d_k][d_v]` updated in place; `out` `[T][n_v_heads·d_v]`, its rows
    /// `row0..row0 + n_t` written. Scale `1/√d_k`.
    ///
    /// Errors: [`VkError::Shape`] for heads that do not group or buffers that are too small.
    #[allow(clippy::too_many_arguments)]
    pub fn delta_rule<'a>(
        &self,
        rec: &mut Recorder<'a>,
        d: &DeltaDims,
        (q, k, v): (&'a Buffer, &'a Buffer, &'a Buffer),
        (log_decay, beta): (&'a Buffer, &'a Buffer),
        state: &'a Buffer,
        out: &'a Buffer,
    ) -> Result<(), VkError> {
        if d.n_k_heads == 0 || d.d_k == 0 || !d.n_v_heads.is_multiple_of(d.n_k_heads) {
            return Err(VkError::Shape {
                op: "delta_rule",
                what: format!(
                    "{} value heads over {} key heads of {}",
                    d.n_v_heads, d.n_k_heads, d.d_k
                ),
            });
        }
        let rows = d.row0 + d.n_t;
        let (kd, vd) = (d.n_k_heads * d.d_k, d.n_v_heads * d.d_v);
        check_f32("delta_rule", "q", q, rows * kd)?;
        check_f32("delta_rule", "k", k, rows * kd)?;
        check_f32("delta_rule", "v", v, rows * vd)?;
        check_f32("delta_rule", "out", out, rows * vd)?;
        check_f32("delta_rule", "log_decay", log_decay, rows * d.n_v_heads)?;
        check_f32("delta_rule", "beta", beta, rows * d.n_v_heads)?;
        check_f32("delta_rule", "state", state, vd * d.d_k)?;
        let scale = 1.0 / (d.d_k as f32).sqrt();
        let extra = [
            d.n_v_heads,
            d.n_k_heads,
            d.d_k,
            d.d_v,
            d.n_t,
            d.row0,
            usize::from(d.tiled),
        ]
        .iter()
        .map(|v| u32_of("delta_rule", *v))
        .chain([Ok(scale.to_bits())])
        .collect::<Result<Vec<_>, _>>()?;
        let bufs = [q, k, v, log_decay, beta, state, out];
        self.elementwise(
            rec,
            ("delta_rule", shaders::DELTA_RULE),
            &bufs,
            vd,
            &extra,
            &[],
        )
    }

    /// Records the gates of a Gated DeltaNet from `ba` (`[n_t][2·n_v_heads]`, per key head its
    /// value heads' β logits then their α logits): `beta = σ(b)`,
    /// `log_decay = softplus(α + dt_bias)·a`, both `[n_t][n_v_heads]` (strata-engine's CPU
    /// `delta_gates`). `dt_bias` and `a` hold `n_v_heads` values.
    ///
    /// Errors: [`VkError::Shape`] for value heads that do not group or buffers that are too
    /// small.
    #[allow(clippy::too_many_arguments)]
    pub fn delta_gates<'a>(
        &self,
        rec: &mut Recorder<'a>,
        ba: &'a Buffer,
        (dt_bias, a): (&'a Buffer, &'a Buffer),
        (n_t, n_v_heads, n_k_heads): (usize, usize, usize),
        beta: &'a Buffer,
        log_decay: &'a Buffer,
    ) -> Result<(), VkError> {
        if n_k_heads == 0 || !n_v_heads.is_multiple_of(n_k_heads) {
            return Err(VkError::Shape {
                op: "delta_gates",
                what: format!("{n_v_heads} value heads over {n_k_heads} key heads"),
            });
        }
        let n = n_t * n_v_heads;
        check_f32("delta_gates", "ba", ba, 2 * n)?;
        check_f32("delta_gates", "dt_bias", dt_bias, n_v_heads)?;
        check_f32("delta_gates", "a", a, n_v_heads)?;
        check_f32("delta_gates", "beta", beta, n)?;
        check_f32("delta_gates", "log_decay", log_decay, n)?;
        let extra = [
            u32_of("delta_gates", n_v_heads)?,
            u32_of("delta_gates", n_v_heads / n_k_heads)?,
        ];
        let bufs = [ba, dt_bias, a, beta, log_decay];
        self.elementwise(
            rec,
            ("delta_gates", shaders::DELTA_GATES),
            &bufs,
            n,
            &extra,
            &[],
        )
    }
}
