//! Gates and column copies on `[T][dim]` f32 buffers: `x ⊙ silu(z)`, `x ⊙ σ(g)`, the
//! row-gated add of a shared expert, and the strided column copies that `split` and `concat`
//! are made of.
//!
//! Each op records one dispatch; the formulas are strata-engine's CPU backend
//! (`backend/cpu.rs`, `ops/gate.rs`), which the tests compare against.

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// A multiplicative gate of [`Kernels::gate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateAct {
    /// `x ⊙ silu(g)` (a Gated DeltaNet's output gate).
    Silu,
    /// `x ⊙ σ(g)` (gated attention's output gate).
    Sigmoid,
}

/// A block of columns of a row-major buffer: `cols` columns from column `off` of rows
/// `stride` wide.
#[derive(Clone, Copy, Debug)]
pub struct Cols {
    pub stride: usize,
    pub off: usize,
}

impl Kernels {
    /// Records `x[i] *= act(g[i])` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] when a buffer holds fewer than `n` values.
    pub fn gate<'a>(
        &self,
        rec: &mut Recorder<'a>,
        act: GateAct,
        x: &'a Buffer,
        g: &'a Buffer,
        n: usize,
    ) -> Result<(), VkError> {
        check_f32("gate", "x", x, n)?;
        check_f32("gate", "g", g, n)?;
        let (name, mode) = match act {
            GateAct::Silu => ("gate_silu", 0),
            GateAct::Sigmoid => ("gate_sigmoid", 1),
        };
        self.elementwise(rec, (name, shaders::GATE), &[x, g], n, &[], &[mode])
    }

    /// Records `out[t][i] += y[t][i] · σ(g[t])` over `n` values of rows `d` wide (`g`: one
    /// logit per row).
    ///
    /// Errors: [`VkError::Shape`] when `n` is not whole rows or a buffer is too small.
    pub fn add_gated<'a>(
        &self,
        rec: &mut Recorder<'a>,
        out: &'a Buffer,
        y: &'a Buffer,
        g: &'a Buffer,
        d: usize,
        n: usize,
    ) -> Result<(), VkError> {
        if d == 0 || !n.is_multiple_of(d) {
            return Err(VkError::Shape {
                op: "add_gated",
                what: format!("{n} values are not whole rows of {d}"),
            });
        }
        check_f32("add_gated", "out", out, n)?;
        check_f32("add_gated", "y", y, n)?;
        check_f32("add_gated", "g", g, n / d)?;
        let extra = [u32_of("add_gated", d)?];
        self.elementwise(
            rec,
            ("add_gated", shaders::ADD_GATED),
            &[out, y, g],
            n,
            &extra,
            &[],
        )
    }

    /// Records the copy of `width` columns of `rows` rows: `dst[r][to.off + c] =
    /// src[r][from.off + c]` (rows `from.stride` and `to.stride` wide).
    ///
    /// Errors: [`VkError::Shape`] when the columns leave a row or a buffer is too small.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_cols<'a>(
        &self,
        rec: &mut Recorder<'a>,
        src: &'a Buffer,
        from: Cols,
        dst: &'a Buffer,
        to: Cols,
        rows: usize,
        width: usize,
    ) -> Result<(), VkError> {
        if from.off + width > from.stride || to.off + width > to.stride {
            return Err(VkError::Shape {
                op: "copy_cols",
                what: format!(
                    "{width} columns from {} of {} into {} of {}",
                    from.off, from.stride, to.off, to.stride
                ),
            });
        }
        if rows == 0 || width == 0 {
            return Ok(());
        }
        check_f32("copy_cols", "src", src, rows * from.stride)?;
        check_f32("copy_cols", "dst", dst, rows * to.stride)?;
        let extra = [width, from.stride, from.off, to.stride, to.off]
            .iter()
            .map(|v| u32_of("copy_cols", *v))
            .collect::<Result<Vec<_>, _>>()?;
        self.elementwise(
            rec,
            ("copy_cols", shaders::COPY_COLS),
            &[src, dst],
            rows * width,
            &extra,
            &[],
        )
    }
}
