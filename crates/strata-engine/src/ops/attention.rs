//! Causal multi-head attention with grouped KV heads over a [`LayerKv`] cache, with an
//! optional sliding window (Vaswani et al. 2017; GQA: Ainslie et al. 2023).

use std::cell::RefCell;

use rayon::prelude::*;

use crate::kv_cache::LayerKv;

/// Shape and masking of one attention layer.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax (usually 1/√head_dim).
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at positions > p − window
    /// (llama.cpp `LLAMA_SWA_TYPE_STANDARD`); `None` = full causal attention.
    pub window: Option<usize>,
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, whose keys/values for those positions are already written.
///
/// `q`: `[T][n_head·head_dim]`; `out`: same shape. Work is split over (token, head) pairs.
/// With an f16 cache the query and the softmax weights are rounded to f16 before their
/// products, as ggml's `mul_mat` does when its weight operand is f16 (llama.cpp without
/// flash attention), so scores agree with llama.cpp's.
pub fn attention(q: &[f32], kv: &LayerKv, pos0: usize, s: &AttnShape, out: &mut [f32]) {
    let hd = s.head_dim;
    let group = s.n_head / s.n_kv_head;
    out.par_chunks_mut(hd).enumerate().for_each(|(i, o)| {
        let (t, h) = (i / s.n_head, i % s.n_head);
        let pos = pos0 + t;
        let first = match s.window {
            Some(w) => (pos + 1).saturating_sub(w),
            None => 0,
        };
        let kv_off = (h / group) * hd;
        let f16 = kv.is_f16();
        SCRATCH.with(|cell| {
            let mut buf = cell.borrow_mut();
            let n = pos + 1 - first;
            buf.resize(n + 2 * hd, 0.0);
            let (scores, rest) = buf.split_at_mut(n);
            let (row, qh) = rest.split_at_mut(hd);
            qh.copy_from_slice(&q[i * hd..(i + 1) * hd]);
            if f16 {
                qh.iter_mut().for_each(|v| *v = round_f16(*v));
            }
            let mut max = f32::NEG_INFINITY;
            for (j, sc) in scores.iter_mut().enumerate() {
                kv.read_k(first + j, kv_off, row);
                *sc = super::dot(qh, row) * s.scale;
                max = max.max(*sc);
            }
            let mut sum = 0.0f32;
            for sc in scores.iter_mut() {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            o.fill(0.0);
            for (j, sc) in scores.iter().enumerate() {
                kv.read_v(first + j, kv_off, row);
                let w = if f16 { round_f16(*sc / sum) } else { *sc / sum };
                super::axpy(w, row, o);
            }
        });
    });
}

#[inline]
fn round_f16(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::{KvCache, KvType};

    /// Naive reference: softmax over all visible keys, computed in f64.
    fn reference(
        q: &[f32],
        ks: &[Vec<f32>],
        vs: &[Vec<f32>],
        scale: f32,
        first: usize,
    ) -> Vec<f32> {
        let n = ks.len();
        let s: Vec<f64> = (first..n)
            .map(|j| {
                q.iter()
                    .zip(&ks[j])
                    .map(|(a, b)| (*a * *b) as f64)
                    .sum::<f64>()
                    * scale as f64
            })
            .collect();
        let m = s.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        let mut o = vec![0.0f64; q.len()];
        for (w, j) in e.iter().zip(first..n) {
            for d in 0..q.len() {
                o[d] += w / z * vs[j][d] as f64;
            }
        }
        o.into_iter().map(|x| x as f32).collect()
    }

    #[test]
    fn gqa_and_window_match_naive_reference() {
        let (hd, n_head, n_kv) = (4, 4, 2);
        let mut cache = KvCache::new(1, 8, n_kv * hd, KvType::F32);
        let val = |p: usize, i: usize| ((p * 7 + i * 3) as f32 * 0.13).sin();
        let mut keys = vec![vec![]; n_kv];
        let mut vals = vec![vec![]; n_kv];
        for p in 0..6 {
            let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
            let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 11, i)).collect();
            cache.layers[0].write(p, &k, &v);
            for g in 0..n_kv {
                keys[g].push(k[g * hd..(g + 1) * hd].to_vec());
                vals[g].push(v[g * hd..(g + 1) * hd].to_vec());
            }
        }
        for window in [None, Some(3)] {
            let shape = AttnShape {
                n_head,
                n_kv_head: n_kv,
                head_dim: hd,
                scale: 0.5,
                window,
            };
            // two queries at positions 4 and 5
            let q: Vec<f32> = (0..2 * n_head * hd)
                .map(|i| (i as f32 * 0.7).cos())
                .collect();
            let mut out = vec![0.0; q.len()];
            attention(&q, &cache.layers[0], 4, &shape, &mut out);
            for t in 0..2 {
                let pos: usize = 4 + t;
                let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                for h in 0..n_head {
                    let g = h / 2;
                    let qi = &q[(t * n_head + h) * hd..][..hd];
                    let r = reference(qi, &keys[g][..=pos], &vals[g][..=pos], 0.5, first);
                    let got = &out[(t * n_head + h) * hd..][..hd];
                    for d in 0..hd {
                        assert!((r[d] - got[d]).abs() < 1e-5, "{window:?} t{t} h{h}");
                    }
                }
            }
        }
    }
}
