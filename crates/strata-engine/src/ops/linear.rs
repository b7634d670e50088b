//! `y = x·Wᵀ (+ b)` for a weight matrix stored in any ggml type, read straight from the
//! memory-mapped file.
//!
//! As in ggml's CPU backend (`ggml_compute_forward_mul_mat`), activations are quantized once
//! to the weight type's `vec_dot_type` (Q8_0, Q8_1 or Q8_K) and every output is an integer
//! block dot product; plain float weights (F32/F16/BF16) take an f32 dot, F16 after rounding
//! the activations to f16 (F16's `vec_dot_type` in ggml is F16). Quantized copies
//! live in [`Activations`], so the q/k/v (or gate/up) projections of one input share them.

use rayon::prelude::*;
use strata_gguf::GgmlType;

use crate::error::EngineError;

/// A 2-D weight `[rows][cols]` (ggml `ne = [cols, rows]`): `rows` outputs, `cols` inputs.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// `rows · row_bytes(cols)` bytes in `ty`'s block layout.
    pub data: &'a [u8],
}

impl<'a> Matrix<'a> {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.data.len() / self.rows
    }

    /// The encoded bytes of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &'a [u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }

    /// Dequantizes row `r` into `out` (`cols` floats): embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<(), EngineError> {
        strata_quant::dequantize(self.ty, self.row(r), out).map_err(EngineError::from)
    }
}

/// An input batch `[T][cols]` in f32 plus its quantized forms, made on first use and
/// dropped whenever the f32 data is written again.
#[derive(Default)]
pub struct Activations {
    data: Vec<f32>,
    cols: usize,
    /// (activation type, `[T][row_bytes]`) pairs that are valid for the current data.
    quantized: Vec<(GgmlType, Vec<u8>, bool)>,
    /// The data rounded to f16 (ggml's `vec_dot_type` of F16 weights), if valid.
    f16_rounded: (Vec<f32>, bool),
}

impl Activations {
    /// Resizes to `t` rows of `cols` and invalidates quantized copies.
    pub fn resize(&mut self, t: usize, cols: usize) {
        self.cols = cols;
        self.data.resize(t * cols, 0.0);
        self.invalidate();
    }

    /// Mutable f32 data; quantized copies are invalidated.
    pub fn write(&mut self) -> &mut [f32] {
        self.invalidate();
        &mut self.data
    }

    /// The f32 data.
    pub fn read(&self) -> &[f32] {
        &self.data
    }

    fn invalidate(&mut self) {
        self.quantized.iter_mut().for_each(|q| q.2 = false);
        self.f16_rounded.1 = false;
    }

    /// The data with every element rounded to f16, computed at most once per write.
    fn rounded_f16(&mut self) -> &[f32] {
        let (buf, valid) = &mut self.f16_rounded;
        if !*valid {
            buf.clear();
            buf.extend(self.data.iter().map(|v| half::f16::from_f32(*v).to_f32()));
            *valid = true;
        }
        &self.f16_rounded.0
    }

    /// The batch quantized to `ty`, computed at most once per write.
    fn quantized(&mut self, ty: GgmlType) -> Result<&[u8], EngineError> {
        let idx = match self.quantized.iter().position(|q| q.0 == ty) {
            Some(i) => i,
            None => {
                self.quantized.push((ty, Vec::new(), false));
                self.quantized.len() - 1
            }
        };
        let (cols, data) = (self.cols, &self.data);
        let entry = &mut self.quantized[idx];
        if !entry.2 {
            let rb = ty
                .row_bytes(cols as u64)
                .ok_or(strata_quant::QuantError::PartialBlock {
                    ty,
                    elements: cols,
                    block_size: ty.block_size(),
                })? as usize;
            entry.1.resize(rb * (data.len() / cols), 0);
            for (x, q) in data.chunks_exact(cols).zip(entry.1.chunks_exact_mut(rb)) {
                strata_quant::quantize(ty, x, q)?;
            }
            entry.2 = true;
        }
        Ok(&self.quantized[idx].1)
    }
}

/// Rows handled by one parallel task.
const ROW_TILE: usize = 16;

/// `y[t][r] = Σ_c x[t][c]·W[r][c] + bias[r]` for the `T` rows of `x`.
///
/// `y`: `[T][rows]`. Errors if the weight type has neither an activation kernel nor a
/// float dot, or lengths disagree.
pub fn matmul(
    w: &Matrix<'_>,
    bias: Option<&[f32]>,
    x: &mut Activations,
    y: &mut [f32],
) -> Result<(), EngineError> {
    let t_n = x.data.len() / w.cols;
    debug_assert_eq!(x.cols, w.cols);
    debug_assert_eq!(y.len(), t_n * w.rows);
    match strata_quant::vec_dot_type(w.ty) {
        Some(act_ty) => {
            let acts = x.quantized(act_ty)?;
            let arb = acts.len() / t_n;
            y.par_chunks_mut(w.rows)
                .enumerate()
                .try_for_each(|(t, yt)| {
                    let a = &acts[t * arb..(t + 1) * arb];
                    yt.par_chunks_mut(ROW_TILE)
                        .enumerate()
                        .try_for_each(|(tile, ys)| {
                            for (i, yi) in ys.iter_mut().enumerate() {
                                *yi = strata_quant::vec_dot(w.ty, w.row(tile * ROW_TILE + i), a)?;
                            }
                            Ok::<(), EngineError>(())
                        })
                })?;
        }
        None => {
            // ggml converts the activations of an F16 weight to f16 before the dot product.
            let data = if w.ty == GgmlType::F16 {
                x.rounded_f16()
            } else {
                &x.data
            };
            y.par_chunks_mut(w.rows)
                .enumerate()
                .try_for_each(|(t, yt)| {
                    let xt = &data[t * w.cols..(t + 1) * w.cols];
                    yt.par_chunks_mut(ROW_TILE)
                        .enumerate()
                        .try_for_each(|(tile, ys)| {
                            for (i, yi) in ys.iter_mut().enumerate() {
                                *yi = strata_quant::dot_f32(w.ty, w.row(tile * ROW_TILE + i), xt)?;
                            }
                            Ok::<(), EngineError>(())
                        })
                })?;
        }
    }
    if let Some(b) = bias {
        for row in y.chunks_exact_mut(w.rows) {
            super::add_in_place(row, b);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(wf: &[f32], x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let t_n = x.len() / cols;
        let mut y = vec![0.0; t_n * rows];
        for t in 0..t_n {
            for r in 0..rows {
                y[t * rows + r] = (0..cols).map(|c| wf[r * cols + c] * x[t * cols + c]).sum();
            }
        }
        y
    }

    #[test]
    fn float_and_quantized_weights_match_naive_within_quantization_error() {
        let (rows, cols, t_n) = (37, 256, 3);
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 13 % 97) as f32 - 48.0) / 50.0)
            .collect();
        let xf: Vec<f32> = (0..t_n * cols).map(|i| (i as f32 * 0.3).sin()).collect();
        let want = naive(&wf, &xf, rows, cols);
        for (ty, tol) in [
            (GgmlType::F32, 1e-4),
            (GgmlType::Q8_0, 0.05),
            (GgmlType::Q4_K, 0.5),
        ] {
            let rb = ty.row_bytes(cols as u64).unwrap() as usize;
            let mut bytes = vec![0u8; rows * rb];
            for (r, b) in wf.chunks_exact(cols).zip(bytes.chunks_exact_mut(rb)) {
                strata_quant::quantize(ty, r, b).unwrap();
            }
            let w = Matrix {
                ty,
                rows,
                cols,
                data: &bytes,
            };
            let mut x = Activations::default();
            x.resize(t_n, cols);
            x.write().copy_from_slice(&xf);
            let mut y = vec![0.0; t_n * rows];
            let bias: Vec<f32> = (0..rows).map(|r| r as f32).collect();
            matmul(&w, Some(&bias), &mut x, &mut y).unwrap();
            for i in 0..y.len() {
                let err = (y[i] - bias[i % rows] - want[i]).abs();
                assert!(err < tol, "{ty}: output {i} off by {err}");
            }
            // Rewriting the input drops the cached quantization.
            x.write().iter_mut().for_each(|v| *v = 0.0);
            matmul(&w, None, &mut x, &mut y).unwrap();
            assert!(y.iter().all(|v| *v == 0.0), "{ty}");
        }
    }
}
