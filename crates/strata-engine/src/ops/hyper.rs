//! The element-wise halves of a hyper-connection (`qwen4exp`): collapsing the `hc` normed
//! residual streams into one hidden row through sigmoid gates, and adding a block's output
//! back into every stream with its own injection weight.
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextGatedResidual.forward`
//! (llama.cpp `src/models/qwen4exp.cpp`, `build_hc_mix`, `build_hc_combine`).

use super::exp::vectorized;
use super::gate::sigmoid;
use super::par_chunks;
use crate::pool::Pool;

/// `out[t] = (1/hc) · Σ_s σ(g[t][s]) ⊙ rn[t][s]`: the mean over the `hc` streams of the gated,
/// normed streams. `rn`, `g`: `[T][hc·d]` (stream-major); `out`: `[T][d]`. The streams are
/// added in order, then scaled.
pub fn hc_collapse(pool: &Pool, rn: &[f32], g: &[f32], hc: usize, d: usize, out: &mut [f32]) {
    debug_assert_eq!(rn.len(), hc * out.len());
    let inv = 1.0 / hc as f32;
    par_chunks(pool, out, d, |r, out| {
        let t0 = r.start / d;
        for (t, o) in out.chunks_exact_mut(d).enumerate() {
            let at = (t0 + t) * hc * d;
            let (rn, g) = (&rn[at..at + hc * d], &g[at..at + hc * d]);
            o.fill(0.0);
            for (rs, gs) in rn.chunks_exact(d).zip(g.chunks_exact(d)) {
                vectorized(|| {
                    for ((oi, x), gi) in o.iter_mut().zip(rs).zip(gs) {
                        *oi += sigmoid(*gi) * x;
                    }
                });
            }
            o.iter_mut().for_each(|v| *v *= inv);
        }
    });
}

/// `r[t][s] += 2·σ(inj[t][s] / hc) · y[t]` for every stream `s`: a block's output added to
/// every residual stream with its own weight (weight 1 for a zero logit: a plain residual
/// add). `r`: `[T][hc·d]`; `y`: `[T][d]`; `inj`: `[T][hc]` injection logits.
pub fn hc_expand_add(pool: &Pool, r: &mut [f32], y: &[f32], inj: &[f32], hc: usize) {
    let t_n = inj.len() / hc;
    if t_n == 0 {
        return;
    }
    let d = y.len() / t_n;
    par_chunks(pool, r, hc * d, |range, r| {
        let t0 = range.start / (hc * d);
        for (t, rt) in r.chunks_exact_mut(hc * d).enumerate() {
            let yt = &y[(t0 + t) * d..(t0 + t + 1) * d];
            for (s, rs) in rt.chunks_exact_mut(d).enumerate() {
                let w = 2.0 * sigmoid(inj[(t0 + t) * hc + s] / hc as f32);
                for (ri, yi) in rs.iter_mut().zip(yt) {
                    *ri += w * yi;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_is_the_gated_mean_and_a_zero_injection_adds_plainly() {
        let pool = crate::pool::global();
        let (hc, d) = (2, 3);
        let rn = [1.0, 2.0, 3.0, 5.0, 6.0, 7.0];
        let g = [0.0; 6];
        let mut out = [0.0; 3];
        hc_collapse(pool, &rn, &g, hc, d, &mut out);
        assert_eq!(out, [1.5, 2.0, 2.5], "σ(0) = 1/2 on both, then the mean");
        let mut r = rn;
        hc_expand_add(pool, &mut r, &[1.0, 1.0, 1.0], &[0.0, 0.0], hc);
        assert_eq!(r, [2.0, 3.0, 4.0, 6.0, 7.0, 8.0]);
    }
}
