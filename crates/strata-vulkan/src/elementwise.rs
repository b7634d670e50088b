//! Norms, activations, residual and bias adds, scaling and RoPE on `[T][dim]` f32 buffers.
//!
//! Each op records one dispatch; the formulas are strata-engine's CPU ops (`ops/norm.rs`,
//! `ops/activation.rs`, `ops/rope.rs`, `backend/cpu.rs`), which the tests compare against.

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, grid, push, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// Invocations per workgroup of the one-element-per-invocation kernels.
pub(crate) const ELEMENTWISE_WG: u32 = 64;

/// The activation of a gated linear unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GluAct {
    /// `silu(gate) ⊙ up`.
    SwiGlu,
    /// `gelu_tanh(gate) ⊙ up`, GELU at f16 precision as ggml-cpu's table.
    GegluTanh,
}

/// Which elements of a head form a rotated pair (ggml's rope types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopePairs {
    /// `(x[2i], x[2i+1])`: ggml NORM (llama).
    Normal,
    /// `(x[i], x[i + n_rot/2])`: ggml NEOX (Qwen, Gemma).
    Neox,
}

impl Kernels {
    /// Records `shader` (name, SPIR-V) over `n` invocations: push constants `[n, extra…]`,
    /// specialization constants `[workgroup size, spec…]`.
    pub(crate) fn elementwise<'a>(
        &self,
        rec: &mut Recorder<'a>,
        (name, spirv): (&'static str, &[u8]),
        bufs: &[&'a Buffer],
        n: usize,
        extra: &[u32],
        spec: &[u32],
    ) -> Result<(), VkError> {
        if n == 0 {
            return Ok(());
        }
        let mut words = vec![u32_of(name, n)?];
        words.extend_from_slice(extra);
        let mut spec_all = vec![ELEMENTWISE_WG];
        spec_all.extend_from_slice(spec);
        let p = self.pipeline(
            name,
            spirv,
            bufs.len() as u32,
            4 * words.len() as u32,
            &spec_all,
        )?;
        let groups = u32_of(name, n.div_ceil(ELEMENTWISE_WG as usize))?;
        rec.dispatch(&p, bufs, &push(&words), grid(groups))
    }

    /// Records `a[i] += b[i]` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] when a buffer holds fewer than `n` values.
    pub fn add<'a>(
        &self,
        rec: &mut Recorder<'a>,
        a: &'a Buffer,
        b: &'a Buffer,
        n: usize,
    ) -> Result<(), VkError> {
        check_f32("add", "a", a, n)?;
        check_f32("add", "b", b, n)?;
        let period = u32_of("add", n.max(1))?;
        self.elementwise(rec, ("add", shaders::ADD), &[a, b], n, &[period], &[])
    }

    /// Records `a[t][i] += row[i]` for every one of the `n / row_len` rows of `a` (a bias).
    ///
    /// Errors: [`VkError::Shape`] when `n` is not whole rows or a buffer is too small.
    pub fn add_row<'a>(
        &self,
        rec: &mut Recorder<'a>,
        a: &'a Buffer,
        row: &'a Buffer,
        row_len: usize,
        n: usize,
    ) -> Result<(), VkError> {
        if row_len == 0 || !n.is_multiple_of(row_len) {
            return Err(VkError::Shape {
                op: "add_row",
                what: format!("{n} elements are not whole rows of {row_len}"),
            });
        }
        check_f32("add_row", "a", a, n)?;
        check_f32("add_row", "row", row, row_len)?;
        let period = u32_of("add_row", row_len)?;
        self.elementwise(rec, ("add", shaders::ADD), &[a, row], n, &[period], &[])
    }

    /// Records `x[i] *= s` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] when `x` holds fewer than `n` values.
    pub fn scale<'a>(
        &self,
        rec: &mut Recorder<'a>,
        x: &'a Buffer,
        n: usize,
        s: f32,
    ) -> Result<(), VkError> {
        check_f32("scale", "x", x, n)?;
        self.elementwise(rec, ("scale", shaders::SCALE), &[x], n, &[s.to_bits()], &[])
    }

    /// Records `x[i] = silu(x[i]) = x·σ(x)` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] when `x` holds fewer than `n` values.
    pub fn silu<'a>(&self, rec: &mut Recorder<'a>, x: &'a Buffer, n: usize) -> Result<(), VkError> {
        check_f32("silu", "x", x, n)?;
        self.elementwise(rec, ("silu", shaders::SILU), &[x], n, &[], &[])
    }

    /// Records `gate[i] = act(gate[i]) · up[i]` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] when a buffer holds fewer than `n` values.
    pub fn glu<'a>(
        &self,
        rec: &mut Recorder<'a>,
        act: GluAct,
        gate: &'a Buffer,
        up: &'a Buffer,
        n: usize,
    ) -> Result<(), VkError> {
        check_f32("glu", "gate", gate, n)?;
        check_f32("glu", "up", up, n)?;
        let (name, code) = match act {
            GluAct::SwiGlu => ("glu_swiglu", 0),
            GluAct::GegluTanh => ("glu_geglu_tanh", 1),
        };
        self.elementwise(rec, (name, shaders::GLU), &[gate, up], n, &[], &[code])
    }

    /// Records the RMS norm of `n_pieces` consecutive `n`-wide pieces of `x` into `out`
    /// (which may be `x` itself): `out[e] = x[e] / √(mean(piece²) + eps) · w[e % w.len()]`.
    /// `w_len = n` norms token rows or heads with one weight vector (engine `rms_norm`);
    /// `w_len` = a row of several pieces gives every element its own weight (engine
    /// `rms_norm_grouped`). The sum of squares is f32 (the CPU's f64): ~1e-6 relative.
    ///
    /// Errors: [`VkError::Shape`] for buffers that are too small or `w_len` = 0.
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm<'a>(
        &self,
        rec: &mut Recorder<'a>,
        x: &'a Buffer,
        w: &'a Buffer,
        w_len: usize,
        out: &'a Buffer,
        n_pieces: usize,
        n: usize,
        eps: f32,
    ) -> Result<(), VkError> {
        if w_len == 0 || n == 0 {
            return Err(VkError::Shape {
                op: "rms_norm",
                what: "empty weight or piece".into(),
            });
        }
        check_f32("rms_norm", "x", x, n_pieces * n)?;
        check_f32("rms_norm", "out", out, n_pieces * n)?;
        check_f32("rms_norm", "w", w, w_len)?;
        if n_pieces == 0 {
            return Ok(());
        }
        let p = self.pipeline("rms_norm", shaders::RMS_NORM, 3, 16, &[self.wg])?;
        let args = push(&[
            u32_of("rms_norm", n)?,
            u32_of("rms_norm", w_len)?,
            u32_of("rms_norm", n_pieces)?,
            eps.to_bits(),
        ]);
        rec.dispatch(&p, &[x, w, out], &args, grid(u32_of("rms_norm", n_pieces)?))
    }

    /// Records RoPE in place on `x` (`[n_t][row]`, `row` = heads × `head_dim`): pair `i` of
    /// every head of token `t` rotates by `cs[t][2i]` (cos) and `cs[t][2i+1]` (sin), as
    /// strata-engine's `Rope::angles` fills `cs` (`[n_t][n_rot]`).
    ///
    /// Errors: [`VkError::Shape`] for an odd `n_rot`, `n_rot > head_dim`, a `row` that is
    /// not whole heads, or buffers that are too small.
    #[allow(clippy::too_many_arguments)]
    pub fn rope<'a>(
        &self,
        rec: &mut Recorder<'a>,
        pairs: RopePairs,
        x: &'a Buffer,
        cs: &'a Buffer,
        n_t: usize,
        row: usize,
        head_dim: usize,
        n_rot: usize,
    ) -> Result<(), VkError> {
        if !n_rot.is_multiple_of(2)
            || n_rot > head_dim
            || head_dim == 0
            || !row.is_multiple_of(head_dim)
        {
            return Err(VkError::Shape {
                op: "rope",
                what: format!("n_rot {n_rot}, head_dim {head_dim}, row {row}"),
            });
        }
        check_f32("rope", "x", x, n_t * row)?;
        check_f32("rope", "cs", cs, n_t * n_rot)?;
        let n = n_t * (row / head_dim) * (n_rot / 2);
        let style = match pairs {
            RopePairs::Normal => 0,
            RopePairs::Neox => 1,
        };
        if n == 0 {
            return Ok(());
        }
        let words = [
            u32_of("rope", n_t)?,
            u32_of("rope", row)?,
            u32_of("rope", head_dim)?,
            u32_of("rope", n_rot)?,
            style,
        ];
        let p = self.pipeline("rope", shaders::ROPE, 2, 20, &[ELEMENTWISE_WG])?;
        let groups = u32_of("rope", n.div_ceil(ELEMENTWISE_WG as usize))?;
        rec.dispatch(&p, &[x, cs], &push(&words), grid(groups))
    }
}
