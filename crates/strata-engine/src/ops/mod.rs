//! The CPU kernels behind [`crate::backend::Cpu`]: each works on f32 activations laid out
//! `[T][dim]` (T = tokens in the batch, row-major) on the worker pool it is given, and none
//! allocates per call in the decode path.

pub mod activation;
pub mod attention;
pub mod conv1d;
pub mod delta_net;
pub mod exp;
pub mod gate;
pub mod hyper;
pub mod linear;
pub mod moe;
pub mod norm;
pub mod ple;
pub mod qsa;
pub mod rope;

use std::ops::Range;

use crate::pool::{Pool, Tiles};

/// Fewest elements worth a pool task of an element-wise op: below this, waking a worker costs
/// more than the work it takes over (one decode token stays on the calling thread).
const MIN_TASK_ELEMS: usize = 16 << 10;
/// Tasks per worker of an element-wise op (balance against a core slowed by another process).
const TASKS_PER_WORKER: usize = 4;

/// Runs `f(range, &mut x[range])` over consecutive chunks of `x` on `pool`, each a
/// multiple of `unit` elements (a row; `x.len()` must be a multiple of it). For element-wise
/// and row-wise ops: each element depends only on its own chunk, so the result does not depend
/// on the chunking or the worker count.
pub fn par_chunks(
    pool: &Pool,
    x: &mut [f32],
    unit: usize,
    f: impl Fn(Range<usize>, &mut [f32]) + Sync,
) {
    let n = x.len();
    if n == 0 {
        return;
    }
    debug_assert_eq!(n % unit, 0);
    let units = n / unit;
    {
        let p = pool;
        let by_size = MIN_TASK_ELEMS.div_ceil(unit);
        let by_balance = units.div_ceil(TASKS_PER_WORKER * p.workers());
        let chunk = by_size.max(by_balance).min(units) * unit;
        if chunk >= n {
            return f(0..n, x);
        }
        // One row of `n` columns cut into column tiles of `chunk` elements.
        let tiles = Tiles::new(x, n, chunk, 1);
        let _ = p.for_each_tile(tiles, |tile| {
            f(tile.cols.clone(), tile.row_mut(0));
            Ok::<(), ()>(())
        });
    }
}

/// Dot product of two equal-length f32 slices.
///
/// Sixteen independent accumulators let the compiler vectorise the loop without
/// reassociating a single sum (which it may not do for floats).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    const L: usize = 16;
    let mut acc = [0.0f32; L];
    let (ac, ar) = a.split_at(a.len() - a.len() % L);
    let (bc, br) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(L).zip(bc.chunks_exact(L)) {
        for i in 0..L {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ar.iter().zip(br) {
        tail += x * y;
    }
    acc.iter().sum::<f32>() + tail
}

/// `y += a * x` over equal-length slices.
#[inline]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// Elementwise `a += b` (residual connections), in parallel chunks when long.
pub fn add_in_place(pool: &Pool, a: &mut [f32], b: &[f32]) {
    debug_assert_eq!(a.len(), b.len());
    par_chunks(pool, a, 1, |r, a| {
        for (x, y) in a.iter_mut().zip(&b[r]) {
            *x += y;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_on_odd_lengths() {
        for n in [0, 1, 7, 16, 33, 100] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64) * (*y as f64))
                .sum();
            assert!((dot(&a, &b) as f64 - naive).abs() < 1e-4, "n={n}");
        }
    }
}
