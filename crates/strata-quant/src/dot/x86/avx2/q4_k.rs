//! AVX2 `vec_dot` of Q4_K against Q8_K, generic over the integer dot ([`IntDot`]), with one
//! scale multiply per block instead of one per register.
//!
//! A Q4_K block has 8 sub-blocks of 32 elements, each with its own 6-bit scale and min. Both
//! sides are first transposed as 8 × 8 matrices of 4-byte pieces ([`decode`] for the weights,
//! [`prep`] for the activations): register `r` holds piece `r` of every sub-block, sub-block
//! `s` in i32 lane `s`. The eight registers' products summed per lane ([`IntDot::sum8_u8i8_tile`])
//! are then the exact sub-block dot products, and one step per block is
//!
//! ```text
//! acc += d_y · ((d_x·sc_s) · Σ_s)      − (dmin_x·m_s) · (d_y · bsum_s)
//! ```
//!
//! with the lane's scale and min made by [`decode`] and `d_y · bsum` by [`prep`]. [`q4_k`] is
//! this loop over a row; the GEMM tiles (`gemm/x86/avx2.rs`) run the same three parts with
//! each decoded row and each prepared token reused, which gives the same bits.

use std::arch::x86_64::*;

use super::super::{block_ptr, f16x4, hsum_ps, load32, IntDot};
use crate::k_quants::{scales_mins_k4, BlockQ4_K};
use crate::q8_k::BlockQ8_K;

/// A decoded weight block: the eight transposed quant registers, then per i32 lane (sub-block
/// `s`) `d·sc_s` and `dmin·m_s`.
pub(crate) type Dec = ([__m256i; 8], __m256, __m256);
/// A prepared activation block: the eight transposed quant registers, `d_y` in every lane, and
/// per lane `d_y` times the sum of sub-block `s`'s activations.
pub(crate) type Prep = ([__m256i; 8], __m256, __m256);

/// The 8 × 8 transpose of 4-byte pieces: `r[s]` holds sub-block `s` (8 pieces); result `c`
/// holds piece `c` of sub-blocks 0..8, one per i32 lane.
#[inline(always)]
unsafe fn transpose(r: [__m256i; 8]) -> [__m256i; 8] {
    let t: [__m256i; 8] = [
        _mm256_unpacklo_epi32(r[0], r[1]),
        _mm256_unpackhi_epi32(r[0], r[1]),
        _mm256_unpacklo_epi32(r[2], r[3]),
        _mm256_unpackhi_epi32(r[2], r[3]),
        _mm256_unpacklo_epi32(r[4], r[5]),
        _mm256_unpackhi_epi32(r[4], r[5]),
        _mm256_unpacklo_epi32(r[6], r[7]),
        _mm256_unpackhi_epi32(r[6], r[7]),
    ];
    // Pieces (0, 4), (1, 5), (2, 6), (3, 7) of sub-blocks 0..4, then of 4..8.
    let u: [__m256i; 8] = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    [
        _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
        _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
    ]
}

/// The 8 bytes of a u64 as f32 lanes.
#[inline(always)]
unsafe fn bytes_f32(bytes: u64) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64)))
}

/// Decodes one weight block.
///
/// # Safety
/// AVX2, FMA and F16C are available.
#[inline(always)]
pub(crate) unsafe fn decode(x: &BlockQ4_K) -> Dec {
    let low4 = _mm256_set1_epi8(0x0f);
    let mut sub = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        // Bytes 32c + l: element l of sub-block 2c (low nibble) and of 2c + 1 (high).
        let q = load32(x.qs.as_ptr().add(32 * c));
        sub[2 * c] = _mm256_and_si256(q, low4);
        sub[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low4);
    }
    let (scales, mins) = scales_mins_k4(&x.scales);
    let d = f16x4(block_ptr(x));
    let dx = _mm256_broadcastss_ps(d);
    let dmin = _mm256_broadcastss_ps(_mm_permute_ps::<0b01_01_01_01>(d));
    (
        transpose(sub),
        _mm256_mul_ps(dx, bytes_f32(scales)),
        _mm256_mul_ps(dmin, bytes_f32(mins)),
    )
}

/// Prepares one activation block.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn prep(y: &BlockQ8_K) -> Prep {
    let yq = y.qs.as_ptr();
    let mut sub = [_mm256_setzero_si256(); 8];
    for (s, sub) in sub.iter_mut().enumerate() {
        *sub = load32(yq.add(32 * s));
    }
    // Sums of 16 (i16), pairwise: sub-block sums in i32 lanes.
    let bsums = _mm256_madd_epi16(load32(y.bsums.as_ptr()), _mm256_set1_epi16(1));
    let dy = _mm256_set1_ps(y.scale());
    (
        transpose(sub),
        dy,
        _mm256_mul_ps(dy, _mm256_cvtepi32_ps(bsums)),
    )
}

/// One block's products added to `acc`.
///
/// # Safety
/// As for [`decode`], and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn step<M: IntDot>(acc: __m256, w: &Dec, a: &Prep) -> __m256 {
    let mut tile = [[acc]];
    step_tile::<M, 1, 1>(&mut tile, [w], [a]);
    tile[0][0]
}

/// [`step`] of every (row, token) pair of an `R × T` tile, the integer sums interleaved
/// ([`IntDot::sum8_u8i8_tile`]) and then each pair's float part: the same bits as one pair at
/// a time.
///
/// # Safety
/// As for [`step`].
#[inline(always)]
pub(crate) unsafe fn step_tile<M: IntDot, const R: usize, const T: usize>(
    acc: &mut [[__m256; T]; R],
    w: [&Dec; R],
    a: [&Prep; T],
) {
    let sums = M::sum8_u8i8_tile(w.map(|w| &w.0), a.map(|a| &a.0));
    for i in 0..R {
        for j in 0..T {
            let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(sums[i][j]), w[i].1);
            let fma = _mm256_fmadd_ps(scaled, a[j].1, acc[i][j]);
            acc[i][j] = _mm256_fnmadd_ps(w[i].2, a[j].2, fma);
        }
    }
}

/// The dot product from the accumulator.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn finish(acc: __m256) -> f32 {
    hsum_ps(acc)
}

/// `vec_dot` of a Q4_K row and a Q8_K row.
///
/// # Safety
/// As for [`step`].
#[inline(always)]
pub(crate) unsafe fn q4_k<M: IntDot>(x: &[BlockQ4_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        acc = step::<M>(acc, &decode(x), &prep(y));
    }
    finish(acc)
}
