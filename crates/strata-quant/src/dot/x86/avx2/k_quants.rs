//! AVX2 `vec_dot` of Q5_K and Q6_K against Q8_K (Q4_K: `q4_k.rs`). Per 32 elements: `vpmaddubsw` of the
//! unsigned quants with the activation bytes (pair sums fit i16), then one i16 × i16
//! multiply-add by the sub-block scale into i32 lanes; the exact i32 block sum is scaled once in
//! float. Minimums (Q4_K, Q5_K) and Q6_K's -32 offset come from Q8_K's 16-element sums.

use std::arch::x86_64::*;

use super::super::{block_ptr, f16, f16x4, hsum_ps, hsum_ps128, load32, IntDot};
use crate::k_quants::{scales_mins_k4, BlockQ5_K, BlockQ6_K, K_SCALE_SIZE};
use crate::q8_k::BlockQ8_K;

/// Σ_g `mins[g]` · (bsum(2g) + bsum(2g+1)) as 4 i32 lanes.
#[inline(always)]
pub(crate) unsafe fn min_terms(mins: u64, y: &BlockQ8_K) -> __m128i {
    let bsums = load32(y.bsums.as_ptr());
    let pairs = _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums),
        _mm256_extracti128_si256(bsums, 1),
    );
    _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64)), pairs)
}

/// i16 lanes all holding i16 lane `g` of `scales16` (which repeats its 8 lanes in both halves).
#[inline(always)]
unsafe fn broadcast_scale(scales16: __m256i, g: u8) -> __m256i {
    let pick = _mm256_set1_epi16(i16::from_le_bytes([2 * g, 2 * g + 1]));
    _mm256_shuffle_epi8(scales16, pick)
}

/// Q5_K: blocks starting with the f16 `d` and `dmin` (Q4_K has its own kernel, `q4_k.rs`).
pub(crate) trait AffineK {
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE];
    /// The unsigned quants of elements `64c..64c+32` and `64c+32..64c+64`.
    unsafe fn quants(&self, c: usize) -> (__m256i, __m256i);
}

impl AffineK for BlockQ5_K {
    #[inline(always)]
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE] {
        &self.scales
    }
    #[inline(always)]
    unsafe fn quants(&self, c: usize) -> (__m256i, __m256i) {
        let (low4, bit4) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x10));
        let q = load32(self.qs.as_ptr().add(32 * c));
        // Bit 2c of qh[l] is the 5th bit of element 64c + l, bit 2c + 1 of 64c + 32 + l.
        let h = _mm256_srl_epi16(load32(self.qh.as_ptr()), _mm_cvtsi32_si128(2 * c as i32));
        let h_lo = _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4);
        let h_hi = _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4);
        (
            _mm256_or_si256(_mm256_and_si256(q, low4), h_lo),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), h_hi),
        )
    }
}

/// Σ over Q5_K blocks of `d_x d_y Σ_g sc_g Σ q y - dmin_x d_y Σ_g m_g Σ y`.
#[inline(always)]
unsafe fn affine_k<X: AffineK, M: IntDot>(x: &[X], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (_mm256_setzero_ps(), _mm_setzero_ps());
    for (x, y) in x.iter().zip(y) {
        let (scales, mins) = scales_mins_k4(x.packed_scales());
        let scales8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64));
        let scales16 = _mm256_broadcastsi128_si256(scales8);
        let mut sum = _mm256_setzero_si256();
        for c in 0..4 {
            let (lo, hi) = x.quants(c);
            let y_lo = load32(y.qs.as_ptr().add(64 * c));
            let y_hi = load32(y.qs.as_ptr().add(64 * c + 32));
            let p_lo = _mm256_maddubs_epi16(lo, y_lo);
            let p_hi = _mm256_maddubs_epi16(hi, y_hi);
            sum = M::madd_i16(sum, p_lo, broadcast_scale(scales16, 2 * c as u8));
            sum = M::madd_i16(sum, p_hi, broadcast_scale(scales16, 2 * c as u8 + 1));
        }
        // Lane 0: d_x d_y, lane 1: dmin_x d_y.
        let d = _mm_mul_ps(f16x4(block_ptr(x)), _mm_set1_ps(y.scale()));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc);
        let dmin = _mm_permute_ps::<0b01_01_01_01>(d);
        acc_min = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(min_terms(mins, y)), acc_min);
    }
    hsum_ps(acc) - hsum_ps128(acc_min)
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn q5_k<M: IntDot>(x: &[BlockQ5_K], y: &[BlockQ8_K]) -> f32 {
    affine_k::<_, M>(x, y)
}

/// # Safety
/// As for [`q5_k`].
#[inline(always)]
pub(crate) unsafe fn q6_k<M: IntDot>(x: &[BlockQ6_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let scales = _mm_loadu_si128(x.scales.as_ptr().cast());
        // The quants are stored as q + 32 (0..=63): Σ sc (q + 32) y - 32 Σ sc bsum.
        let offset = _mm256_madd_epi16(load32(y.bsums.as_ptr()), _mm256_cvtepi8_epi16(scales));
        let mut sum = _mm256_setzero_si256();
        for c in 0..2 {
            let q = q6_k_quants(x, c);
            for (t, q) in q.into_iter().enumerate() {
                let yq = load32(y.qs.as_ptr().add(128 * c + 32 * t));
                let sc = q6_k_scale_pair(scales, 4 * c + t);
                sum = M::madd_i16(sum, _mm256_maddubs_epi16(q, yq), sc);
            }
        }
        let sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
        // `d` ends the block: too close to the row's end for `f16x4`.
        let d = _mm256_set1_ps(y.scale() * f16(x.d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
    }
    hsum_ps(acc)
}

/// The stored six-bit quants (q + 32, 0..=63) of half `c` (elements 128c .. 128c + 128) of a
/// Q6_K block, as four 32-byte groups: group t holds elements 128c + 32t .. + 32
/// (ggml `block_q6_K`: low nibbles in `ql`, high two bits in `qh`).
///
/// # Safety
/// AVX2 present; `c` < 2.
#[inline(always)]
pub(crate) unsafe fn q6_k_quants(x: &BlockQ6_K, c: usize) -> [__m256i; 4] {
    let (low4, low2) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x03));
    let ql0 = load32(x.ql.as_ptr().add(64 * c));
    let ql1 = load32(x.ql.as_ptr().add(64 * c + 32));
    let qh = load32(x.qh.as_ptr().add(32 * c));
    let high = [
        _mm256_slli_epi16(_mm256_and_si256(qh, low2), 4),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), low2), 4),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), low2), 4),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), low2), 4),
    ];
    [
        _mm256_or_si256(_mm256_and_si256(ql0, low4), high[0]),
        _mm256_or_si256(_mm256_and_si256(ql1, low4), high[1]),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high[2]),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high[3]),
    ]
}

/// The i16 scales of 32-element group `g` (0..8) of a Q6_K block, from its 16 `scales`:
/// elements 0..16 of the group take sub-block 2g's scale, 16..32 sub-block 2g + 1's.
///
/// # Safety
/// AVX2 present.
#[inline(always)]
pub(crate) unsafe fn q6_k_scale_pair(scales: __m128i, g: usize) -> __m256i {
    let k = (2 * g) as i64;
    let pick = _mm_set_epi64x((k + 1) * 0x0101_0101_0101_0101, k * 0x0101_0101_0101_0101);
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick))
}
