//! AVX2 `vec_dot` of Q2_K and Q3_K against Q8_K. Both have 16 sub-blocks of 16: per 32
//! elements, `vpmaddubsw` of the unsigned 2- or 3-bit quants with the activation bytes, then an
//! i16 multiply-add by the two sub-block scales into i32 lanes. Q2_K's minimums and Q3_K's
//! offset (its quants are stored as `q + 4`) come from Q8_K's 16-element sums, as in the scalar
//! reference (`dot/k_quants.rs`).

use std::arch::x86_64::*;

use super::super::{f16, hsum_ps, load32, IntDot};
use super::lattice::{pick_pair, split_scales, u32_at};
use crate::k_quants::{BlockQ2_K, BlockQ3_K};
use crate::q8_k::BlockQ8_K;

/// Elements `128 c + 32 s .. + 32` of a 2-bit plane whose bytes `32 c .. 32 c + 32` are `q`.
#[inline(always)]
unsafe fn two_bits(q: __m256i, s: usize) -> __m256i {
    _mm256_and_si256(
        _mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * s as i32)),
        _mm256_set1_epi8(3),
    )
}

/// The d and dmin fields (f16) that end a Q2_K block, as f32 lanes 0 and 1: a 4-byte load, as
/// the block may end the row.
#[inline(always)]
unsafe fn d_dmin(x: &BlockQ2_K) -> __m128 {
    let bits = u32::from_le_bytes([x.d[0], x.d[1], x.dmin[0], x.dmin[1]]);
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn q2_k<M: IntDot>(x: &[BlockQ2_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for (x, y) in x.iter().zip(y) {
        let packed = _mm_loadu_si128(x.scales.as_ptr().cast());
        let low4 = _mm_set1_epi8(0x0f);
        let scales = split_scales(_mm256_cvtepu8_epi16(_mm_and_si128(packed, low4)));
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        let summs = _mm256_madd_epi16(load32(y.bsums.as_ptr()), mins);
        let mut sums = [_mm256_setzero_si256(); 2];
        for (c, &scales) in scales.iter().enumerate() {
            let q = load32(x.qs.as_ptr().add(32 * c));
            for s in 0..4 {
                let yq = load32(y.qs.as_ptr().add(128 * c + 32 * s));
                let p = _mm256_maddubs_epi16(two_bits(q, s), yq);
                sums[s % 2] = M::madd_i16(sums[s % 2], p, pick_pair(scales, 2 * s));
            }
        }
        // Lane 0: d_x d_y, lane 1: dmin_x d_y.
        let d = _mm_mul_ps(d_dmin(x), _mm_set1_ps(y.scale()));
        let sum = _mm256_add_epi32(sums[0], sums[1]);
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc);
        let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(d));
        acc_min = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(summs), acc_min);
    }
    hsum_ps(acc) - hsum_ps(acc_min)
}

/// The 16 six-bit scales of a Q3_K block minus 32, as i16 lanes (`q3_k_scales`, four at a
/// time): low nibbles from bytes 0..8, high 2-bit pairs from bytes 8..12.
#[inline(always)]
pub(crate) unsafe fn q3_k_scales(packed: &[u8; 12]) -> __m256i {
    let (a, b, c) = (u32_at(packed, 0), u32_at(packed, 4), u32_at(packed, 8));
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let word = |low: u32, shift: u32| (low & LOW4) | ((c >> shift) & LOW2) << 4;
    let scales = _mm_set_epi32(
        word(b >> 4, 6) as i32,
        word(a >> 4, 4) as i32,
        word(b, 2) as i32,
        word(a, 0) as i32,
    );
    _mm256_cvtepi8_epi16(_mm_sub_epi8(scales, _mm_set1_epi8(32)))
}

/// # Safety
/// As for [`q2_k`].
#[inline(always)]
pub(crate) unsafe fn q3_k<M: IntDot>(x: &[BlockQ3_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let sc16 = q3_k_scales(&x.scales);
        let scales = split_scales(sc16);
        // The quants are stored as q + 4 (0..=7): Σ sc (q + 4) y - 4 Σ sc bsum.
        let offset = _mm256_madd_epi16(load32(y.bsums.as_ptr()), sc16);
        let hmask = load32(x.hmask.as_ptr());
        let mut sums = [_mm256_setzero_si256(); 2];
        for (c, &scales) in scales.iter().enumerate() {
            let q = load32(x.qs.as_ptr().add(32 * c));
            for s in 0..4 {
                // Bit 4 c + s of hmask[l] is the high bit of element 128 c + 32 s + l.
                let h = _mm256_srl_epi16(hmask, _mm_cvtsi32_si128((4 * c + s) as i32));
                let h = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(1)), 2);
                let u = _mm256_or_si256(two_bits(q, s), h);
                let yq = load32(y.qs.as_ptr().add(128 * c + 32 * s));
                let p = _mm256_maddubs_epi16(u, yq);
                sums[s % 2] = M::madd_i16(sums[s % 2], p, pick_pair(scales, 2 * s));
            }
        }
        let sum = _mm256_add_epi32(sums[0], sums[1]);
        let sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 2));
        // `d` ends the block: too close to the row's end for `f16x4`.
        let d = _mm256_set1_ps(y.scale() * f16(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
    }
    hsum_ps(acc)
}
