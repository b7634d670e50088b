//! `y = x·Wᵀ (+ b)` for a weight matrix stored in any ggml type, read straight from the
//! memory-mapped file.
//!
//! As in ggml's CPU backend (`ggml_compute_forward_mul_mat`), activations are quantized once
//! to the weight type's `vec_dot_type` (Q8_0, Q8_1 or Q8_K, and BF16 for BF16 weights) and every
//! output is that pair's `vec_dot`: an integer block dot product, or for BF16 a dot of bf16
//! values (`vdpbf16ps` where the CPU has AVX512-BF16, as ggml). F32 and F16 weights take an f32
//! dot, F16 after rounding the activations to f16 (F16's `vec_dot_type` in ggml is F16).
//! Quantized copies live in [`Activations`], so the q/k/v (or gate/up) projections of one input
//! share them.
//!
//! Work is split over the given [`crate::pool::Pool`]: one token (decode) splits the weight rows
//! across workers; a batch (prefill) is cut into tiles of weight rows × tokens, each computed
//! by [`strata_quant::gemm`] so a weight tile stays in L2 while the tile's tokens stream over
//! it. Every output equals `vec_dot` of its row and token, so the result does not depend on
//! the tiling or the worker count.

use std::cell::RefCell;

use smallvec::SmallVec;

use strata_gguf::GgmlType;

use crate::error::EngineError;
use crate::pool::{Pool, Tile, Tiles};

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

    /// Rows `T` (0 before the first resize).
    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.cols).unwrap_or(0)
    }

    /// Columns of a row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The f32 vector itself (quantized copies are invalidated), for a caller that takes the
    /// data by swapping vectors instead of copying it.
    pub fn host(&mut self) -> &mut Vec<f32> {
        self.invalidate();
        &mut self.data
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

    /// The batch quantized to `ty`, computed at most once per write (tokens in parallel).
    fn quantized(&mut self, ty: GgmlType, pool: &Pool) -> Result<&[u8], EngineError> {
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
            let t_n = data.len() / cols;
            entry.1.resize(rb * t_n, 0);
            // Quantizing costs ~1/30 of the matmuls that follow; tiles of 16 tokens.
            let tiles = Tiles::new(&mut entry.1, rb, rb, 16);
            pool.for_each_tile(tiles, |tile| {
                for (k, t) in tile.rows.clone().enumerate() {
                    strata_quant::quantize(ty, &data[t * cols..(t + 1) * cols], tile.row_mut(k))?;
                }
                Ok::<(), EngineError>(())
            })?;
            entry.2 = true;
        }
        Ok(&self.quantized[idx].1)
    }
}

/// An input batch as a matmul by some weight type reads it (see [`Activations::rows_for`]).
#[derive(Clone, Copy, Debug)]
pub enum ActRows<'a> {
    /// `[T][row_bytes]` in the weight type's `vec_dot_type` (bf16 values for BF16 weights).
    Quantized(&'a [u8]),
    /// `[T][cols]` f32 (F32 weights), rounded to f16 for F16 weights.
    Float(&'a [f32]),
}

impl Activations {
    /// [`Activations::rows_for`] without computing: `None` when that form is not valid for
    /// the current data.
    fn ready_for(&self, w_ty: GgmlType) -> Option<ActRows<'_>> {
        match strata_quant::vec_dot_type(w_ty) {
            Some(act_ty) => (self.quantized.iter())
                .find(|q| q.0 == act_ty && q.2)
                .map(|q| ActRows::Quantized(&q.1)),
            None if w_ty == GgmlType::F16 => self
                .f16_rounded
                .1
                .then_some(ActRows::Float(&self.f16_rounded.0)),
            None => Some(ActRows::Float(&self.data)),
        }
    }

    /// The batch as [`matmul`] by a `w_ty` weight reads it: quantized to `w_ty`'s
    /// `vec_dot_type` (on `pool`, at most once per write; BF16 for BF16), else f32
    /// (f16-rounded for F16). For ops that run their own tiles, e.g. routed experts.
    ///
    /// Errors: `cols` is not a whole number of the activation type's blocks.
    pub fn rows_for(&mut self, pool: &Pool, w_ty: GgmlType) -> Result<ActRows<'_>, EngineError> {
        match strata_quant::vec_dot_type(w_ty) {
            Some(act_ty) => self.quantized(act_ty, pool).map(ActRows::Quantized),
            None if w_ty == GgmlType::F16 => Ok(ActRows::Float(self.rounded_f16())),
            None => Ok(ActRows::Float(&self.data)),
        }
    }
}

/// Bytes of weights per prefill tile: with the tile's activations it stays in a 1 MiB L2.
const W_TILE_BYTES: usize = 192 << 10;
/// Tokens per prefill tile.
const TOK_TILE: usize = 64;
/// Prefill cuts rows finer when there are fewer token tiles than this many tasks per worker.
const TASKS_PER_WORKER: usize = 4;
/// Decode splits the rows into this many tasks per worker: a one-token task only streams its
/// rows, and the last task of a round is what the other worker waits for (a core lent to
/// another process, a late wake-up), so small tasks keep the round's tail short.
const DECODE_TASKS_PER_WORKER: usize = 16;
/// Fewest weight bytes of a decode task: each one restarts the kernel's DRAM streams and
/// prefetch.
const DECODE_TASK_BYTES: usize = 64 << 10;

thread_local! {
    /// A tile's outputs `[tokens][rows]` when they are not contiguous in `y`.
    static TILE_OUT: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Tile shape (weight rows, tokens) for `rows` rows of `row_bytes` bytes and `t_n` tokens.
/// Rows come in multiples of 16 (whole cache lines of output).
fn tile_shape(rows: usize, row_bytes: usize, t_n: usize, workers: usize) -> (usize, usize) {
    let round16 = |n: usize| n.div_ceil(16).max(1) * 16;
    if t_n == 1 {
        let for_balance = round16(rows.div_ceil(DECODE_TASKS_PER_WORKER * workers));
        let for_streams = round16(DECODE_TASK_BYTES.div_ceil(row_bytes.max(1)));
        return (for_balance.max(for_streams).min(rows), 1);
    }
    let for_cache = round16(W_TILE_BYTES / row_bytes.max(1));
    let tok = if t_n <= TOK_TILE + TOK_TILE / 2 {
        t_n
    } else {
        TOK_TILE
    };
    let tasks_per_col = t_n.div_ceil(tok);
    // Few token tiles: also cut rows finer so every worker gets several tasks.
    let rows_tile = if tasks_per_col >= TASKS_PER_WORKER * workers {
        for_cache
    } else {
        for_cache.min(round16(
            rows * tasks_per_col / (TASKS_PER_WORKER * workers).max(1),
        ))
    };
    (rows_tile.clamp(16, rows.max(16)).min(rows), tok)
}

/// `y[t][r] = Σ_c x[t][c]·W[r][c] + bias[r]` for the `T` rows of `x`.
///
/// `y`: `[T][rows]`. Errors if the weight type has neither an activation kernel nor a
/// float dot, or lengths disagree.
pub fn matmul(
    pool: &Pool,
    w: &Matrix<'_>,
    bias: Option<&[f32]>,
    x: &mut Activations,
    y: &mut [f32],
) -> Result<(), EngineError> {
    let t_n = x.data.len() / w.cols;
    debug_assert_eq!(x.cols, w.cols);
    debug_assert_eq!(y.len(), t_n * w.rows);
    if t_n == 0 || w.rows == 0 {
        return Ok(());
    }
    {
        let (row_tile, tok_tile) = tile_shape(w.rows, w.row_bytes(), t_n, pool.workers());
        let tiles = Tiles::new(y, w.rows, row_tile, tok_tile);
        match strata_quant::vec_dot_type(w.ty) {
            Some(act_ty) => {
                let acts = x.quantized(act_ty, pool)?;
                let arb = acts.len() / t_n;
                pool.for_each_tile(tiles, |tile| quantized_tile(w, acts, arb, tile))
            }
            None => {
                // ggml converts the activations of an F16 weight to f16 before the dot product.
                let data = if w.ty == GgmlType::F16 {
                    x.rounded_f16()
                } else {
                    &x.data
                };
                pool.for_each_tile(tiles, |tile| float_tile(w, data, tile))
            }
        }
    }?;
    if let Some(b) = bias {
        for row in y.chunks_exact_mut(w.rows) {
            super::add_in_place(pool, row, b);
        }
    }
    Ok(())
}

/// Outputs of one [`matmul_many`] held on the stack (more spill to the heap).
pub const FUSED: usize = 8;

/// One output of [`matmul_many`]: `y = x·Wᵀ (+ bias)`, `y` `[T][w.rows]`.
pub struct MatmulOut<'a, 'w> {
    pub w: &'a Matrix<'w>,
    pub bias: Option<&'a [f32]>,
    pub y: &'a mut [f32],
}

/// Several [`matmul`]s of the same input in one pool round (q/k/v, gate/up): every output's
/// tiles are those [`matmul`] would make for it alone, so each output is bit-identical to its
/// own [`matmul`]; one round instead of one per output saves a fork-join per extra matrix,
/// which decode of small models is bound by. The input is quantized once per activation type
/// the weights need.
///
/// Errors: as [`matmul`].
pub fn matmul_many(
    pool: &Pool,
    x: &mut Activations,
    outs: &mut [MatmulOut<'_, '_>],
) -> Result<(), EngineError> {
    let t_n = x.rows();
    if t_n == 0 {
        return Ok(());
    }
    for o in outs.iter() {
        debug_assert_eq!(x.cols, o.w.cols);
        debug_assert_eq!(o.y.len(), t_n * o.w.rows);
        x.rows_for(pool, o.w.ty)?;
    }
    let x = &*x;
    // On the stack: decode allocates nothing (tests/decode_allocations.rs).
    let ws: SmallVec<[&Matrix<'_>; FUSED]> =
        (outs.iter().map(|o| o.w)).filter(|w| w.rows > 0).collect();
    let tiles: SmallVec<[Tiles<'_, f32>; FUSED]> = outs
        .iter_mut()
        .filter(|o| o.w.rows > 0)
        .map(|o| {
            let (row_tile, tok_tile) = tile_shape(o.w.rows, o.w.row_bytes(), t_n, pool.workers());
            Tiles::new(o.y, o.w.rows, row_tile, tok_tile)
        })
        .collect();
    let filled = pool.for_each_tile_of(&tiles, |p, tile| {
        let w = ws[p];
        match x.ready_for(w.ty).expect("prepared above") {
            ActRows::Quantized(acts) => quantized_tile(w, acts, acts.len() / t_n, tile),
            ActRows::Float(data) => float_tile(w, data, tile),
        }
    });
    drop(tiles);
    filled?;
    for o in outs.iter_mut() {
        if let Some(b) = o.bias {
            for row in o.y.chunks_exact_mut(o.w.rows) {
                super::add_in_place(pool, row, b);
            }
        }
    }
    Ok(())
}

/// One tile of a quantized matmul through [`strata_quant::gemm`].
fn quantized_tile(
    w: &Matrix<'_>,
    acts: &[u8],
    arb: usize,
    tile: &mut Tile<'_, f32>,
) -> Result<(), EngineError> {
    let (rows, toks) = (tile.cols.clone(), tile.rows.clone());
    let rb = w.row_bytes();
    let wt = &w.data[rows.start * rb..rows.end * rb];
    let at = &acts[toks.start * arb..toks.end * arb];
    into_tile(tile, w.rows, |out, stride| {
        strata_quant::gemm(w.ty, wt, rows.len(), at, toks.len(), out, stride)
    })
}

/// One tile of a float-weight matmul through [`strata_quant::gemm_f32`]: an f32 dot per
/// (row, token), bit for bit as [`strata_quant::dot_f32`].
fn float_tile(w: &Matrix<'_>, data: &[f32], tile: &mut Tile<'_, f32>) -> Result<(), EngineError> {
    let (rows, toks) = (tile.cols.clone(), tile.rows.clone());
    let rb = w.row_bytes();
    let wt = &w.data[rows.start * rb..rows.end * rb];
    let xt = &data[toks.start * w.cols..toks.end * w.cols];
    into_tile(tile, w.rows, |out, stride| {
        strata_quant::gemm_f32(w.ty, wt, rows.len(), xt, w.cols, toks.len(), out, stride)
    })
}

/// Runs `product(out, stride)` (which writes `[tile rows][tile cols]` at `out` with row stride
/// `stride`) straight into `tile` when its elements are one slice of the output (`stride` =
/// `out_stride`, the output's row length), else into a per-thread buffer copied into it.
fn into_tile(
    tile: &mut Tile<'_, f32>,
    out_stride: usize,
    product: impl FnOnce(&mut [f32], usize) -> Result<(), strata_quant::QuantError>,
) -> Result<(), EngineError> {
    if let Some(out) = tile.contiguous_mut() {
        return Ok(product(out, out_stride)?);
    }
    let n = tile.cols.len();
    TILE_OUT.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.resize(n * tile.rows.len(), 0.0);
        product(&mut buf, n)?;
        for (k, src) in buf.chunks_exact(n).enumerate() {
            tile.row_mut(k).copy_from_slice(src);
        }
        Ok(())
    })
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
        let pool = Pool::new(Default::default());
        let (rows, cols, t_n) = (37, 256, 3);
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 13 % 97) as f32 - 48.0) / 50.0)
            .collect();
        let xf: Vec<f32> = (0..t_n * cols).map(|i| (i as f32 * 0.3).sin()).collect();
        let want = naive(&wf, &xf, rows, cols);
        for (ty, tol) in [
            (GgmlType::F32, 1e-4),
            // Weights and activations each rounded to 8 significant bits.
            (GgmlType::BF16, 0.05),
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
            matmul(&pool, &w, Some(&bias), &mut x, &mut y).unwrap();
            for i in 0..y.len() {
                let err = (y[i] - bias[i % rows] - want[i]).abs();
                assert!(err < tol, "{ty}: output {i} off by {err}");
            }
            // Rewriting the input drops the cached quantization.
            x.write().iter_mut().for_each(|v| *v = 0.0);
            matmul(&pool, &w, None, &mut x, &mut y).unwrap();
            assert!(y.iter().all(|v| *v == 0.0), "{ty}");
        }
    }

    /// The fused op equals one matmul per output bit for bit, whatever the weights' types
    /// (and so their activation types), biases and the number of tokens (decode, a small
    /// batch, prefill tiles).
    #[test]
    fn matmul_many_equals_separate_matmuls_bit_for_bit() {
        let pool = Pool::new(crate::pool::PoolOptions {
            workers: 3,
            ..Default::default()
        });
        let cols = 256;
        let shapes = [
            (GgmlType::Q4_K, 96),
            (GgmlType::Q6_K, 32),
            (GgmlType::Q8_0, 40),
            (GgmlType::F16, 17),
            (GgmlType::F32, 5),
        ];
        let bytes: Vec<Vec<u8>> = shapes
            .iter()
            .enumerate()
            .map(|(k, &(ty, rows))| {
                let rb = ty.row_bytes(cols as u64).unwrap() as usize;
                let mut b = vec![0u8; rows * rb];
                for (r, dst) in b.chunks_exact_mut(rb).enumerate() {
                    let row: Vec<f32> = (0..cols)
                        .map(|c| (((k * 7 + r) * 31 + c * 17) % 101) as f32 / 50.0 - 1.0)
                        .collect();
                    strata_quant::quantize(ty, &row, dst).unwrap();
                }
                b
            })
            .collect();
        let ws: Vec<Matrix<'_>> = shapes
            .iter()
            .zip(&bytes)
            .map(|(&(ty, rows), data)| Matrix {
                ty,
                rows,
                cols,
                data,
            })
            .collect();
        let bias: Vec<f32> = (0..96).map(|r| r as f32 * 0.25).collect();
        for t_n in [1, 3, 70] {
            let xf: Vec<f32> = (0..t_n * cols).map(|i| (i as f32 * 0.37).sin()).collect();
            let mut x = Activations::default();
            x.resize(t_n, cols);
            x.write().copy_from_slice(&xf);
            let biases: Vec<Option<&[f32]>> = ws
                .iter()
                .enumerate()
                .map(|(k, w)| (k % 2 == 0).then_some(&bias[..w.rows]))
                .collect();
            let want: Vec<Vec<f32>> = ws
                .iter()
                .zip(&biases)
                .map(|(w, b)| {
                    let mut y = vec![0.0; t_n * w.rows];
                    matmul(&pool, w, *b, &mut x, &mut y).unwrap();
                    y
                })
                .collect();
            let mut ys: Vec<Vec<f32>> = ws.iter().map(|w| vec![f32::NAN; t_n * w.rows]).collect();
            let mut outs: Vec<MatmulOut<'_, '_>> = ws
                .iter()
                .zip(&biases)
                .zip(ys.iter_mut())
                .map(|((w, b), y)| MatmulOut { w, bias: *b, y })
                .collect();
            matmul_many(&pool, &mut x, &mut outs).unwrap();
            for ((got, want), (ty, _)) in ys.iter().zip(&want).zip(shapes) {
                let same = got
                    .iter()
                    .zip(want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{ty}, {t_n} tokens");
            }
        }
    }

    /// ggml's `vec_dot_type` of BF16 is BF16: the activations are rounded to bf16 before the
    /// dot, for one token (decode) and a batch (prefill) alike.
    #[test]
    fn bf16_weights_see_bf16_rounded_activations() {
        let pool = Pool::new(Default::default());
        let (rows, cols, t_n) = (3, 64, 5);
        let one = strata_quant::f32_to_bf16(1.0).to_le_bytes();
        let bytes: Vec<u8> = (0..rows * cols).flat_map(|_| one).collect();
        let w = Matrix {
            ty: GgmlType::BF16,
            rows,
            cols,
            data: &bytes,
        };
        // 1 + 3·2^-10 is closer to 1 than to the next bf16 (1 + 2^-7).
        for t in [1, t_n] {
            let mut x = Activations::default();
            x.resize(t, cols);
            x.write().fill(1.0 + 3.0 / 1024.0);
            let mut y = vec![0.0; t * rows];
            matmul(&pool, &w, None, &mut x, &mut y).unwrap();
            assert!(y.iter().all(|v| *v == cols as f32), "{t} tokens: {y:?}");
        }
    }

    #[test]
    fn tiled_batch_equals_token_by_token_bit_for_bit_on_any_pool() {
        // 300 rows x 100 tokens: several row and token tiles, ragged edges.
        let (rows, cols, t_n) = (300, 512, 100);
        let ty = GgmlType::Q4_K;
        let rb = ty.row_bytes(cols as u64).unwrap() as usize;
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 80.0)
            .collect();
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
        let xf: Vec<f32> = (0..t_n * cols).map(|i| (i as f32 * 0.013).sin()).collect();
        let one_pool = Pool::new(Default::default());
        let mut one = Activations::default();
        one.resize(1, cols);
        let mut want = vec![0.0f32; t_n * rows];
        for (t, y) in want.chunks_exact_mut(rows).enumerate() {
            one.write().copy_from_slice(&xf[t * cols..(t + 1) * cols]);
            matmul(&one_pool, &w, None, &mut one, y).unwrap();
        }
        for workers in [1, 3] {
            let pool = Pool::new(crate::pool::PoolOptions {
                workers,
                ..Default::default()
            });
            let mut x = Activations::default();
            x.resize(t_n, cols);
            x.write().copy_from_slice(&xf);
            let mut y = vec![0.0f32; t_n * rows];
            matmul(&pool, &w, None, &mut x, &mut y).unwrap();
            let same = y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{workers} workers");
        }
    }
}
