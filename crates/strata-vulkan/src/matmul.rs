//! Quantized matrix products on weights in ggml block layout: the matrix-vector kernel for
//! up to [`MUL_MM_ABOVE_TOKENS`] tokens, the tiled kernel (`crate::mul_mm`) past that.

use std::ops::Range;

use strata_quant::GgmlType;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::VkError;
use crate::kernels::{check_f32, push, u32_of, Kernels, MAX_GROUPS};
use crate::recorder::Recorder;
use crate::shaders;
use crate::transfer;

/// Tokens one workgroup column of the kernel handles (`MAX_T` in `mul_mat_vec.comp`).
const TOKENS_PER_GROUP: usize = 8;

/// Products over more tokens than this run the tiled kernel (`mul_mm`, prefill); up to this
/// many (decode, verify windows, small batches), `mul_mat_vec`. At ≤ 8 tokens the
/// matrix-vector kernel already dequantizes each weight row once (one workgroup column), and
/// a 32-token tile of `mul_mm` would be mostly empty; past it, `mul_mat_vec` dequantizes
/// every row once per 8 tokens, `mul_mm` once per 32.
pub(crate) const MUL_MM_ABOVE_TOKENS: usize = TOKENS_PER_GROUP;

/// A weight matrix `[rows][cols]` on the device, bytes exactly as in the GGUF file (rows of
/// `cols / block_size` blocks, no repacking).
pub struct QMatrix {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// Bytes of one row.
    pub row_bytes: usize,
    pub buf: Buffer,
}

impl QMatrix {
    /// Uploads `bytes` (`rows` rows of `cols` elements of `ty`) into device memory.
    ///
    /// Errors: [`VkError::UnsupportedType`] for a type without a kernel; [`VkError::Shape`]
    /// when `cols` is not a whole number of blocks or `bytes` has the wrong length.
    pub fn upload(
        dev: &Device,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self, VkError> {
        if shaders::mul_mat_vec(ty).is_none() {
            return Err(VkError::UnsupportedType(ty));
        }
        let bs = ty.block_size();
        if cols == 0 || !cols.is_multiple_of(bs) {
            return Err(VkError::Shape {
                op: "matmul",
                what: format!("{cols} columns of {ty:?} are not whole blocks of {bs}"),
            });
        }
        let row_bytes = cols / bs * ty.type_size();
        if bytes.len() != rows * row_bytes {
            return Err(VkError::Shape {
                op: "matmul",
                what: format!(
                    "{rows}×{cols} {ty:?} is {} bytes, got {}",
                    rows * row_bytes,
                    bytes.len()
                ),
            });
        }
        Ok(Self {
            ty,
            rows,
            cols,
            row_bytes,
            buf: transfer::upload(dev, bytes)?,
        })
    }
}

impl Kernels {
    /// Records `y = x·Wᵀ (+ bias)`: `x` `[n_t][w.cols]` f32, `y` `[n_t][w.rows]` f32, `bias`
    /// `[w.rows]`. Up to 8 tokens: one workgroup per weight row (`mul_mat_vec`); more: one
    /// workgroup per tile of 64 rows × 32 tokens (`mul_mm`). Every weight block is dequantized
    /// in f32 once per group or tile. Both kernels sum in one order (each 32-element chunk's
    /// dot with fused multiply-adds, then the chunks in order), so a token's output has the
    /// same bits at any token count; that order differs from the CPU's (results agree within
    /// ~1e-6 relative, not bits). The bias is a second dispatch.
    ///
    /// Errors: [`VkError::Shape`] when a buffer is too small; pipeline errors.
    pub fn matmul<'a>(
        &self,
        rec: &mut Recorder<'a>,
        w: &'a QMatrix,
        x: &'a Buffer,
        n_t: usize,
        y: &'a Buffer,
        bias: Option<&'a Buffer>,
    ) -> Result<(), VkError> {
        self.matmul_into(rec, w, x, n_t, y, (w.rows, 0))?;
        match bias {
            Some(b) => self.add_row(rec, y, b, w.rows, n_t * w.rows),
            None => Ok(()),
        }
    }

    /// Records `y[t][y_off + r] = x[t]·W[r]` for every row `r` of `w` into a `y` of
    /// `y_stride` columns: `w` may be one row range of a matrix too large for one storage
    /// binding, each range written to its columns of the product.
    ///
    /// Errors: [`VkError::Shape`] when a buffer is too small or the rows do not fit the
    /// stride; pipeline errors.
    pub fn matmul_into<'a>(
        &self,
        rec: &mut Recorder<'a>,
        w: &'a QMatrix,
        x: &'a Buffer,
        n_t: usize,
        y: &'a Buffer,
        y_cols: (usize, usize),
    ) -> Result<(), VkError> {
        self.matmul_rows(rec, (w, 0..w.rows), x, (0, n_t), y, y_cols)
    }

    /// Records `y[t_off + t][y_off + r] = x[t_off + t]·W[w_rows.start + r]` for the rows
    /// `w_rows` of `w` and the `n_t` rows of `x` and `y` from `t_off`, into a `y` of
    /// `y_stride` columns (`x`: `w.cols` columns): one expert of a 3-D expert tensor, which
    /// is a row range of its matrix, over the tokens routed to it — no per-expert copy.
    ///
    /// Errors: [`VkError::Shape`] when `w_rows` is outside `w`, a buffer is too small or
    /// the rows do not fit the stride; pipeline errors.
    pub fn matmul_rows<'a>(
        &self,
        rec: &mut Recorder<'a>,
        (w, w_rows): (&'a QMatrix, Range<usize>),
        x: &'a Buffer,
        (t_off, n_t): (usize, usize),
        y: &'a Buffer,
        (y_stride, y_off): (usize, usize),
    ) -> Result<(), VkError> {
        if w_rows.start > w_rows.end || w_rows.end > w.rows {
            return Err(VkError::Shape {
                op: "matmul",
                what: format!("weight rows {w_rows:?} of {}", w.rows),
            });
        }
        let n_rows = w_rows.len();
        if y_off + n_rows > y_stride {
            return Err(VkError::Shape {
                op: "matmul",
                what: format!("rows {y_off}..{} past {y_stride} columns", y_off + n_rows),
            });
        }
        check_f32("matmul", "x", x, (t_off + n_t) * w.cols)?;
        check_f32("matmul", "y", y, (t_off + n_t) * y_stride)?;
        if n_t == 0 || n_rows == 0 {
            return Ok(());
        }
        if n_t > MUL_MM_ABOVE_TOKENS && self.has_mul_mm() {
            return self.mul_mm(rec, (w, w_rows), x, (t_off, n_t), y, (y_stride, y_off));
        }
        let kernel = shaders::mul_mat_vec(w.ty).ok_or(VkError::UnsupportedType(w.ty))?;
        let rows = u32_of("matmul", n_rows)?;
        let groups = [
            rows.min(MAX_GROUPS),
            u32_of("matmul", n_t.div_ceil(TOKENS_PER_GROUP))?,
            rows.div_ceil(MAX_GROUPS),
        ];
        let args = matmul_params(w, &w_rows, (t_off, n_t), (y_stride, y_off))?;
        self.dispatch_matmul(rec, (kernel, &[self.wg]), (w, x, y), &args, groups)
    }

    /// Records a dispatch of the matmul kernel `(name, spirv)` (specialization constants
    /// `spec`) over W, x and y, and the i-quant tables after them where `w`'s type reads them.
    ///
    /// Errors: pipeline errors.
    pub(crate) fn dispatch_matmul<'a>(
        &self,
        rec: &mut Recorder<'a>,
        ((name, spirv), spec): ((&'static str, &[u8]), &[u32]),
        (w, x, y): (&'a QMatrix, &'a Buffer, &'a Buffer),
        args: &[u8],
        groups: [u32; 3],
    ) -> Result<(), VkError> {
        let tables = self.tables_for(w.ty)?;
        let p = self.pipeline(name, spirv, 3 + tables.is_some() as u32, 32, spec)?;
        match &tables {
            Some(t) => {
                rec.keep_shared(t);
                rec.record_dispatch(&p, &[&w.buf, x, y, t], args, groups)
            }
            None => rec.dispatch(&p, &[&w.buf, x, y], args, groups),
        }
    }
}

/// The push constants of `mul_mat_vec.comp` and `mul_mm.comp` (their shared `Params`): the
/// rows `w_rows` of `w` against `n_t` rows of x and y from `t_off`, into y columns
/// `y_off..` of `y_stride`.
///
/// Errors: [`VkError::Shape`] for a value over `u32`.
pub(crate) fn matmul_params(
    w: &QMatrix,
    w_rows: &Range<usize>,
    (t_off, n_t): (usize, usize),
    (y_stride, y_off): (usize, usize),
) -> Result<Vec<u8>, VkError> {
    Ok(push(&[
        u32_of("matmul", w_rows.len())?,
        u32_of("matmul", w.cols)?,
        u32_of("matmul", w.row_bytes)?,
        u32_of("matmul", n_t)?,
        u32_of("matmul", y_stride)?,
        u32_of("matmul", y_off)?,
        u32_of("matmul", w_rows.start)?,
        u32_of("matmul", t_off)?,
    ]))
}
