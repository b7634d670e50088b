//! The gate of a PLE injection (`qwen4exp`): each residual stream scores the hashed n-gram
//! embedding's key against its own normed state, and takes the embedding's value scaled by a
//! sigmoid of the signed square root of that score.
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextPLELayer.forward` (llama.cpp
//! `src/models/qwen4exp.cpp`, `build_ple`).

use super::gate::sigmoid;
use super::{dot, par_chunks};
use crate::pool::Pool;

/// Smallest |score| under the square root (keeps the gate's gradient finite in training).
const MIN_SCORE: f32 = 1e-6;

/// `out[t][s] = σ(sign(σₛ)·√max(|σₛ|, 1e-6)) · val[t]` with `σₛ = key[t][s] · qry[t][s] / √d`
/// for every stream `s`. `key`, `qry`, `out`: `[T][hc·d]` (stream-major); `val`: `[T][d]`.
pub fn ple_gate(
    pool: &Pool,
    key: &[f32],
    qry: &[f32],
    val: &[f32],
    hc: usize,
    d: usize,
    out: &mut [f32],
) {
    debug_assert_eq!(out.len(), hc * val.len());
    let inv_sqrt_d = 1.0 / (d as f32).sqrt();
    par_chunks(pool, out, hc * d, |r, out| {
        let t0 = r.start / (hc * d);
        for (t, o) in out.chunks_exact_mut(hc * d).enumerate() {
            let at = (t0 + t) * hc * d;
            let v = &val[(t0 + t) * d..(t0 + t + 1) * d];
            for (s, os) in o.chunks_exact_mut(d).enumerate() {
                let span = at + s * d..at + (s + 1) * d;
                let score = dot(&key[span.clone()], &qry[span]) * inv_sqrt_d;
                // sign(0) = 0, as torch.sign: a zero score gates at exactly ½.
                let sign = if score == 0.0 { 0.0 } else { score.signum() };
                let gate = sigmoid(sign * score.abs().max(MIN_SCORE).sqrt());
                for (oi, vi) in os.iter_mut().zip(v) {
                    *oi = gate * vi;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_follows_the_signed_root_of_each_streams_score() {
        let (hc, d) = (2, 4);
        // Stream 0 agrees with its key (score +4/2 = 2), stream 1 opposes it (−2).
        let key = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let qry = [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0];
        let val = [1.0, 2.0, 3.0, 4.0];
        let mut out = [0.0; 8];
        ple_gate(crate::pool::global(), &key, &qry, &val, hc, d, &mut out);
        let g0 = sigmoid(2f32.sqrt());
        let g1 = sigmoid(-(2f32.sqrt()));
        assert_eq!(out[..4], val.map(|v| g0 * v));
        assert_eq!(out[4..], val.map(|v| g1 * v));
    }
}
