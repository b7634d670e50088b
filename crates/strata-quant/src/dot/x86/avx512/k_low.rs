//! AVX-512 VNNI `vec_dot` of Q2_K and Q3_K against Q8_K: 64 elements (four sub-blocks of 16)
//! per 512-bit register, `vpmaddubsw` pair sums of the unsigned 2- or 3-bit quants (exact in
//! i16), and one `vpdpwssd` by the four sub-block scales (one per 128-bit lane, `vpermw`) into
//! i32 lanes. Minimums and Q3_K's +4 offset as in the AVX2 kernels (`avx2/k_low.rs`).

use std::arch::x86_64::*;

use super::super::avx2::k_low::q3_k_scales;
use super::super::{f16, hsum_ps};
use crate::k_quants::{BlockQ2_K, BlockQ3_K};
use crate::q8_k::BlockQ8_K;

/// `vpermw` control: i16 lanes `8 j .. 8 j + 8` take scale `k + j`.
#[inline(always)]
unsafe fn scale_index(k: i16) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(k + 1), _mm_set1_epi16(k))),
        _mm256_set_m128i(_mm_set1_epi16(k + 3), _mm_set1_epi16(k + 2)),
    )
}

/// Elements `128 c + 64 h .. + 64` of the 2-bit plane in `q` (bytes `32 c .. 32 c + 32`): the
/// planes `2 h` and `2 h + 1`, low 256 bits first.
#[inline(always)]
unsafe fn two_bit_pair(q: __m256i, h: usize) -> __m512i {
    let shift = |s: usize| _mm_cvtsi32_si128(2 * s as i32);
    let both = _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_srl_epi16(q, shift(2 * h))),
        _mm256_srl_epi16(q, shift(2 * h + 1)),
    );
    _mm512_and_si512(both, _mm512_set1_epi8(3))
}

/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available.
#[inline(always)]
pub(crate) unsafe fn q2_k(x: &[BlockQ2_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (_mm512_setzero_ps(), _mm256_setzero_ps());
    for (x, y) in x.iter().zip(y) {
        let packed = _mm_loadu_si128(x.scales.as_ptr().cast());
        let low4 = _mm_set1_epi8(0x0f);
        let scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(packed, low4)));
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let summs = _mm256_madd_epi16(bsums, mins);
        let mut sum = _mm512_setzero_si512();
        for c in 0..2 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast());
            for h in 0..2 {
                let at = 128 * c + 64 * h;
                let yq = _mm512_loadu_si512(y.qs.as_ptr().add(at).cast());
                let p = _mm512_maddubs_epi16(two_bit_pair(q, h), yq);
                let sc = _mm512_permutexvar_epi16(scale_index((at / 16) as i16), scales);
                sum = _mm512_dpwssd_epi32(sum, p, sc);
            }
        }
        // Lane 0: d_x d_y, lane 1: dmin_x d_y. d and dmin end the block: a 4-byte load.
        let bits = u32::from_le_bytes([x.d[0], x.d[1], x.dmin[0], x.dmin[1]]);
        let d = _mm_mul_ps(
            _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)),
            _mm_set1_ps(y.scale()),
        );
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), acc);
        let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(d));
        acc_min = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(summs), acc_min);
    }
    _mm512_reduce_add_ps(acc) - hsum_ps(acc_min)
}

/// # Safety
/// As for [`q2_k`].
#[inline(always)]
pub(crate) unsafe fn q3_k(x: &[BlockQ3_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm512_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let sc16 = q3_k_scales(&x.scales);
        let scales = _mm512_castsi256_si512(sc16);
        // The quants are stored as q + 4 (0..=7): Σ sc (q + 4) y - 4 Σ sc bsum.
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let offset = _mm256_slli_epi32::<2>(_mm256_madd_epi16(bsums, sc16));
        let hmask = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.hmask.as_ptr().cast()));
        let mut sum = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
        for c in 0..2 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast());
            for h in 0..2 {
                // Bit b = 4 c + s of hmask[l] is the high bit of element 32 b + l, s = 2h, 2h+1.
                let b = 4 * c + 2 * h;
                let bits = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi8((1u8 << b) as i8)),
                    _mm256_set1_epi8((1u8 << (b + 1)) as i8),
                );
                let high = _mm512_test_epi8_mask(hmask, bits);
                let low = two_bit_pair(q, h);
                let u = _mm512_mask_add_epi8(low, high, low, _mm512_set1_epi8(4));
                let at = 128 * c + 64 * h;
                let yq = _mm512_loadu_si512(y.qs.as_ptr().add(at).cast());
                let p = _mm512_maddubs_epi16(u, yq);
                let sc = _mm512_permutexvar_epi16(scale_index((at / 16) as i16), scales);
                sum = _mm512_dpwssd_epi32(sum, p, sc);
            }
        }
        // `d` ends the block: too close to the row's end for `f16x4`.
        let d = _mm512_set1_ps(y.scale() * f16(x.d));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc);
    }
    _mm512_reduce_add_ps(acc)
}
