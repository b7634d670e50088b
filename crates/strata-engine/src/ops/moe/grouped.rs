//! Several experts' matmuls in one pool run: every (tensor, expert, weight-row tile, token
//! tile) is one task, so a decode step's 8 experts × gate+up cost one dispatch, not 16.
//!
//! The batch is a list of rows in *group order* (the rows routed to one expert are
//! consecutive, see [`super::Groups`]). Each task writes its own contiguous `[tokens][rows]`
//! block of a scratch buffer, then copies it into its rows of the row-major outputs (no two
//! tasks share memory, so no locking but the hand-over). Every output is the same
//! `vec_dot` / [`strata_quant::gemm`] / `dot_f32` of its (row, token) as [`matmul`] computes,
//! so results are bit-identical to one `matmul` per expert, for any tiling and worker count.
//!
//! [`matmul`]: crate::ops::linear::matmul

use std::ops::Range;

use crate::error::EngineError;
use crate::ops::linear::{ActRows, Matrix};
use crate::ops::moe::ExpertTensor;
use smallvec::SmallVec;

use crate::pool::{Blocks, Pool};

/// Weight bytes per task: with its tokens' activations a tile stays in a 1 MiB L2
/// (as `ops/linear.rs`).
const W_TILE_BYTES: usize = 192 << 10;
/// Tokens per task.
const TOK_TILE: usize = 64;

/// One task: rows `rows` of expert `expert` of input `input`, for group-order rows `toks`;
/// its `rows.len() · toks.len()` outputs are `at..` of the scratch tiles, right after the
/// previous task's.
#[derive(Clone, Debug)]
pub(super) struct Task {
    input: usize,
    expert: usize,
    rows: Range<usize>,
    toks: Range<usize>,
    at: usize,
}

impl Task {
    fn block(&self) -> Range<usize> {
        self.at..self.at + self.rows.len() * self.toks.len()
    }
}

/// Reusable buffers of [`grouped_matmul`].
#[derive(Default)]
pub(super) struct GroupedScratch {
    tasks: Vec<Task>,
    tiles: Vec<f32>,
}

/// Weight rows per task for a matrix of `rows` rows of `row_bytes`: about [`W_TILE_BYTES`],
/// evened out over the matrix, in multiples of 16 (whole cache lines of output).
fn row_tile(rows: usize, row_bytes: usize) -> usize {
    let n_tiles = (rows * row_bytes).div_ceil(W_TILE_BYTES).max(1);
    (rows.div_ceil(n_tiles).div_ceil(16) * 16).clamp(1, rows.max(1))
}

/// Tokens per task for a group of `n` rows: all of them up to 1.5 · [`TOK_TILE`].
fn tok_tile(n: usize) -> usize {
    if n <= TOK_TILE + TOK_TILE / 2 {
        n.max(1)
    } else {
        TOK_TILE
    }
}

/// For each input `(w, acts)` and each group `(e, span)`: `out[pos][r] = W_e[r] · acts[pos]`
/// for every group-order row `pos` in `span` and every row `r` of expert `e`, all inputs in
/// one run on `pool`.
///
/// `acts`: `[R][·]` in group order as [`ActRows`] for `w.all.ty`; `outs[i]`: `[R][w.rows()]`,
/// overwritten. Errors: a weight type without a kernel.
pub(super) fn grouped_matmul(
    pool: &Pool,
    inputs: &[(ExpertTensor<'_>, ActRows<'_>)],
    groups: &[(usize, Range<usize>)],
    outs: &mut [&mut [f32]],
    s: &mut GroupedScratch,
) -> Result<(), EngineError> {
    debug_assert_eq!(inputs.len(), outs.len());
    let n_pos = outs[0].len() / inputs[0].0.rows();
    s.tasks.clear();
    let mut size = 0;
    for (input, (w, _)) in inputs.iter().enumerate() {
        let rows = w.rows();
        let rt = row_tile(rows, w.all.row_bytes());
        for (expert, span) in groups {
            for r0 in (0..rows).step_by(rt) {
                // Token tiles innermost: consecutive tasks share a weight tile.
                for t0 in span.clone().step_by(tok_tile(span.len())) {
                    let rows = r0..(r0 + rt).min(rows);
                    let toks = t0..(t0 + tok_tile(span.len())).min(span.end);
                    let len = rows.len() * toks.len();
                    s.tasks.push(Task {
                        input,
                        expert: *expert,
                        rows,
                        toks,
                        at: size,
                    });
                    size += len;
                }
            }
        }
    }
    s.tiles.resize(size, 0.0);
    let tasks = &s.tasks;
    let blocks = Blocks::new(&mut s.tiles);
    // On the stack: decode allocates nothing (tests/decode_allocations.rs).
    let outs: SmallVec<[Blocks<'_, f32>; 2]> = outs.iter_mut().map(|o| Blocks::new(o)).collect();
    pool.try_run(tasks.len(), |i| {
        let t = &tasks[i];
        let (w, acts) = &inputs[t.input];
        // SAFETY: the pool runs each task index once, and task blocks are consecutive
        // (each starts where the previous one ends), so they never overlap.
        let block = unsafe { blocks.get(t.block()) };
        task(&w.expert(t.expert), *acts, n_pos, t, block)?;
        // Into the output while the block is in cache, on the task's own thread.
        let (stride, n) = (w.rows(), t.rows.len());
        for (src, pos) in block.chunks_exact(n).zip(t.toks.clone()) {
            let at = pos * stride + t.rows.start;
            // SAFETY: tasks cover disjoint (row, group-order row) pairs, so no two tasks take
            // overlapping ranges of one output.
            unsafe { outs[t.input].get(at..at + n) }.copy_from_slice(src);
        }
        Ok(())
    })
}

/// One task's `[toks][rows]` outputs into `out`, as [`crate::ops::linear::matmul`]'s tiles
/// compute them. `n_pos`: rows of `acts`.
fn task(
    w: &Matrix<'_>,
    acts: ActRows<'_>,
    n_pos: usize,
    t: &Task,
    out: &mut [f32],
) -> Result<(), EngineError> {
    let n = t.rows.len();
    match acts {
        ActRows::Quantized(data) => {
            let arb = data.len() / n_pos;
            let at = &data[t.toks.start * arb..t.toks.end * arb];
            let rb = w.row_bytes();
            let wt = &w.data[t.rows.start * rb..t.rows.end * rb];
            strata_quant::gemm(w.ty, wt, n, at, t.toks.len(), out, n)?;
        }
        ActRows::Float(data) => {
            let rb = w.row_bytes();
            let wt = &w.data[t.rows.start * rb..t.rows.end * rb];
            let xt = &data[t.toks.start * w.cols..t.toks.end * w.cols];
            strata_quant::gemm_f32(w.ty, wt, n, xt, w.cols, t.toks.len(), out, n)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_matrix_evenly_in_cache_line_multiples() {
        // 768 rows of 1152 bytes (Q4_K, 2048 wide): 4.5 tiles' worth -> 5 tiles of 160.
        assert_eq!(row_tile(768, 1152), 160);
        assert_eq!(row_tile(10, 8), 10);
        assert_eq!(tok_tile(1), 1);
        assert_eq!(tok_tile(96), 96);
        assert_eq!(tok_tile(97), 64);
    }
}
