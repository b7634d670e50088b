//! The AVX-512 and AVX2 + F16C kernels of `lanes.rs`: the same float operations in the same
//! order as its scalar reference, so the same bits (see the module docs there).

pub(super) mod avx512 {
    use std::arch::x86_64::*;

    /// Scores of `N ≤ 4` queries (`q`: `[N][hd]`) against all 64 columns of a transposed key
    /// tile (`kt`: `[hd][64]`) into `sc[i·64 + j]`: per score `Σ_d q[d]·k[d]` in order of `d`
    /// from 0.0, no FMA (the order of `kernel::score_columns`). Safety: AVX-512F present.
    #[inline]
    #[target_feature(enable = "avx512f,fma")]
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
    #[target_feature(enable = "avx512f,fma")]
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
    #[target_feature(enable = "avx512f,fma")]
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
    #[target_feature(enable = "avx512f,fma")]
    pub(in crate::ops::attention) unsafe fn convert(src: &[half::f16], dst: &mut [f32]) {
        let body = src.len() / 16 * 16;
        let mut c = 0;
        while c < body {
            _mm512_storeu_ps(
                dst.as_mut_ptr().add(c),
                _mm512_cvtph_ps(_mm256_loadu_si256(src.as_ptr().add(c) as *const __m256i)),
            );
            c += 16;
        }
        for (d, h) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = h.to_f32();
        }
    }
}

pub(super) mod avx2 {
    use std::arch::x86_64::*;

    /// The AVX2 form of `avx512::score_tile`: the scores of queries `i < N ≤ 2` against a
    /// transposed key tile, the same operations per score (`Σ_d q[d]·k[d]` in order of `d` from
    /// 0.0, no FMA), so the same bits. A half tile (32 columns) at a time keeps the
    /// accumulators in the 16 ymm registers. Safety: AVX2 present.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
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
    #[target_feature(enable = "avx2,fma")]
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

    /// See `lanes::extend_rounded_f16`. Safety: AVX2 and F16C present, equal lengths.
    #[target_feature(enable = "avx2,f16c,fma")]
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
    #[target_feature(enable = "avx2,f16c,fma")]
    pub(in crate::ops::attention) unsafe fn convert(src: &[half::f16], dst: &mut [f32]) {
        let body = src.len() / 8 * 8;
        let mut c = 0;
        while c < body {
            _mm256_storeu_ps(
                dst.as_mut_ptr().add(c),
                _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().add(c) as *const __m128i)),
            );
            c += 8;
        }
        for (d, h) in dst[body..].iter_mut().zip(&src[body..]) {
            *d = h.to_f32();
        }
    }
}

pub(super) mod avx {
    use std::arch::x86_64::*;

    /// An element type whose 8 consecutive values load as 8 f32 lanes, exactly.
    pub(in crate::ops::attention) trait Load8: Copy {
        /// Safety: AVX and F16C present; `p` points at 8 readable elements.
        unsafe fn load8(p: *const Self) -> __m256;
    }

    impl Load8 for f32 {
        #[inline(always)]
        unsafe fn load8(p: *const f32) -> __m256 {
            _mm256_loadu_ps(p)
        }
    }

    impl Load8 for half::f16 {
        #[inline(always)]
        unsafe fn load8(p: *const half::f16) -> __m256 {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        }
    }

    /// `dst[c·dst_stride + r] = f32(src[r·src_stride + c])` for `r, c < 8`: an 8 × 8 block
    /// converted (exactly) and moved to its transpose. Safety: AVX and F16C present; `src`
    /// holds 8 rows of 8 at its stride, `dst` 8 rows of 8 at its.
    #[inline]
    #[target_feature(enable = "avx,f16c")]
    pub(in crate::ops::attention) unsafe fn transpose8<T: Load8>(
        src: &[T],
        src_stride: usize,
        dst: &mut [f32],
        dst_stride: usize,
    ) {
        assert!(src.len() >= 7 * src_stride + 8 && dst.len() >= 7 * dst_stride + 8);
        let r: [__m256; 8] = std::array::from_fn(|i| T::load8(src.as_ptr().add(i * src_stride)));
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        let o = [
            _mm256_permute2f128_ps::<0x20>(u[0], u[4]),
            _mm256_permute2f128_ps::<0x20>(u[1], u[5]),
            _mm256_permute2f128_ps::<0x20>(u[2], u[6]),
            _mm256_permute2f128_ps::<0x20>(u[3], u[7]),
            _mm256_permute2f128_ps::<0x31>(u[0], u[4]),
            _mm256_permute2f128_ps::<0x31>(u[1], u[5]),
            _mm256_permute2f128_ps::<0x31>(u[2], u[6]),
            _mm256_permute2f128_ps::<0x31>(u[3], u[7]),
        ];
        for (i, o) in o.into_iter().enumerate() {
            _mm256_storeu_ps(dst.as_mut_ptr().add(i * dst_stride), o);
        }
    }
}
