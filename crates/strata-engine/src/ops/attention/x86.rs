//! The AVX-512 and AVX2 + F16C kernels of `lanes.rs`: the same float operations in the same
//! order as its scalar reference, so the same bits (see the module docs there).

pub(super) mod avx512 {
    use super::super::lanes::{KeyElem, Q_GROUP};
    use std::arch::x86_64::*;

    /// See `lanes::scores`. Safety: AVX-512F present; bounds as asserted there.
    #[target_feature(enable = "avx512f")]
    pub(in crate::ops::attention) unsafe fn scores<E: KeyElem>(
        q: &[f32],
        hd: usize,
        k: &[E],
        row: usize,
        n: usize,
        out: &mut [f32],
        out_stride: usize,
    ) {
        let n_q = q.len() / hd;
        // Blocks of 16 keys, one query at a time: 16 independent accumulators, reduced
        // together (`reduce16`); the last `n mod 16` keys in groups of queries.
        let full = n / 16 * 16;
        if hd >= 16 {
            for i in 0..n_q {
                let qi = &q[i * hd..(i + 1) * hd];
                for j in (0..full).step_by(16) {
                    let dst = &mut out[i * out_stride + j..i * out_stride + j + 16];
                    block16::<E>(qi, hd, &k[j * row..], row, dst);
                }
            }
        }
        let j0 = if hd >= 16 { full } else { 0 };
        let mut i0 = 0;
        while i0 < n_q {
            let g = (n_q - i0).min(Q_GROUP);
            for j in j0..n {
                let kr = &k[j * row..j * row + hd];
                for (gi, s) in group::<E>(&q[i0 * hd..(i0 + g) * hd], hd, kr, g)
                    .into_iter()
                    .take(g)
                    .enumerate()
                {
                    out[(i0 + gi) * out_stride + j] = s;
                }
            }
            i0 += g;
        }
    }

    /// Dots of one query with 16 key rows (`k[j·row ..]`, `j < 16`) into `out[..16]`, in the
    /// reference order. Safety: AVX-512F present; `k` holds 15·row + hd elements.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn block16<E: KeyElem>(q: &[f32], hd: usize, k: &[E], row: usize, out: &mut [f32]) {
        assert!(k.len() >= 15 * row + hd && out.len() >= 16);
        let body = hd / 16 * 16;
        let mut acc = [_mm512_setzero_ps(); 16];
        let mut c = 0;
        while c < body {
            let qc = _mm512_loadu_ps(q.as_ptr().add(c));
            for (j, a) in acc.iter_mut().enumerate() {
                let kc = E::load16(k.as_ptr().add(j * row + c));
                *a = _mm512_add_ps(*a, _mm512_mul_ps(qc, kc));
            }
            c += 16;
        }
        _mm512_storeu_ps(out.as_mut_ptr(), reduce16(&acc));
        for (j, s) in out[..16].iter_mut().enumerate() {
            for d in body..hd {
                *s += q[d] * k[j * row + d].to_f32();
            }
        }
    }

    /// Lane `j` of the result is the tree sum (`lanes::tree16`) of `acc[j]`: the same adds,
    /// four keys per instruction (halves, quarters, pairs, last pair, then a permutation).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce16(acc: &[__m512; 16]) -> __m512 {
        // b[m] quarters: s8[0..4], s8[4..8] of key 2m, then of key 2m + 1.
        let b: [__m512; 8] = std::array::from_fn(|m| {
            let (x, y) = (acc[2 * m], acc[2 * m + 1]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x44>(x, y),
                _mm512_shuffle_f32x4::<0xEE>(x, y),
            )
        });
        // c[n] quarter r: s4 of key 4n + r.
        let c: [__m512; 4] = std::array::from_fn(|n| {
            let (x, y) = (b[2 * n], b[2 * n + 1]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(x, y),
                _mm512_shuffle_f32x4::<0xDD>(x, y),
            )
        });
        // d[u] quarter r: s2 of key 8u + r, then of key 8u + 4 + r.
        let d: [__m512; 2] = std::array::from_fn(|u| {
            let (x, y) = (_mm512_castps_pd(c[2 * u]), _mm512_castps_pd(c[2 * u + 1]));
            _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)),
            )
        });
        // e lane 4r + c: key 4c + r.
        let e = _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(d[0], d[1]),
            _mm512_shuffle_ps::<0xDD>(d[0], d[1]),
        );
        let idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_permutexvar_ps(idx, e)
    }

    /// Dots of up to [`Q_GROUP`] queries (`q`: `[g][hd]`) with one key row.
    #[inline(always)]
    unsafe fn group<E: KeyElem>(q: &[f32], hd: usize, k: &[E], g: usize) -> [f32; Q_GROUP] {
        let mut acc = [_mm512_setzero_ps(); Q_GROUP];
        let body = hd / 16 * 16;
        let mut c = 0;
        while c < body {
            let kc = E::load16(k.as_ptr().add(c));
            for (i, a) in acc.iter_mut().enumerate().take(g) {
                let qc = _mm512_loadu_ps(q.as_ptr().add(i * hd + c));
                *a = _mm512_add_ps(*a, _mm512_mul_ps(qc, kc));
            }
            c += 16;
        }
        let mut s = [0.0f32; Q_GROUP];
        for i in 0..g {
            let lo = _mm512_castps512_ps256(acc[i]);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1));
            s[i] = super::avx2::tree8(_mm256_add_ps(lo, hi));
            for d in body..hd {
                s[i] += q[i * hd + d] * k[d].to_f32();
            }
        }
        s
    }

    /// Scores of `N ≤ 4` queries (`q`: `[N][hd]`) against all 64 columns of a transposed key
    /// tile (`kt`: `[hd][64]`) into `sc[i·64 + j]`: per score `Σ_d q[d]·k[d]` in order of `d`
    /// from 0.0, no FMA (the order of `kernel::score_columns`). Safety: AVX-512F present.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in crate::ops::attention) unsafe fn score_tile<const N: usize>(
        q: &[f32],
        hd: usize,
        kt: &[f32],
        sc: &mut [f32],
    ) {
        assert!(N <= 4 && q.len() >= N * hd && kt.len() >= hd * 64 && sc.len() >= N * 64);
        let mut acc = [[_mm512_setzero_ps(); 4]; N];
        for d in 0..hd {
            let kp = kt.as_ptr().add(d * 64);
            let k: [__m512; 4] = std::array::from_fn(|c| _mm512_loadu_ps(kp.add(16 * c)));
            for (i, a) in acc.iter_mut().enumerate() {
                let qd = _mm512_set1_ps(*q.get_unchecked(i * hd + d));
                for c in 0..4 {
                    a[c] = _mm512_add_ps(a[c], _mm512_mul_ps(qd, k[c]));
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            for (c, x) in a.iter().enumerate() {
                _mm512_storeu_ps(sc.as_mut_ptr().add(i * 64 + 16 * c), *x);
            }
        }
    }

    /// `o[i·hd + c] += e[i][j] · v[j·v_stride + c]` for keys `j` in order, queries `i < N ≤ 4`
    /// and columns `c < hd / 32 · 32` (the order of `online::accumulate`); returns the first
    /// column left. Safety: AVX-512F present.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in crate::ops::attention) unsafe fn accumulate_block<const N: usize>(
        o: &mut [f32],
        hd: usize,
        e: [&[f32]; N],
        v: &[f32],
        v_stride: usize,
    ) -> usize {
        let n = e.first().map_or(0, |e| e.len());
        assert!(N <= 4 && o.len() >= N * hd && e.iter().all(|e| e.len() == n));
        let body = hd / 32 * 32;
        assert!(n == 0 || v.len() >= (n - 1) * v_stride + body);
        let mut c = 0;
        while c < body {
            let mut acc = [[_mm512_setzero_ps(); 2]; N];
            for (i, a) in acc.iter_mut().enumerate() {
                a[0] = _mm512_loadu_ps(o.as_ptr().add(i * hd + c));
                a[1] = _mm512_loadu_ps(o.as_ptr().add(i * hd + c + 16));
            }
            for j in 0..n {
                let vp = v.as_ptr().add(j * v_stride + c);
                let (v0, v1) = (_mm512_loadu_ps(vp), _mm512_loadu_ps(vp.add(16)));
                for (i, a) in acc.iter_mut().enumerate() {
                    let ej = _mm512_set1_ps(*e[i].get_unchecked(j));
                    a[0] = _mm512_add_ps(a[0], _mm512_mul_ps(ej, v0));
                    a[1] = _mm512_add_ps(a[1], _mm512_mul_ps(ej, v1));
                }
            }
            for (i, a) in acc.iter().enumerate() {
                _mm512_storeu_ps(o.as_mut_ptr().add(i * hd + c), a[0]);
                _mm512_storeu_ps(o.as_mut_ptr().add(i * hd + c + 16), a[1]);
            }
            c += 32;
        }
        body
    }

    /// See `lanes::extend_rounded_f16`. Safety: AVX-512F present, equal lengths.
    #[target_feature(enable = "avx512f")]
    pub(in crate::ops::attention) unsafe fn round_f16(src: &[f32], dst: &mut [f32]) {
        let body = src.len() / 16 * 16;
        let mut c = 0;
        while c < body {
            let x = _mm512_loadu_ps(src.as_ptr().add(c));
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
            _mm512_storeu_ps(dst.as_mut_ptr().add(c), _mm512_cvtph_ps(h));
            c += 16;
        }
        for (d, v) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = half::f16::from_f32(*v).to_f32();
        }
    }

    /// See `lanes::convert_f16`. Safety: AVX-512F present, equal lengths.
    #[target_feature(enable = "avx512f")]
    pub(in crate::ops::attention) unsafe fn convert(src: &[half::f16], dst: &mut [f32]) {
        let body = src.len() / 16 * 16;
        let mut c = 0;
        while c < body {
            _mm512_storeu_ps(
                dst.as_mut_ptr().add(c),
                half::f16::load16(src.as_ptr().add(c)),
            );
            c += 16;
        }
        for (d, h) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = h.to_f32();
        }
    }
}

pub(super) mod avx2 {
    use super::super::lanes::{KeyElem, Q_GROUP};
    use std::arch::x86_64::*;

    /// See `lanes::scores`. Safety: AVX2 and F16C present; bounds as asserted there.
    #[target_feature(enable = "avx2,f16c")]
    pub(in crate::ops::attention) unsafe fn scores<E: KeyElem>(
        q: &[f32],
        hd: usize,
        k: &[E],
        row: usize,
        n: usize,
        out: &mut [f32],
        out_stride: usize,
    ) {
        let n_q = q.len() / hd;
        let mut i0 = 0;
        while i0 < n_q {
            let g = (n_q - i0).min(Q_GROUP);
            for j in 0..n {
                let kr = &k[j * row..j * row + hd];
                let s = group::<E>(&q[i0 * hd..(i0 + g) * hd], hd, kr, g);
                for (gi, s) in s.into_iter().take(g).enumerate() {
                    out[(i0 + gi) * out_stride + j] = s;
                }
            }
            i0 += g;
        }
    }

    /// Dots of up to [`Q_GROUP`] queries with one key row; lanes 0–7 and 8–15 of the
    /// reference's 16 lanes are two registers.
    #[inline(always)]
    unsafe fn group<E: KeyElem>(q: &[f32], hd: usize, k: &[E], g: usize) -> [f32; Q_GROUP] {
        let mut lo = [_mm256_setzero_ps(); Q_GROUP];
        let mut hi = [_mm256_setzero_ps(); Q_GROUP];
        let body = hd / 16 * 16;
        let mut c = 0;
        while c < body {
            let k0 = E::load8(k.as_ptr().add(c));
            let k1 = E::load8(k.as_ptr().add(c + 8));
            for i in 0..g {
                let q0 = _mm256_loadu_ps(q.as_ptr().add(i * hd + c));
                let q1 = _mm256_loadu_ps(q.as_ptr().add(i * hd + c + 8));
                lo[i] = _mm256_add_ps(lo[i], _mm256_mul_ps(q0, k0));
                hi[i] = _mm256_add_ps(hi[i], _mm256_mul_ps(q1, k1));
            }
            c += 16;
        }
        let mut s = [0.0f32; Q_GROUP];
        for i in 0..g {
            s[i] = tree8(_mm256_add_ps(lo[i], hi[i]));
            for d in body..hd {
                s[i] += q[i * hd + d] * k[d].to_f32();
            }
        }
        s
    }

    /// The AVX2 form of `avx512::score_tile`: the scores of queries `i < N ≤ 2` against a
    /// transposed key tile, the same operations per score (`Σ_d q[d]·k[d]` in order of `d` from
    /// 0.0, no FMA), so the same bits. A half tile (32 columns) at a time keeps the
    /// accumulators in the 16 ymm registers. Safety: AVX2 present.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in crate::ops::attention) unsafe fn score_tile<const N: usize>(
        q: &[f32],
        hd: usize,
        kt: &[f32],
        sc: &mut [f32],
    ) {
        assert!(N <= 2 && q.len() >= N * hd && kt.len() >= hd * 64 && sc.len() >= N * 64);
        for half in [0, 32] {
            let mut acc = [[_mm256_setzero_ps(); 4]; N];
            for d in 0..hd {
                let kp = kt.as_ptr().add(d * 64 + half);
                let k: [__m256; 4] = std::array::from_fn(|c| _mm256_loadu_ps(kp.add(8 * c)));
                for (i, a) in acc.iter_mut().enumerate() {
                    let qd = _mm256_set1_ps(*q.get_unchecked(i * hd + d));
                    for c in 0..4 {
                        a[c] = _mm256_add_ps(a[c], _mm256_mul_ps(qd, k[c]));
                    }
                }
            }
            for (i, a) in acc.iter().enumerate() {
                for (c, x) in a.iter().enumerate() {
                    _mm256_storeu_ps(sc.as_mut_ptr().add(i * 64 + half + 8 * c), *x);
                }
            }
        }
    }

    /// The AVX2 form of `avx512::accumulate_block` (queries `i < N ≤ 2`, columns
    /// `c < hd / 32 · 32`, keys in order); returns the first column left. Safety: AVX2
    /// present.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in crate::ops::attention) unsafe fn accumulate_block<const N: usize>(
        o: &mut [f32],
        hd: usize,
        e: [&[f32]; N],
        v: &[f32],
        v_stride: usize,
    ) -> usize {
        let n = e.first().map_or(0, |e| e.len());
        assert!(N <= 2 && o.len() >= N * hd && e.iter().all(|e| e.len() == n));
        let body = hd / 32 * 32;
        assert!(n == 0 || v.len() >= (n - 1) * v_stride + body);
        let mut c = 0;
        while c < body {
            let mut acc = [[_mm256_setzero_ps(); 4]; N];
            for (i, a) in acc.iter_mut().enumerate() {
                for (q, x) in a.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(o.as_ptr().add(i * hd + c + 8 * q));
                }
            }
            for j in 0..n {
                let vp = v.as_ptr().add(j * v_stride + c);
                let vr: [__m256; 4] = std::array::from_fn(|q| _mm256_loadu_ps(vp.add(8 * q)));
                for (i, a) in acc.iter_mut().enumerate() {
                    let ej = _mm256_set1_ps(*e[i].get_unchecked(j));
                    for (x, vq) in a.iter_mut().zip(vr) {
                        *x = _mm256_add_ps(*x, _mm256_mul_ps(ej, vq));
                    }
                }
            }
            for (i, a) in acc.iter().enumerate() {
                for (q, x) in a.iter().enumerate() {
                    _mm256_storeu_ps(o.as_mut_ptr().add(i * hd + c + 8 * q), *x);
                }
            }
            c += 32;
        }
        body
    }

    /// Sums 8 lanes: `i + 4`, then `i + 2`, then the last pair (the tail of `lanes::tree16`).
    #[inline(always)]
    pub(super) unsafe fn tree8(s8: __m256) -> f32 {
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)))
    }

    /// See `lanes::extend_rounded_f16`. Safety: AVX2 and F16C present, equal lengths.
    #[target_feature(enable = "avx2,f16c")]
    pub(in crate::ops::attention) unsafe fn round_f16(src: &[f32], dst: &mut [f32]) {
        let body = src.len() / 8 * 8;
        let mut c = 0;
        while c < body {
            let x = _mm256_loadu_ps(src.as_ptr().add(c));
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
            _mm256_storeu_ps(dst.as_mut_ptr().add(c), _mm256_cvtph_ps(h));
            c += 8;
        }
        for (d, v) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = half::f16::from_f32(*v).to_f32();
        }
    }

    /// See `lanes::convert_f16`. Safety: AVX2 and F16C present, equal lengths.
    #[target_feature(enable = "avx2,f16c")]
    pub(in crate::ops::attention) unsafe fn convert(src: &[half::f16], dst: &mut [f32]) {
        let body = src.len() / 8 * 8;
        let mut c = 0;
        while c < body {
            _mm256_storeu_ps(
                dst.as_mut_ptr().add(c),
                half::f16::load8(src.as_ptr().add(c)),
            );
            c += 8;
        }
        for (d, h) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = h.to_f32();
        }
    }
}
