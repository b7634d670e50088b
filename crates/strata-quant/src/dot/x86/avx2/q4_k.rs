//! AVX2 `vec_dot` of Q4_K against Q8_K, generic over the integer dot ([`IntDot`]), with one
//! scale multiply per block instead of one per register.
//!
//! A Q4_K block has 8 sub-blocks of 32 elements, each with its own 6-bit scale and min. Every
//! step below first makes the 8 exact sub-block dot products `Σ_s`, sub-block `s` in i32 lane
//! `s`, and then is
//!
//! ```text
//! acc += d_y · ((d_x·sc_s) · Σ_s)      − (dmin_x·m_s) · (d_y · bsum_s)
//! ```
//!
//! with the lane's scale and min made by [`decode`] and `d_y · bsum` by [`prep`]. The sums come
//! in two forms with the same lanes, so the same bits:
//!
//! - **transposed** ([`decode`], [`prep`], [`step_tile`]): both sides as 8 × 8 matrices of
//!   4-byte pieces, register `r` holding piece `r` of every sub-block, so the eight registers'
//!   products summed per lane ([`IntDot::sum8_u8i8_tile`]) are the sub-block sums. The
//!   transpose costs 24 shuffles a block, paid once per row for a tile of many tokens;
//! - **row form** ([`decode_row`], [`prep_row`], [`step_row_tile`]), for one token at a time:
//!   each 32-byte register of the file keeps its pieces in place, the low nibbles of its even
//!   i32 lanes and the high nibbles of its odd lanes paired with a copy whose neighbouring
//!   lanes are swapped (sub-blocks `2c` and `2c + 1` alternate by lane), the activations
//!   arranged to match once per token; the products are then folded into lane `s` by a tree
//!   of blends ([`sub_block_sums`]): 7 shuffles a block.
//!
//! [`q4_k`] is the row form's loop over a row; the GEMM tiles (`gemm/x86/avx2.rs`) run the
//! transposed form for several tokens and the row form for one.

use std::arch::x86_64::*;

use super::super::{block_ptr, f16x4, hsum_ps, load32, IntDot};
use crate::k_quants::{scales_mins_k4, BlockQ4_K};
use crate::q8_k::BlockQ8_K;

/// A decoded weight block: the eight quant registers (transposed, or in the row form), then
/// per i32 lane (sub-block `s`) `d·sc_s` and `dmin·m_s`.
pub(crate) type Dec = ([__m256i; 8], __m256, __m256);
/// A prepared activation block: the eight quant registers (in the weights' form), `d_y` in every
/// lane, and per lane `d_y` times the sum of sub-block `s`'s activations.
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

/// Decodes one weight block, transposed.
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
    let (scales, mins) = scales_and_mins(x);
    (transpose(sub), scales, mins)
}

/// Prepares one activation block, transposed.
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
    let (dy, dy_bsums) = activation_scales(y);
    (transpose(sub), dy, dy_bsums)
}

/// Per i32 lane `s`, `d·sc_s` and `dmin·m_s` of a weight block.
#[inline(always)]
unsafe fn scales_and_mins(x: &BlockQ4_K) -> (__m256, __m256) {
    let (scales, mins) = scales_mins_k4(&x.scales);
    let d = f16x4(block_ptr(x));
    let dx = _mm256_broadcastss_ps(d);
    let dmin = _mm256_broadcastss_ps(_mm_permute_ps::<0b01_01_01_01>(d));
    (
        _mm256_mul_ps(dx, bytes_f32(scales)),
        _mm256_mul_ps(dmin, bytes_f32(mins)),
    )
}

/// Swaps neighbouring i32 lanes (0 ↔ 1, 2 ↔ 3, …).
#[inline(always)]
unsafe fn swap_neighbours(v: __m256i) -> __m256i {
    _mm256_shuffle_epi32::<0b10_11_00_01>(v)
}

/// The nibbles of a weight register in the row form: the low nibbles of even i32 lanes and the
/// high nibbles of odd lanes, each in its own byte.
#[inline(always)]
unsafe fn alternate_nibbles(q: __m256i) -> __m256i {
    let shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    _mm256_and_si256(_mm256_srlv_epi32(q, shifts), _mm256_set1_epi8(0x0f))
}

/// Decodes one weight block in the row form: for each 32 bytes `q_c` of `qs` (sub-blocks
/// `2c`, low nibbles, and `2c + 1`, high), [`alternate_nibbles`] of `q_c` and of `q_c` with
/// its neighbouring lanes swapped: in both, even lanes hold pieces of sub-block `2c` and odd
/// lanes of `2c + 1`. Scales and mins as in [`decode`].
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn decode_row(x: &BlockQ4_K) -> Dec {
    let mut pairs = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let q = load32(x.qs.as_ptr().add(32 * c));
        pairs[2 * c] = alternate_nibbles(q);
        pairs[2 * c + 1] = alternate_nibbles(swap_neighbours(q));
    }
    let (scales, mins) = scales_and_mins(x);
    (pairs, scales, mins)
}

/// Prepares one activation block in the row form, matching [`decode_row`]: for sub-blocks
/// `a = 2c` and `b = 2c + 1`, `a`'s even lanes with `b`'s odd ones, and `a`'s odd lanes with
/// `b`'s even ones, neighbours swapped. `d_y` and `d_y · bsum` as in [`prep`].
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn prep_row(y: &BlockQ8_K) -> Prep {
    let yq = y.qs.as_ptr();
    let mut pairs = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let a = load32(yq.add(64 * c));
        let b = load32(yq.add(64 * c + 32));
        pairs[2 * c] = _mm256_blend_epi32::<0b1010_1010>(a, b);
        pairs[2 * c + 1] = swap_neighbours(_mm256_blend_epi32::<0b0101_0101>(a, b));
    }
    let (dy, dy_bsums) = activation_scales(y);
    (pairs, dy, dy_bsums)
}

/// `d_y` in every lane, and per lane `s` `d_y` times the sum of sub-block `s`'s activations.
#[inline(always)]
unsafe fn activation_scales(y: &BlockQ8_K) -> (__m256, __m256) {
    // Sums of 16 (i16), pairwise: sub-block sums in i32 lanes.
    let bsums = _mm256_madd_epi16(load32(y.bsums.as_ptr()), _mm256_set1_epi16(1));
    let dy = _mm256_set1_ps(y.scale());
    (dy, _mm256_mul_ps(dy, _mm256_cvtepi32_ps(bsums)))
}

/// The 8 sub-block sums of a row-form weight block and activation block, sub-block `s` in
/// i32 lane `s` (exact).
///
/// Each pair `c` gives a narrow sum ([`IntDot::dot2_u8i8_narrow`]) with sub-block `2c` in its
/// even lanes and `2c + 1` in its odd lanes. Two such sums fold into one with sub-blocks
/// `0..4` (or `4..8`) in lanes `0..4` of both halves: lanes 0–1 of the first and 2–3 of the
/// second, added to the others with their 64-bit halves swapped. The halves of those two
/// then fold into lanes `0..8`. Every lane of the result sums 4 narrow sums (32 products).
///
/// # Safety
/// As for [`decode`], and `M`'s instructions are available.
#[inline(always)]
unsafe fn sub_block_sums<M: IntDot>(w: &[__m256i; 8], a: &[__m256i; 8]) -> __m256i {
    let mut p = [_mm256_setzero_si256(); 4];
    for (c, p) in p.iter_mut().enumerate() {
        *p = M::dot2_u8i8_narrow(w[2 * c], a[2 * c], w[2 * c + 1], a[2 * c + 1]);
    }
    let mut q = [_mm256_setzero_si256(); 2];
    for (h, q) in q.iter_mut().enumerate() {
        let (x, y) = (p[2 * h], p[2 * h + 1]);
        let kept = _mm256_blend_epi32::<0b1100_1100>(x, y);
        let moved = _mm256_shuffle_epi32::<0b01_00_11_10>(_mm256_blend_epi32::<0b0011_0011>(x, y));
        *q = M::add_narrow(kept, moved);
    }
    let kept = _mm256_blend_epi32::<0b1111_0000>(q[0], q[1]);
    let moved = _mm256_permute2x128_si256::<0x21>(q[0], q[1]);
    M::widen_narrow(M::add_narrow(kept, moved))
}

/// One block's products added to `acc` for every (row, token) pair of an `R × T` tile in the
/// transposed form, the integer sums interleaved
/// ([`IntDot::sum8_u8i8_tile`]) and then each pair's float part: the same bits as one pair at
/// a time.
///
/// # Safety
/// As for [`decode`], and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn step_tile<M: IntDot, const R: usize, const T: usize>(
    acc: &mut [[__m256; T]; R],
    w: [&Dec; R],
    a: [&Prep; T],
) {
    let sums = M::sum8_u8i8_tile(w.map(|w| &w.0), a.map(|a| &a.0));
    for i in 0..R {
        for j in 0..T {
            acc[i][j] = add_block(acc[i][j], sums[i][j], w[i], a[j]);
        }
    }
}

/// [`step_tile`] in the row form ([`decode_row`], [`prep_row`]): each pair's sums by
/// [`sub_block_sums`], then the same float part.
///
/// # Safety
/// As for [`decode`], and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn step_row_tile<M: IntDot, const R: usize, const T: usize>(
    acc: &mut [[__m256; T]; R],
    w: [&Dec; R],
    a: [&Prep; T],
) {
    for i in 0..R {
        for j in 0..T {
            let sums = sub_block_sums::<M>(&w[i].0, &a[j].0);
            acc[i][j] = add_block(acc[i][j], sums, w[i], a[j]);
        }
    }
}

/// One block's float part: `acc + d_y · ((d_x·sc_s) · Σ_s) − (dmin_x·m_s) · (d_y · bsum_s)`
/// per lane, from the exact sub-block sums `sums`.
#[inline(always)]
unsafe fn add_block(acc: __m256, sums: __m256i, w: &Dec, a: &Prep) -> __m256 {
    let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), w.1);
    let fma = _mm256_fmadd_ps(scaled, a.1, acc);
    _mm256_fnmadd_ps(w.2, a.2, fma)
}

/// The dot product from the accumulator.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn finish(acc: __m256) -> f32 {
    hsum_ps(acc)
}

/// `vec_dot` of a Q4_K row and a Q8_K row, in the row form.
///
/// # Safety
/// As for [`decode`], and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn q4_k<M: IntDot>(x: &[BlockQ4_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = [[_mm256_setzero_ps()]];
    for (x, y) in x.iter().zip(y) {
        step_row_tile::<M, 1, 1>(&mut acc, [&decode_row(x)], [&prep_row(y)]);
    }
    finish(acc[0][0])
}
