//! Causal multi-head attention with grouped KV heads over a [`LayerKv`] cache, with an
//! optional sliding window (Vaswani et al. 2017; GQA: Ainslie et al. 2023).
//!
//! Computed like FlashAttention (Dao et al. 2022), on the CPU: keys are visited in tiles of
//! [`K_TILE`] positions with an online softmax (running max and sum per query), so no
//! `T × n` score matrix exists, and a tile of K/V is converted from the cache to f32 once for
//! all queries of its KV head in a block of [`Q_BLOCK`] tokens. Tasks are (KV head, query
//! block); a batch of one block (decode) also splits the keys in chunks of [`KEY_SPLIT`]
//! whose partial softmaxes are merged at the end (flash-decoding). Tile and chunk edges are
//! fixed positions, so results do not depend on the worker count.

use std::cell::RefCell;
use std::ops::Range;

use crate::kv_cache::{KvRows, LayerKv};
use crate::pool::{self, Tile, Tiles};

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

/// Keys converted and scored together.
pub const K_TILE: usize = 64;
/// Query tokens per task.
pub const Q_BLOCK: usize = 16;
/// Keys per task when the whole batch is one query block (a multiple of [`K_TILE`]).
pub const KEY_SPLIT: usize = 256;
/// Tasks with fewer queries than this score keys one dot product at a time instead of
/// through a transposed key tile.
const BY_ROWS_BELOW: usize = 8;

/// Per-thread buffers of one task.
#[derive(Default)]
struct Scratch {
    /// Queries `[n_q][hd]` (rounded to f16 with an f16 cache).
    q: Vec<f32>,
    /// Unnormalised outputs `[n_q][hd]`, running max `[n_q]` and running sum `[n_q]`.
    o: Vec<f32>,
    m: Vec<f32>,
    l: Vec<f32>,
    /// Key tile transposed `[hd][K_TILE]`, value tile `[K_TILE][hd]`, key rows `[n][hd]`.
    kt: Vec<f32>,
    v: Vec<f32>,
    krow: Vec<f32>,
    /// Scores of one query against the tile.
    sc: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// Partial results `[T][split][head][m, l, o…]` of a split batch (caller thread).
    static PARTIALS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, whose keys/values for those positions are already written.
///
/// `q`: `[T][n_head·head_dim]`; `out`: same shape. With an f16 cache the query is rounded to
/// f16 before its products with the keys, as ggml's `mul_mat` does when its weight operand is
/// f16 (llama.cpp), so scores agree with llama.cpp's.
pub fn attention(q: &[f32], kv: &LayerKv, pos0: usize, s: &AttnShape, out: &mut [f32]) {
    let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
    let width = s.n_head * hd;
    let t_n = q.len() / width;
    if t_n == 0 {
        return;
    }
    let n_keys = pos0 + t_n;
    let n_splits = if t_n <= Q_BLOCK {
        n_keys.div_ceil(KEY_SPLIT)
    } else {
        1
    };
    pool::with_current(|pool| {
        let r = if n_splits <= 1 {
            let tiles = Tiles::new(out, width, group * hd, Q_BLOCK);
            pool.for_each_tile(tiles, |tile| {
                let g = tile.cols.start / (group * hd);
                with_scratch(|sc| {
                    sc.attend(q, kv, pos0, s, g, tile.rows.clone(), 0..n_keys);
                    sc.write_normalized(tile, group, hd);
                });
                Ok::<(), ()>(())
            })
        } else {
            PARTIALS.with(|cell| {
                let mut part = cell.borrow_mut();
                let cell_w = hd + 2;
                part.resize(t_n * n_splits * s.n_head * cell_w, 0.0);
                let tiles =
                    Tiles::new(&mut part, n_splits * s.n_head * cell_w, group * cell_w, t_n);
                let r = pool.for_each_tile(tiles, |tile| {
                    let c = tile.cols.start / (group * cell_w);
                    let (split, g) = (c / s.n_kv_head, c % s.n_kv_head);
                    let keys = split * KEY_SPLIT..((split + 1) * KEY_SPLIT).min(n_keys);
                    with_scratch(|sc| {
                        sc.attend(q, kv, pos0, s, g, tile.rows.clone(), keys);
                        sc.write_partial(tile, group, hd);
                    });
                    Ok::<(), ()>(())
                });
                merge_splits(&part, n_splits, s, out);
                r
            })
        };
        r.expect("attention tasks do not fail");
    });
}

fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| f(&mut cell.borrow_mut()))
}

/// Combines the per-split `(m, l, o)` of every (token, head) into `out`, splits in order.
fn merge_splits(part: &[f32], n_splits: usize, s: &AttnShape, out: &mut [f32]) {
    let hd = s.head_dim;
    let cell_w = hd + 2;
    for (t, o_t) in out.chunks_exact_mut(s.n_head * hd).enumerate() {
        let p_t = &part[t * n_splits * s.n_head * cell_w..][..n_splits * s.n_head * cell_w];
        for (h, o) in o_t.chunks_exact_mut(hd).enumerate() {
            let cell = |sp: usize| &p_t[(sp * s.n_head + h) * cell_w..][..cell_w];
            let m = (0..n_splits)
                .map(|sp| cell(sp)[0])
                .fold(f32::NEG_INFINITY, f32::max);
            o.fill(0.0);
            let mut l = 0.0f32;
            for sp in 0..n_splits {
                let c = cell(sp);
                if c[1] == 0.0 {
                    continue; // no visible key in this split
                }
                let w = (c[0] - m).exp();
                l += c[1] * w;
                super::axpy(w, &c[2..], o);
            }
            let inv = 1.0 / l;
            o.iter_mut().for_each(|v| *v *= inv);
        }
    }
}

impl Scratch {
    /// Online softmax of the queries of KV head `g` (its `group` query heads) at tokens
    /// `toks` over the visible keys within `keys`; leaves `o`, `m`, `l` per query
    /// (index `(t − toks.start)·group + head in group`).
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        q: &[f32],
        kv: &LayerKv,
        pos0: usize,
        s: &AttnShape,
        g: usize,
        toks: Range<usize>,
        keys: Range<usize>,
    ) {
        let job = Job {
            q,
            k: kv.k_rows(),
            v: kv.v_rows(),
            row: kv.row_len(),
            pos0,
            s,
            g,
            toks,
            keys,
        };
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: this CPU has AVX-512F (checked just above).
                return unsafe { self.attend_avx512(&job) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: this CPU has AVX2 (checked just above).
                return unsafe { self.attend_avx2(&job) };
            }
        }
        self.attend_any(&job)
    }

    /// [`Scratch::attend_any`] compiled for AVX-512F: same operations in the same order
    /// (no FMA contraction, no reassociation), so the same bits as the other paths.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn attend_avx512(&mut self, job: &Job<'_>) {
        self.attend_any(job)
    }

    /// [`Scratch::attend_any`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn attend_avx2(&mut self, job: &Job<'_>) {
        self.attend_any(job)
    }

    #[inline(always)]
    fn attend_any(&mut self, job: &Job<'_>) {
        let s = job.s;
        let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
        let (toks, pos0) = (job.toks.clone(), job.pos0);
        let n_q = toks.len() * group;
        let f16 = matches!(job.k, KvRows::F16(_));
        self.q.clear();
        for t in toks.clone() {
            let qt = &job.q[(t * s.n_head + job.g * group) * hd..][..group * hd];
            if f16 {
                self.q.extend(qt.iter().map(|v| round_f16(*v)));
            } else {
                self.q.extend_from_slice(qt);
            }
        }
        self.o.clear();
        self.o.resize(n_q * hd, 0.0);
        self.m.clear();
        self.m.resize(n_q, f32::NEG_INFINITY);
        self.l.clear();
        self.l.resize(n_q, 0.0);
        self.kt.resize(hd * K_TILE, 0.0);
        self.v.resize(K_TILE * hd, 0.0);
        self.krow.resize(K_TILE * hd, 0.0);
        self.sc.resize(K_TILE, 0.0);
        // Few queries (decode): a dot per key beats transposing the key tile.
        let by_rows = n_q < BY_ROWS_BELOW;
        // Keys visible to token t: first(t) .. pos0 + t + 1; both ends grow with t.
        let first = |t: usize| match s.window {
            Some(w) => (pos0 + t + 1).saturating_sub(w),
            None => 0,
        };
        let lo = job.keys.start.max(first(toks.start));
        let hi = job.keys.end.min(pos0 + toks.end);
        let mut tile0 = lo / K_TILE * K_TILE;
        while tile0 < hi {
            let (a, b) = (lo.max(tile0), hi.min(tile0 + K_TILE));
            self.load_tile(job, tile0, a..b, !by_rows);
            for t in toks.clone() {
                let (ja, jb) = (a.max(first(t)), b.min(pos0 + t + 1));
                if ja >= jb {
                    continue;
                }
                for h in 0..group {
                    let qi = (t - toks.start) * group + h;
                    self.update(qi, hd, s.scale, ja - tile0..jb - tile0, by_rows);
                }
            }
            tile0 += K_TILE;
        }
    }

    /// Converts keys (transposed into `kt`) and values of positions `range` (inside the tile
    /// at `tile0`) to f32.
    #[inline(always)]
    fn load_tile(&mut self, job: &Job<'_>, tile0: usize, range: Range<usize>, transpose: bool) {
        let hd = job.s.head_dim;
        let off = job.g * hd;
        let (j0, n) = (range.start - tile0, range.len());
        // Keys row-major into `krow` `[K_TILE][hd]` (vector loops), then, for many queries,
        // transposed with contiguous stores.
        for p in range {
            let (j, at) = (p - tile0, p * job.row + off);
            let krow = &mut self.krow[j * hd..(j + 1) * hd];
            let vrow = &mut self.v[j * hd..(j + 1) * hd];
            match (job.k, job.v) {
                (KvRows::F16(k), KvRows::F16(v)) => {
                    for (dst, h) in krow.iter_mut().zip(&k[at..at + hd]) {
                        *dst = f16_to_f32(h.to_bits());
                    }
                    for (dst, h) in vrow.iter_mut().zip(&v[at..at + hd]) {
                        *dst = f16_to_f32(h.to_bits());
                    }
                }
                (KvRows::F32(k), KvRows::F32(v)) => {
                    krow.copy_from_slice(&k[at..at + hd]);
                    vrow.copy_from_slice(&v[at..at + hd]);
                }
                _ => unreachable!("keys and values share one storage type"),
            }
        }
        if !transpose {
            return;
        }
        for d in 0..hd {
            let dst = &mut self.kt[d * K_TILE + j0..d * K_TILE + j0 + n];
            for (i, x) in dst.iter_mut().enumerate() {
                *x = self.krow[(j0 + i) * hd + d];
            }
        }
    }

    /// Folds tile columns `js` into query `qi`'s running softmax and output.
    #[inline(always)]
    fn update(&mut self, qi: usize, hd: usize, scale: f32, js: Range<usize>, by_rows: bool) {
        let qv = &self.q[qi * hd..(qi + 1) * hd];
        let sc = &mut self.sc[js.clone()];
        if by_rows {
            for (s, j) in sc.iter_mut().zip(js.clone()) {
                *s = dot16(qv, &self.krow[j * hd..(j + 1) * hd]);
            }
        } else {
            sc.fill(0.0);
            for (d, qd) in qv.iter().enumerate() {
                let krow = &self.kt[d * K_TILE + js.start..d * K_TILE + js.end];
                for (s, k) in sc.iter_mut().zip(krow) {
                    *s += qd * k;
                }
            }
        }
        // Lane-wise maxima first: a plain `f32::max` fold does not vectorise.
        let mut lanes = [f32::NEG_INFINITY; 16];
        for (i, s) in sc.iter_mut().enumerate() {
            *s *= scale;
            let lane = &mut lanes[i % 16];
            *lane = if *s > *lane { *s } else { *lane };
        }
        let mt = lanes.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        let o = &mut self.o[qi * hd..(qi + 1) * hd];
        if mt > self.m[qi] {
            let corr = exp_neg(self.m[qi] - mt);
            o.iter_mut().for_each(|v| *v *= corr);
            self.l[qi] *= corr;
            self.m[qi] = mt;
        }
        let m = self.m[qi];
        sc.iter_mut().for_each(|s| *s = exp_neg(*s - m));
        for (e, j) in sc.iter().zip(js) {
            self.l[qi] += e;
            for (od, vd) in o.iter_mut().zip(&self.v[j * hd..(j + 1) * hd]) {
                *od += e * vd;
            }
        }
    }

    /// Writes `o / l` of every query into the tile (`[tokens][group·hd]`).
    fn write_normalized(&self, tile: &mut Tile<'_, f32>, group: usize, hd: usize) {
        for k in 0..tile.rows.len() {
            let row = tile.row_mut(k);
            for (h, dst) in row.chunks_exact_mut(hd).enumerate() {
                let qi = k * group + h;
                let inv = 1.0 / self.l[qi];
                for (d, o) in dst.iter_mut().zip(&self.o[qi * hd..(qi + 1) * hd]) {
                    *d = o * inv;
                }
            }
        }
    }

    /// Writes `(m, l, o)` of every query into the tile (`[tokens][group·(hd + 2)]`).
    fn write_partial(&self, tile: &mut Tile<'_, f32>, group: usize, hd: usize) {
        for k in 0..tile.rows.len() {
            let row = tile.row_mut(k);
            for (h, dst) in row.chunks_exact_mut(hd + 2).enumerate() {
                let qi = k * group + h;
                dst[0] = self.m[qi];
                dst[1] = self.l[qi];
                dst[2..].copy_from_slice(&self.o[qi * hd..(qi + 1) * hd]);
            }
        }
    }
}

#[inline]
fn round_f16(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

/// Dot product in 16 lanes (one AVX-512 register), lanes summed at the end.
#[inline(always)]
fn dot16(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// IEEE half → single, exactly, without branches (so loops over it vectorise): the 15 bits
/// of exponent and mantissa shifted into an f32 are the value × 2⁻¹¹², normals and
/// subnormals alike; infinities and NaNs get the all-ones exponent instead.
#[inline(always)]
fn f16_to_f32(bits: u16) -> f32 {
    let em = (bits & 0x7fff) as u32;
    let sign = ((bits & 0x8000) as u32) << 16;
    let mag = if em >= 0x7c00 {
        f32::from_bits((em << 13) | 0x7f80_0000)
    } else {
        f32::from_bits(em << 13) * f32::from_bits(0x7780_0000) // 2^112
    };
    f32::from_bits(mag.to_bits() | sign)
}

/// `eˣ` for `x ≤ 0` (softmax weights), branch-free so loops over it vectorise; relative
/// error below 2⁻²² (≈ 2 ulp), and `x < −87` gives ≈ 1e−38 instead of 0.
///
/// Range reduction `x = k·ln2 + r`, |r| ≤ ln2/2 (Cody–Waite split of ln2), then a degree-6
/// Taylor polynomial of `eʳ` and `2ᵏ` put into the exponent bits.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer
    let x = x.max(-87.0);
    let k = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = (x - k * 0.693_145_75) - k * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits((((k as i32) + 127) as u32) << 23)
}

/// The inputs of one (KV head, query block, key range) task.
struct Job<'a> {
    q: &'a [f32],
    k: KvRows<'a>,
    v: KvRows<'a>,
    /// Cache elements per position.
    row: usize,
    pos0: usize,
    s: &'a AttnShape,
    g: usize,
    toks: Range<usize>,
    keys: Range<usize>,
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

    #[test]
    fn key_tiles_splits_and_query_blocks_match_naive_reference() {
        let (hd, n_head, n_kv, n_pos) = (8, 4, 2, 700);
        let mut cache = KvCache::new(1, n_pos, n_kv * hd, KvType::F32);
        let val = |p: usize, i: usize| ((p * 31 + i * 7) as f32 * 0.011).sin() * 2.0;
        let mut keys = vec![vec![]; n_kv];
        let mut vals = vec![vec![]; n_kv];
        for p in 0..n_pos {
            let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
            let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 5000, i)).collect();
            cache.layers[0].write(p, &k, &v);
            for g in 0..n_kv {
                keys[g].push(k[g * hd..(g + 1) * hd].to_vec());
                vals[g].push(v[g * hd..(g + 1) * hd].to_vec());
            }
        }
        // (tokens, pos0): one query past three key splits; 20 queries over two blocks.
        for (t_n, pos0) in [(1, 650), (3, 500), (20, 600)] {
            for window in [None, Some(100)] {
                let shape = AttnShape {
                    n_head,
                    n_kv_head: n_kv,
                    head_dim: hd,
                    scale: 0.3,
                    window,
                };
                let q: Vec<f32> = (0..t_n * n_head * hd)
                    .map(|i| (i as f32 * 0.37).cos())
                    .collect();
                let mut out = vec![0.0; q.len()];
                attention(&q, &cache.layers[0], pos0, &shape, &mut out);
                for t in 0..t_n {
                    let pos = pos0 + t;
                    let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    for h in 0..n_head {
                        let g = h / (n_head / n_kv);
                        let qi = &q[(t * n_head + h) * hd..][..hd];
                        let r = reference(qi, &keys[g][..=pos], &vals[g][..=pos], 0.3, first);
                        let got = &out[(t * n_head + h) * hd..][..hd];
                        for d in 0..hd {
                            assert!(
                                (r[d] - got[d]).abs() < 1e-5,
                                "T={t_n} {window:?} t{t} h{h}: {} vs {}",
                                got[d],
                                r[d]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn f16_conversion_is_exact_for_every_half() {
        for bits in 0..=u16::MAX {
            let want = half::f16::from_bits(bits).to_f32();
            let got = f16_to_f32(bits);
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn exp_neg_is_within_a_few_ulp_of_libm() {
        for i in 0..=200_000 {
            let x = -(i as f32) * 87.0 / 200_000.0;
            let (got, want) = (exp_neg(x), x.exp());
            assert!(
                ((got - want) / want).abs() < 4e-7,
                "exp({x}) = {got}, libm {want}"
            );
        }
        assert!(exp_neg(f32::NEG_INFINITY) < 1e-37);
        assert_eq!(exp_neg(0.0), 1.0);
    }
}
