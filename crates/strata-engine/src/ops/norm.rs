//! RMS normalisation (Zhang & Sennrich, "Root Mean Square Layer Normalization", 2019).

use super::exp::{vectorized, VectorBody};
use super::par_chunks;
use crate::pool::Pool;

/// `out = x / sqrt(mean(x²) + eps) * weight` for one row; `x`, `weight`, `out` have equal length.
/// The sum of squares is accumulated in f64, as ggml's `ggml_compute_forward_rms_norm` does
/// (in the order of `sum_f64`, a crate-private helper).
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    vectorized(|| {
        for ((o, xi), w) in out.iter_mut().zip(x).zip(weight) {
            *o = xi * scale * w;
        }
    })
}

/// Partial sums of [`sum_f64`].
const SUM_LANES: usize = 32;

/// `Σ term(x[i])` in f64: element `i` goes into partial sum `i mod 32`, and the partial sums
/// are then added pairwise (halving: `s[i] += s[i + n]` for n = 16, 8, 4, 2, 1). A fixed order
/// for a given length, so the same bits on every path and in every call; the 32 independent
/// chains run as vector adds where one chain of dependent f64 adds costs four cycles an element
/// (a 10240-wide hyper-connection row: ~40 000 cycles). [`vectorized`] as a [`LaneSums`]: as a
/// closure the body stayed out of line and ran as SSE2 (perf: 2.2 % of qwen4exp's prefill
/// against 0.8 %).
pub(crate) fn sum_f64<F: Fn(f32) -> f64>(x: &[f32], term: F) -> f64 {
    vectorized(LaneSums { x, term })
}

/// [`sum_f64`]'s body.
struct LaneSums<'a, F> {
    x: &'a [f32],
    term: F,
}

impl<F: Fn(f32) -> f64> VectorBody for LaneSums<'_, F> {
    type Out = f64;
    #[inline(always)]
    fn run(self) -> f64 {
        let (x, term) = (self.x, self.term);
        let mut s = [0.0f64; SUM_LANES];
        let mut chunks = x.chunks_exact(SUM_LANES);
        for c in &mut chunks {
            for (a, v) in s.iter_mut().zip(c) {
                *a += term(*v);
            }
        }
        for (a, v) in s.iter_mut().zip(chunks.remainder()) {
            *a += term(*v);
        }
        let mut n = SUM_LANES;
        while n > 1 {
            n /= 2;
            for i in 0..n {
                s[i] += s[i + n];
            }
        }
        s[0]
    }
}

/// In-place RMS norm of every `weight.len()`-sized chunk of `x` (per-head q/k norms, or
/// every token row of a `[T][dim]` buffer); groups of rows run in parallel on `pool`.
pub fn rms_norm_rows_in_place(pool: &Pool, x: &mut [f32], weight: &[f32], eps: f32) {
    par_chunks(pool, x, weight.len(), |_, x| {
        for row in x.chunks_exact_mut(weight.len()) {
            let scale = rms_scale(row, eps);
            vectorized(|| {
                for (xi, w) in row.iter_mut().zip(weight) {
                    *xi = *xi * scale * w;
                }
            })
        }
    });
}

/// Row-wise [`rms_norm`] over `[T][dim]` buffers; groups of rows run in parallel on `pool`.
pub fn rms_norm_rows(pool: &Pool, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    par_chunks(pool, out, d, |r, out| {
        for (xr, or) in x[r].chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            rms_norm(xr, weight, eps, or);
        }
    });
}

/// Grouped RMS norm over `[T][w.len()]` buffers: every `group`-wide piece of a row is
/// normed on its own, then the whole row is multiplied by `w` (one weight per element; a
/// hyper-connection row normed per stream). Groups of rows run in parallel on `pool`.
pub fn rms_norm_groups(pool: &Pool, x: &[f32], w: &[f32], group: usize, eps: f32, out: &mut [f32]) {
    let d = w.len();
    debug_assert_eq!(d % group, 0);
    par_chunks(pool, out, d, |r, out| {
        for (xr, or) in x[r].chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let pieces = xr.chunks_exact(group).zip(or.chunks_exact_mut(group));
            for ((xg, og), wg) in pieces.zip(w.chunks_exact(group)) {
                rms_norm(xg, wg, eps, og);
            }
        }
    });
}

fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum = sum_f64(x, |v| (v as f64) * (v as f64));
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_gives_unit_rms() {
        let x = [3.0f32, -4.0, 0.0, 5.0];
        let mut out = [0.0f32; 4];
        rms_norm(&x, &[1.0; 4], 0.0, &mut out);
        let rms: f32 = (out.iter().map(|v| v * v).sum::<f32>() / 4.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-6);
        let mut y = x;
        rms_norm_rows_in_place(crate::pool::global(), &mut y, &[1.0, 2.0], 0.0);
        assert!((y[0] - 3.0 / 12.5f32.sqrt()).abs() < 1e-6);
        assert!((y[3] - 2.0 * 5.0 / 12.5f32.sqrt()).abs() < 1e-6);
        // Two groups of two, each normed on its own, then one weight per element.
        let mut g = [0.0f32; 4];
        rms_norm_groups(
            crate::pool::global(),
            &x,
            &[1.0, 1.0, 1.0, 2.0],
            2,
            0.0,
            &mut g,
        );
        let a = 1.0 / 12.5f32.sqrt(); // both groups have mean square 12.5
        assert!((g[0] - 3.0 * a).abs() < 1e-6 && (g[1] + 4.0 * a).abs() < 1e-6);
        assert!(g[2] == 0.0 && (g[3] - 10.0 * a).abs() < 1e-6);
    }

    #[test]
    fn sum_f64_adds_in_its_stated_order() {
        for n in [0, 1, 31, 32, 33, 100, 10240] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
            let got = sum_f64(&x, |v| (v as f64) * (v as f64));
            // The order the docs state, written out plainly.
            let mut s = [0.0f64; 32];
            for (i, v) in x.iter().enumerate() {
                s[i % 32] += (*v as f64) * (*v as f64);
            }
            for half in [16, 8, 4, 2, 1] {
                for i in 0..half {
                    s[i] += s[i + half];
                }
            }
            assert_eq!(got.to_bits(), s[0].to_bits(), "n={n}");
            let naive: f64 = x.iter().map(|v| (*v as f64) * (*v as f64)).sum();
            assert!((got - naive).abs() <= 1e-12 * naive.max(1.0), "n={n}");
        }
    }
}
