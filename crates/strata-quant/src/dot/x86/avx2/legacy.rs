//! AVX2 `vec_dot` of the 32-element formats against Q8_0 / Q8_1: one block is one 256-bit
//! register of bytes. Signed weights use the sign trick (|x| times y with x's sign), so one
//! u8 × i8 dot gives the exact i32 block sum; each block then adds `d_x d_y · sum` to a float
//! accumulator (two accumulators, alternating, to hide the FMA latency).

use std::arch::x86_64::*;

use super::super::{
    block_ptr, bytes_from_bits, f16x4, hsum_ps, load32, nibbles32, sign_split, IntDot,
};
use crate::iq4::BlockIQ4_NL;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// A weight block whose 32 quants are signed bytes (Q4_0, Q5_0, Q8_0, IQ4_NL). Every one
/// starts with its f16 scale, followed by at least 6 more bytes.
pub(crate) trait Signed {
    /// The 32 quants as i8 lanes, in element order.
    unsafe fn quants(&self) -> __m256i;
}

/// A weight block with unsigned quants and a minimum (Q4_1, Q5_1): value `d q + m`, starting
/// with the f16 `d` and `m`, followed by at least 4 more bytes.
pub(crate) trait Affine {
    /// The 32 quants as u8 lanes, in element order.
    unsafe fn quants(&self) -> __m256i;
}

impl Signed for BlockQ4_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        _mm256_sub_epi8(nibbles32(&self.qs), _mm256_set1_epi8(8))
    }
}

impl Signed for BlockQ5_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        // q - 16 = the nibble with 0xf0 or'ed in where the 5th bit is clear.
        let high_clear = _mm256_andnot_si256(bytes_from_bits(self.qh), _mm256_set1_epi8(-16));
        _mm256_or_si256(nibbles32(&self.qs), high_clear)
    }
}

impl Signed for BlockQ8_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        load32(self.qs.as_ptr())
    }
}

impl Signed for BlockIQ4_NL {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
        _mm256_shuffle_epi8(table, nibbles32(&self.qs))
    }
}

impl Affine for BlockQ4_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        nibbles32(&self.qs)
    }
}

impl Affine for BlockQ5_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        let high = _mm256_and_si256(bytes_from_bits(self.qh), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles32(&self.qs), high)
    }
}

/// `acc + d_x d_y · Σ x y` for one signed block.
#[inline(always)]
unsafe fn signed_block<X: Signed, M: IntDot>(x: &X, y: &BlockQ8_0, acc: __m256) -> __m256 {
    let (ax, sy) = sign_split(x.quants(), load32(y.qs.as_ptr()));
    let sum = M::dot_u8i8(_mm256_setzero_si256(), ax, sy);
    let d = _mm_mul_ps(f16x4(block_ptr(x)), f16x4(block_ptr(y)));
    _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc)
}

#[inline(always)]
unsafe fn symmetric<X: Signed, M: IntDot>(x: &[X], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (xs, ys) = (x.chunks_exact(2), y.chunks_exact(2));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        acc0 = signed_block::<X, M>(&x[0], &y[0], acc0);
        acc1 = signed_block::<X, M>(&x[1], &y[1], acc1);
    }
    if let (Some(x), Some(y)) = (x_rest.first(), y_rest.first()) {
        acc0 = signed_block::<X, M>(x, y, acc0);
    }
    hsum_ps(_mm256_add_ps(acc0, acc1))
}

/// `acc + d_x d_y · Σ q y` for one affine block, and `acc_m + m_x s_y` in lane 1 of `acc_m`.
#[inline(always)]
unsafe fn affine_block<X: Affine, M: IntDot>(
    x: &X,
    y: &BlockQ8_1,
    acc: __m256,
    acc_m: __m128,
) -> (__m256, __m128) {
    let sum = M::dot_u8i8(_mm256_setzero_si256(), x.quants(), load32(y.qs.as_ptr()));
    // Lane 0: d_x d_y; lane 1: m_x s_y.
    let scales = _mm_mul_ps(f16x4(block_ptr(x)), f16x4(block_ptr(y)));
    let acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(scales), _mm256_cvtepi32_ps(sum), acc);
    (acc, _mm_add_ps(acc_m, scales))
}

#[inline(always)]
unsafe fn affine<X: Affine, M: IntDot>(x: &[X], y: &[BlockQ8_1]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (mut mins0, mut mins1) = (_mm_setzero_ps(), _mm_setzero_ps());
    let (xs, ys) = (x.chunks_exact(2), y.chunks_exact(2));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        (acc0, mins0) = affine_block::<X, M>(&x[0], &y[0], acc0, mins0);
        (acc1, mins1) = affine_block::<X, M>(&x[1], &y[1], acc1, mins1);
    }
    if let (Some(x), Some(y)) = (x_rest.first(), y_rest.first()) {
        (acc0, mins0) = affine_block::<X, M>(x, y, acc0, mins0);
    }
    let mins = _mm_add_ps(mins0, mins1);
    hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(mins))
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn q4_0<M: IntDot>(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_0<M: IntDot>(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`]. Weight quants may be -128 (|x| = 128 still fits the u8 operand).
#[inline(always)]
pub(crate) unsafe fn q8_0<M: IntDot>(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn iq4_nl<M: IntDot>(x: &[BlockIQ4_NL], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q4_1<M: IntDot>(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    affine::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_1<M: IntDot>(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    affine::<_, M>(x, y)
}
