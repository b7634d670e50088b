//! The tiled matrix-matrix kernel (`shaders/mul_mm.comp`) for prefill: weights in ggml block
//! layout, dequantized once per tile of [`TILE_TOKENS`] tokens.

use std::ops::Range;

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{u32_of, Kernels, MAX_GROUPS};
use crate::matmul::{matmul_params, QMatrix};
use crate::recorder::Recorder;
use crate::shaders;

/// Weight rows of one workgroup's tile of y (`BM` in `mul_mm.comp`).
const TILE_ROWS: usize = 64;
/// Tokens of one workgroup's tile of y (`BN` in `mul_mm.comp`).
pub(crate) const TILE_TOKENS: usize = 32;
/// Shared memory of one workgroup (bytes): the weight and token tiles, `(BM + BN)·(BK + 1)`
/// f32. Under the 16 KiB `maxComputeSharedMemorySize` that Vulkan guarantees.
pub(crate) const SHARED_BYTES: u32 = ((TILE_ROWS + TILE_TOKENS) * 33 * 4) as u32;

impl Kernels {
    /// Whether the device can run [`Kernels::mul_mm`] (its shared memory holds the tiles).
    pub(crate) fn has_mul_mm(&self) -> bool {
        self.dev.info().max_compute_shared_memory >= SHARED_BYTES
    }

    /// Records `y[t_off + t][y_off + r] = x[t_off + t]·W[w_rows.start + r]` with the tiled
    /// kernel: one workgroup per 64 weight rows × 32 tokens, each weight chunk dequantized
    /// once per tile into shared memory, sums in f32 in K order. Shapes are checked by the
    /// caller ([`Kernels::matmul_rows`]); `n_t` and `w_rows` are not empty.
    ///
    /// Errors: [`VkError::UnsupportedType`] for a type without a kernel; pipeline errors.
    pub(crate) fn mul_mm<'a>(
        &self,
        rec: &mut Recorder<'a>,
        (w, w_rows): (&'a QMatrix, Range<usize>),
        x: &'a Buffer,
        (t_off, n_t): (usize, usize),
        y: &'a Buffer,
        (y_stride, y_off): (usize, usize),
    ) -> Result<(), VkError> {
        let kernel = shaders::mul_mm(w.ty).ok_or(VkError::UnsupportedType(w.ty))?;
        let row_tiles = u32_of("matmul", w_rows.len().div_ceil(TILE_ROWS))?;
        let groups = [
            row_tiles.min(MAX_GROUPS),
            u32_of("matmul", n_t.div_ceil(TILE_TOKENS))?,
            row_tiles.div_ceil(MAX_GROUPS),
        ];
        let args = matmul_params(w, &w_rows, (t_off, n_t), (y_stride, y_off))?;
        self.dispatch_matmul(rec, (kernel, &[]), (w, x, y), &args, groups)
    }
}
