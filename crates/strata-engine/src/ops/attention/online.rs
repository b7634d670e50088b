//! The online softmax of attention (Milakov & Gimelshein 2018, as in FlashAttention): a
//! running maximum `m`, sum `l` and unnormalised output `o` per query, folded one key tile at
//! a time within a key segment ([`super::SEGMENT`] positions), and the merge of the segments'
//! partial `(m, l, o)` in position order ([`merge`], as flash-decoding merges key chunks).
//!
//! A query's result is the same function of its visible keys however it is computed: a
//! prefill task folds tiles and merges each finished segment into an accumulator
//! ([`Online::seal`]); a decode step computes segments in parallel tasks and merges them in the
//! same order with the same [`merge`] ([`merge_splits`]). That is what makes a position's
//! output independent of how the tokens before it were fed (batch invariance).

use crate::ops::exp::exp;
use crate::pool::Tile;

#[cfg(target_arch = "x86_64")]
use super::lanes::Isa;
use super::AttnShape;

/// Running softmax state of the queries of one task, `[n_q]` / `[n_q][hd]`: the current
/// segment's `(m, l, o)` and the merge of the segments before it (`acc_*`).
#[derive(Default)]
pub(super) struct Online {
    pub o: Vec<f32>,
    pub m: Vec<f32>,
    pub l: Vec<f32>,
    acc_o: Vec<f32>,
    acc_m: Vec<f32>,
    acc_l: Vec<f32>,
}

/// Empties a state of `n` queries: `m = −∞`, `l = 0`, `o = 0`.
fn clear_state(o: &mut Vec<f32>, m: &mut Vec<f32>, l: &mut Vec<f32>, n_q: usize, hd: usize) {
    o.clear();
    o.resize(n_q * hd, 0.0);
    m.clear();
    m.resize(n_q, f32::NEG_INFINITY);
    l.clear();
    l.resize(n_q, 0.0);
}

impl Online {
    /// Empty state for `n_q` queries of `hd` elements (reuses the buffers).
    pub fn reset(&mut self, n_q: usize, hd: usize) {
        clear_state(&mut self.o, &mut self.m, &mut self.l, n_q, hd);
        clear_state(&mut self.acc_o, &mut self.acc_m, &mut self.acc_l, n_q, hd);
    }

    /// Ends the current key segment: merges it into the accumulated state of every query
    /// ([`merge`]) and starts an empty segment.
    pub fn seal(&mut self, hd: usize) {
        let n_q = self.m.len();
        for qi in 0..n_q {
            if self.l[qi] == 0.0 {
                continue;
            }
            let o = &mut self.o[qi * hd..(qi + 1) * hd];
            let acc = &mut self.acc_o[qi * hd..(qi + 1) * hd];
            (self.acc_m[qi], self.acc_l[qi]) = merge(
                (self.acc_m[qi], self.acc_l[qi], acc),
                (self.m[qi], self.l[qi], o),
            );
            o.fill(0.0);
            self.m[qi] = f32::NEG_INFINITY;
            self.l[qi] = 0.0;
        }
    }

    /// Folds raw scores `sc` (q·k of consecutive keys, clobbered) of query `qi` into its
    /// state; the value of key `j` is `v[j·v_stride ..][..hd]`.
    #[inline(always)]
    pub fn fold(
        &mut self,
        qi: usize,
        hd: usize,
        scale: f32,
        sc: &mut [f32],
        v: &[f32],
        v_stride: usize,
    ) {
        self.weigh(qi, hd, scale, sc);
        let o = &mut self.o[qi * hd..(qi + 1) * hd];
        // Each output element adds its `e·v` in key order; 64 elements of `o` (four
        // independent chains of vector adds) stay in registers for the whole tile.
        let mut c = 0;
        while c + 64 <= hd {
            accumulate::<64>(&mut o[c..c + 64], sc, &v[c..], v_stride);
            c += 64;
        }
        accumulate_tail(o, c, sc, v, v_stride);
    }

    /// [`Online::fold`] of `N` consecutive queries `qi0 ..` that see the same keys: row `i`
    /// of `sc` (stride `sc_stride`, columns `js`) holds the scores of query `qi0 + i`. Each
    /// value row is loaded once for all `N` queries; every element of every query performs
    /// the same operations in the same order as [`Online::fold`], so the bits are the same.
    /// `isa`: AVX-512F (`N ≤ 4`) or AVX2 (`N ≤ 2`), present on this CPU.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn fold_block<const N: usize>(
        &mut self,
        isa: Isa,
        qi0: usize,
        hd: usize,
        scale: f32,
        sc: &mut [f32],
        sc_stride: usize,
        js: std::ops::Range<usize>,
        v: &[f32],
        v_stride: usize,
    ) {
        for i in 0..N {
            let row = &mut sc[i * sc_stride + js.start..i * sc_stride + js.end];
            self.weigh(qi0 + i, hd, scale, row);
        }
        let e: [&[f32]; N] =
            std::array::from_fn(|i| &sc[i * sc_stride + js.start..i * sc_stride + js.end]);
        let o = &mut self.o[qi0 * hd..(qi0 + N) * hd];
        use super::x86::{avx2, avx512};
        // SAFETY: `isa` is present (the caller's contract); bounds are checked inside.
        let c = unsafe {
            match isa {
                Isa::Avx512 => avx512::accumulate_block::<N>(o, hd, e, v, v_stride),
                Isa::Avx2 => avx2::accumulate_block::<N>(o, hd, e, v, v_stride),
                Isa::Scalar => unreachable!("fold_block runs on a SIMD path"),
            }
        };
        for (i, e) in e.iter().enumerate() {
            accumulate_tail(&mut o[i * hd..(i + 1) * hd], c, e, v, v_stride);
        }
    }

    /// The softmax half of a fold: scales `sc`, raises the running maximum of query `qi`
    /// (rescaling its `l` and `o`), turns `sc` into weights `e^(s − m)` and adds them to `l`.
    #[inline(always)]
    fn weigh(&mut self, qi: usize, hd: usize, scale: f32, sc: &mut [f32]) {
        // Lane-wise maxima first: a plain `f32::max` fold does not vectorise.
        let mut lanes = [f32::NEG_INFINITY; 16];
        let mut chunks = sc.chunks_exact_mut(16);
        for ch in &mut chunks {
            for (s, lane) in ch.iter_mut().zip(&mut lanes) {
                *s *= scale;
                *lane = if *s > *lane { *s } else { *lane };
            }
        }
        for (s, lane) in chunks.into_remainder().iter_mut().zip(&mut lanes) {
            *s *= scale;
            *lane = if *s > *lane { *s } else { *lane };
        }
        let mt = lanes.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        if mt > self.m[qi] {
            let corr = exp(self.m[qi] - mt);
            self.o[qi * hd..(qi + 1) * hd]
                .iter_mut()
                .for_each(|v| *v *= corr);
            self.l[qi] *= corr;
            self.m[qi] = mt;
        }
        let m = self.m[qi];
        sc.iter_mut().for_each(|s| *s = exp(*s - m));
        // The tile's weights summed in 16 lanes, then as a tree (one chain of dependent adds
        // per tile, not per key).
        let mut sum = [0.0f32; 16];
        let chunks = sc.chunks_exact(16);
        let rest = chunks.remainder();
        for ch in chunks {
            for (a, e) in sum.iter_mut().zip(ch) {
                *a += e;
            }
        }
        for (a, e) in sum.iter_mut().zip(rest) {
            *a += e;
        }
        self.l[qi] += super::lanes::tree16(sum);
    }

    /// Writes the accumulated `o / l` of every query into the tile (`[tokens][group·hd]`);
    /// call [`Online::seal`] first.
    pub fn write_normalized(&self, tile: &mut Tile<'_, f32>, group: usize, hd: usize) {
        for k in 0..tile.rows.len() {
            let row = tile.row_mut(k);
            for (h, dst) in row.chunks_exact_mut(hd).enumerate() {
                let qi = k * group + h;
                normalize(self.acc_l[qi], &self.acc_o[qi * hd..(qi + 1) * hd], dst);
            }
        }
    }

    /// Writes the current segment's `(m, l, o)` of every query into the tile
    /// (`[tokens][group·(hd + 2)]`).
    pub fn write_partial(&self, tile: &mut Tile<'_, f32>, group: usize, hd: usize) {
        for k in 0..tile.rows.len() {
            self.write_partial_row(k * group, tile.row_mut(k), group, hd);
        }
    }

    /// Writes the current segment's `(m, l, o)` of queries `qi0 .. qi0 + group` (one token's
    /// heads) into `row` (`[group·(hd + 2)]`).
    pub fn write_partial_row(&self, qi0: usize, row: &mut [f32], group: usize, hd: usize) {
        for (h, dst) in row.chunks_exact_mut(hd + 2).take(group).enumerate() {
            let qi = qi0 + h;
            dst[0] = self.m[qi];
            dst[1] = self.l[qi];
            dst[2..].copy_from_slice(&self.o[qi * hd..(qi + 1) * hd]);
        }
    }
}

/// Merges the softmax state `b` of later keys into `a` (`o` in place; returns the new
/// `(m, l)`): `m = max(m_a, m_b)`, `l = l_a·e^(m_a−m) + l_b·e^(m_b−m)`, `o` likewise. An empty
/// `a` (`l_a = 0`) takes `b`'s values exactly, so a query whose keys lie in one segment gets the
/// bits of that segment's fold.
#[inline]
pub(super) fn merge(a: (f32, f32, &mut [f32]), b: (f32, f32, &[f32])) -> (f32, f32) {
    let ((m_a, l_a, o_a), (m_b, l_b, o_b)) = (a, b);
    if l_a == 0.0 {
        o_a.copy_from_slice(o_b);
        return (m_b, l_b);
    }
    let m = m_a.max(m_b);
    let (wa, wb) = (exp(m_a - m), exp(m_b - m));
    for (x, y) in o_a.iter_mut().zip(o_b) {
        *x = *x * wa + y * wb;
    }
    (m, l_a * wa + l_b * wb)
}

/// `dst = o / l`.
#[inline]
fn normalize(l: f32, o: &[f32], dst: &mut [f32]) {
    let inv = 1.0 / l;
    for (d, o) in dst.iter_mut().zip(o) {
        *d = o * inv;
    }
}

/// `o[i] += e_j · v[j·v_stride + i]` for every key `j` in order, `o` held in registers.
#[inline(always)]
fn accumulate<const W: usize>(o: &mut [f32], e: &[f32], v: &[f32], v_stride: usize) {
    let mut acc: [f32; W] = o.try_into().expect("W lanes");
    for (j, e) in e.iter().enumerate() {
        let vr: &[f32; W] = v[j * v_stride..][..W].try_into().expect("W lanes");
        for i in 0..W {
            acc[i] += e * vr[i];
        }
    }
    o.copy_from_slice(&acc);
}

/// `o[c..] += e_j · v[j·v_stride + c ..]` for every key `j` in order: the columns of `o`
/// from `c` on, 16 at a time in registers, then one by one.
#[inline(always)]
fn accumulate_tail(o: &mut [f32], mut c: usize, e: &[f32], v: &[f32], v_stride: usize) {
    let hd = o.len();
    while c + 16 <= hd {
        accumulate::<16>(&mut o[c..c + 16], e, &v[c..], v_stride);
        c += 16;
    }
    for (j, e) in e.iter().enumerate() {
        for (od, vd) in o[c..]
            .iter_mut()
            .zip(&v[j * v_stride + c..j * v_stride + hd])
        {
            *od += e * vd;
        }
    }
}

/// Combines the per-segment `(m, l, o)` of every (token, head) of `part`
/// (`[T][n_splits][n_head][hd + 2]`) into `out` (`[T][n_head·hd]`): segments merged in
/// position order with [`merge`], as [`Online::seal`] does, then normalised.
pub(super) fn merge_splits(
    part: &[f32],
    n_splits: usize,
    s: &AttnShape,
    acc: &mut Vec<f32>,
    out: &mut [f32],
) {
    let hd = s.head_dim;
    let cell_w = hd + 2;
    acc.resize(hd, 0.0);
    for (t, o_t) in out.chunks_exact_mut(s.n_head * hd).enumerate() {
        let p_t = &part[t * n_splits * s.n_head * cell_w..][..n_splits * s.n_head * cell_w];
        for (h, o) in o_t.chunks_exact_mut(hd).enumerate() {
            let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
            for sp in 0..n_splits {
                let c = &p_t[(sp * s.n_head + h) * cell_w..][..cell_w];
                if c[1] == 0.0 {
                    continue; // no visible key in this segment
                }
                (m, l) = merge((m, l, acc), (c[0], c[1], &c[2..]));
            }
            normalize(l, acc, o);
        }
    }
}
