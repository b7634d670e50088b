//! Short causal depthwise convolution over time with a rolling state: the input mixer of a
//! Gated DeltaNet (and Mamba) layer.
//!
//! Source: ggml `ggml_ssm_conv` (`ggml-cpu/ops.cpp`, `ggml_compute_forward_ssm_conv_f32`) with
//! the state handling of llama.cpp `llm_build_delta_net_base::build_conv_state`.

use super::par_chunks;
use crate::pool::Pool;

/// `out[t][c] = Σ_{i<K} in[t+i][c] · w[c][i]`, where `in` is the `K − 1` saved rows of `state`
/// followed by the T rows of `x`; afterwards `state` holds the last `K − 1` rows of `in`.
///
/// Shapes: `x`, `out`: `[T][C]`; `w`: `[C][K]` (ggml `ne = [K, C]`); `state`: `[K − 1][C]`,
/// oldest row first (so C = `w.len() − state.len()`). Each sum runs over `i` in order in
/// f32, as ggml does. Groups of output rows run in parallel on `pool`.
pub fn causal_conv1d(pool: &Pool, x: &[f32], w: &[f32], state: &mut [f32], out: &mut [f32]) {
    let c_n = w.len() - state.len();
    dilated_causal_conv1d(pool, x, w, w.len() / c_n, 1, state, out);
}

/// Rows of `x` from which [`dilated_causal_conv1d`] transposes its taps first (a decode step
/// reads them in place and allocates nothing).
const TRANSPOSE_FROM_ROWS: usize = 8;

/// [`causal_conv1d`] with its `k` taps `dilation` rows apart:
/// `out[t][c] = Σ_{i<K} in[t + i·dilation][c] · w[c][i]`, where `in` is the
/// `(K − 1)·dilation` saved rows of `state` followed by the rows of `x`; afterwards `state`
/// holds the last `(K − 1)·dilation` rows of `in` (PLE's convolution, dilation = n-gram size).
pub fn dilated_causal_conv1d(
    pool: &Pool,
    x: &[f32],
    w: &[f32],
    k: usize,
    dilation: usize,
    state: &mut [f32],
    out: &mut [f32],
) {
    let c_n = w.len() / k;
    let keep = (k - 1) * dilation;
    debug_assert_eq!(state.len(), keep * c_n);
    let t_n = x.len() / c_n;
    debug_assert_eq!(out.len(), x.len());
    let saved = &*state;
    // Past a few rows the taps are transposed to `[K][C]` once, so the inner loop reads them
    // contiguously (vectorized) instead of `K` apart; the products and sums are the same.
    let taps: Option<Vec<f32>> = (t_n >= TRANSPOSE_FROM_ROWS).then(|| {
        (0..k)
            .flat_map(|i| w.chunks_exact(k).map(move |wc| wc[i]))
            .collect()
    });
    par_chunks(pool, out, c_n, |rows, out| {
        for (t, o) in (rows.start / c_n..).zip(out.chunks_exact_mut(c_n)) {
            // Row by row of `in`, so every sum still adds its terms in order of i.
            o.fill(0.0);
            for i in 0..k {
                let row = t + i * dilation;
                let src = if row < keep {
                    &saved[row * c_n..(row + 1) * c_n]
                } else {
                    &x[(row - keep) * c_n..(row - keep + 1) * c_n]
                };
                match &taps {
                    Some(taps) => {
                        let wi = &taps[i * c_n..(i + 1) * c_n];
                        for ((oc, v), wc) in o.iter_mut().zip(src).zip(wi) {
                            *oc += v * wc;
                        }
                    }
                    None => {
                        for ((oc, v), wc) in o.iter_mut().zip(src).zip(w.chunks_exact(k)) {
                            *oc += v * wc[i];
                        }
                    }
                }
            }
        }
    });
    // New state: rows t_n .. t_n + keep of `in`.
    if t_n >= keep {
        state.copy_from_slice(&x[(t_n - keep) * c_n..]);
    } else {
        state.copy_within(t_n * c_n.., 0);
        let from = (keep - t_n) * c_n;
        state[from..].copy_from_slice(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_equals_token_by_token_and_matches_the_formula() {
        // 12 rows: the batch reads transposed taps, the single tokens the taps in place.
        let (c_n, k, t_n) = (3, 4, 12);
        assert!(t_n >= TRANSPOSE_FROM_ROWS);
        let w: Vec<f32> = (0..c_n * k).map(|i| (i as f32 * 0.7).sin()).collect();
        let x: Vec<f32> = (0..t_n * c_n).map(|i| (i as f32 * 0.3).cos()).collect();
        let mut state = vec![0.0; (k - 1) * c_n];
        let mut out = vec![0.0; x.len()];
        causal_conv1d(crate::pool::global(), &x, &w, &mut state, &mut out);
        // Formula with zero history.
        for t in 0..t_n {
            for c in 0..c_n {
                let mut want = 0.0;
                for i in 0..k {
                    let src = t as isize + i as isize - (k as isize - 1);
                    if src >= 0 {
                        want += x[src as usize * c_n + c] * w[c * k + i];
                    }
                }
                assert!((out[t * c_n + c] - want).abs() < 1e-6, "t{t} c{c}");
            }
        }
        assert_eq!(state, x[(t_n - (k - 1)) * c_n..]);
        // One token at a time gives the same outputs and state.
        let mut s1 = vec![0.0; (k - 1) * c_n];
        let mut o1 = vec![0.0; c_n];
        for t in 0..t_n {
            causal_conv1d(
                crate::pool::global(),
                &x[t * c_n..(t + 1) * c_n],
                &w,
                &mut s1,
                &mut o1,
            );
            assert_eq!(o1, out[t * c_n..(t + 1) * c_n]);
        }
        assert_eq!(s1, state);
    }

    #[test]
    fn output_is_bit_identical_for_any_worker_count() {
        use crate::pool::{Pool, PoolOptions};
        // 300 rows of 256 channels: several pool tasks.
        let (c_n, k, t_n) = (256, 4, 300);
        let w: Vec<f32> = (0..c_n * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let x: Vec<f32> = (0..t_n * c_n).map(|i| (i as f32 * 0.11).cos()).collect();
        let run = |workers: usize| {
            let pool = Pool::new(PoolOptions {
                workers,
                ..PoolOptions::default()
            });
            let mut state: Vec<f32> = (0..(k - 1) * c_n).map(|i| i as f32 * 1e-3).collect();
            let mut out = vec![0.0; x.len()];
            pool.install(|| causal_conv1d(crate::pool::global(), &x, &w, &mut state, &mut out));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (bits(&out), bits(&state))
        };
        let want = run(1);
        assert!(run(2) == want && run(3) == want);
    }

    #[test]
    fn dilated_taps_reach_back_across_calls() {
        let (c_n, k, dil, t_n) = (2, 3, 3, 11);
        let w: Vec<f32> = (0..c_n * k).map(|i| 0.5 + i as f32).collect();
        let x: Vec<f32> = (0..t_n * c_n).map(|i| (i as f32 * 0.9).sin()).collect();
        let formula = |t: usize, c: usize| -> f32 {
            let mut want = 0.0;
            for i in 0..k {
                let back = (k - 1 - i) * dil;
                if t >= back {
                    want += x[(t - back) * c_n + c] * w[c * k + i];
                }
            }
            want
        };
        let mut state = vec![0.0; (k - 1) * dil * c_n];
        let mut out = vec![0.0; c_n];
        for t in 0..t_n {
            let xt = &x[t * c_n..(t + 1) * c_n];
            dilated_causal_conv1d(crate::pool::global(), xt, &w, k, dil, &mut state, &mut out);
            for (c, o) in out.iter().enumerate() {
                assert!((o - formula(t, c)).abs() < 1e-6, "t{t} c{c}");
            }
        }
        let mut s2 = vec![0.0; (k - 1) * dil * c_n];
        let mut all = vec![0.0; x.len()];
        dilated_causal_conv1d(crate::pool::global(), &x, &w, k, dil, &mut s2, &mut all);
        assert_eq!(
            s2, state,
            "one call and one token at a time leave the same state"
        );
        assert!((all[(t_n - 1) * c_n] - out[0]).abs() == 0.0);
    }
}
