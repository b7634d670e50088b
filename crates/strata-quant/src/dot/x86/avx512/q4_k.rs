//! AVX-512 VNNI `vec_dot` of Q4_K against Q8_K with one `vpdpbusd` per 64 products.
//!
//! A Q4_K block has 8 sub-blocks of 32 elements, each with its own 6-bit scale and min. The
//! weights' nibbles (unsigned) and the activations (signed) go through `vpdpbusd` as they are,
//! four products summed into each i32 lane; for one multiply by the sub-block scales per block
//! instead of one per register, every lane must see one sub-block in all four registers. So
//! both sides are rearranged first ([`decode`] for the weights, [`prep`] for the activations):
//! register `i` holds the `i`-th 8-byte piece of every sub-block, 8-byte slot `p` of a register
//! holding sub-block `σ(p)`, σ = (0, 2, 1, 3, 4, 6, 5, 7). Lanes `2p` and `2p + 1` then sum 16
//! elements of sub-block `σ(p)`, exactly, and one step per block is
//!
//! ```text
//! acc += d_y · (d_x·sc_s) · Σ_lane      − (dmin_x·m_s) · (d_y · bsum_lane)
//! ```
//!
//! with the lane's scale and min as f32 vectors made by [`decode`] and `d_y · bsum` by
//! [`prep`]. [`q4_k`] is this loop over a row; the GEMM tiles (`gemm/x86/avx512.rs`) run the
//! same three parts with each decoded row and each prepared token reused, which gives the same
//! bits. Where the rearranging costs more than it saves (decode: each weight block is used
//! once) it is a few shuffles per 144-byte block, below what DRAM delivers meanwhile.

use std::arch::x86_64::*;

use super::super::{block_ptr, f16x4};
use crate::k_quants::{scales_mins_k4, BlockQ4_K};
use crate::q8_k::BlockQ8_K;

/// A decoded weight block: the four rearranged quant registers, then per i32 lane
/// `d·sc_s` and `dmin·m_s` of the lane's sub-block `s`.
pub(crate) type Dec = ([__m512i; 4], __m512, __m512);
/// A prepared activation block: the four rearranged quant registers, `d_y` in every lane, and
/// per lane `d_y` times the sum of the 16 activations whose products the matching lane of a
/// min term takes (`bsums[2s]` in lane `2p`, `bsums[2s + 1]` in lane `2p + 1`).
pub(crate) type Prep = ([__m512i; 4], __m512, __m512);

/// Register `i` ← 8-byte piece `i` of every sub-block, from two registers `x`, `y` holding
/// sub-blocks (a, b) and (c, d) in 32-byte halves and two more `z`, `w`, with `pair` the
/// first-level selection that lists the pieces in σ's order (module docs).
#[inline(always)]
unsafe fn transpose(
    x: __m512i,
    y: __m512i,
    z: __m512i,
    w: __m512i,
    pair: [i64; 8],
) -> [__m512i; 4] {
    let lo = _mm512_set_epi64(
        pair[7], pair[6], pair[5], pair[4], pair[3], pair[2], pair[1], pair[0],
    );
    let hi = _mm512_add_epi64(lo, _mm512_set1_epi64(2));
    // Pieces 0 and 1 (`lo`) or 2 and 3 (`hi`) of four sub-blocks.
    let (u0, v0) = (
        _mm512_permutex2var_epi64(x, lo, y),
        _mm512_permutex2var_epi64(x, hi, y),
    );
    let (u1, v1) = (
        _mm512_permutex2var_epi64(z, lo, w),
        _mm512_permutex2var_epi64(z, hi, w),
    );
    [
        _mm512_shuffle_i64x2::<0x44>(u0, u1),
        _mm512_shuffle_i64x2::<0xee>(u0, u1),
        _mm512_shuffle_i64x2::<0x44>(v0, v1),
        _mm512_shuffle_i64x2::<0xee>(v0, v1),
    ]
}

/// The weights' first-level selection: `x` = (sub-blocks 0, 2), `y` = (1, 3) as the nibbles
/// unpack, so pieces list 0, 2, 1, 3.
const WEIGHT_PAIRS: [i64; 8] = [0, 4, 8, 12, 1, 5, 9, 13];
/// The activations' first-level selection: `x` = (0, 1), `y` = (2, 3) in memory order.
const ACT_PAIRS: [i64; 8] = [0, 8, 4, 12, 1, 9, 5, 13];

/// Byte `σ(p)` of a u64 in i32 lanes `2p` and `2p + 1` (σ: module docs), as f32.
#[inline(always)]
unsafe fn per_lane(bytes: u64) -> __m512 {
    let pick = _mm_setr_epi8(0, 0, 2, 2, 1, 1, 3, 3, 4, 4, 6, 6, 5, 5, 7, 7);
    let b = _mm_shuffle_epi8(_mm_cvtsi64_si128(bytes as i64), pick);
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b))
}

/// Decodes one weight block.
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2 and F16C are available.
#[inline(always)]
pub(crate) unsafe fn decode(x: &BlockQ4_K) -> Dec {
    let low4 = _mm512_set1_epi8(0x0f);
    let q01 = _mm512_loadu_si512(x.qs.as_ptr().cast());
    let q23 = _mm512_loadu_si512(x.qs.as_ptr().add(64).cast());
    // No closures: they would not inherit the caller's target features.
    let (lo01, hi01) = (
        _mm512_and_si512(q01, low4),
        _mm512_and_si512(_mm512_srli_epi16::<4>(q01), low4),
    );
    let (lo23, hi23) = (
        _mm512_and_si512(q23, low4),
        _mm512_and_si512(_mm512_srli_epi16::<4>(q23), low4),
    );
    let q = transpose(lo01, hi01, lo23, hi23, WEIGHT_PAIRS);
    let (scales, mins) = scales_mins_k4(&x.scales);
    let d = f16x4(block_ptr(x));
    let dx = _mm512_broadcastss_ps(d);
    let dmin = _mm512_broadcastss_ps(_mm_permute_ps::<0b01_01_01_01>(d));
    (
        q,
        _mm512_mul_ps(dx, per_lane(scales)),
        _mm512_mul_ps(dmin, per_lane(mins)),
    )
}

/// Prepares one activation block.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn prep(y: &BlockQ8_K) -> Prep {
    let yq = y.qs.as_ptr();
    let q = transpose(
        _mm512_loadu_si512(yq.cast()),
        _mm512_loadu_si512(yq.add(64).cast()),
        _mm512_loadu_si512(yq.add(128).cast()),
        _mm512_loadu_si512(yq.add(192).cast()),
        ACT_PAIRS,
    );
    // i16 sums of 16: pairs (2s, 2s + 1) are one i32 each, listed in piece order.
    let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
    let order = _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7);
    let bsums = _mm256_permutevar8x32_epi32(bsums, order);
    let dy = _mm512_set1_ps(y.scale());
    let bs = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(bsums));
    (q, dy, _mm512_mul_ps(dy, bs))
}

/// One block's products added to `acc`.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn step(acc: __m512, w: &Dec, a: &Prep) -> __m512 {
    let mut tile = [[acc]];
    step_tile::<1, 1>(&mut tile, [w], [a]);
    tile[0][0]
}

/// [`step`] of every (row, token) pair of an `R × T` tile, the `vpdpbusd` chains interleaved
/// register by register (one register of every row and every token live at a time, where
/// pair-by-pair steps would keep whole rows and tokens live and spill), then each pair's
/// float part: the same bits as one pair at a time.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn step_tile<const R: usize, const T: usize>(
    acc: &mut [[__m512; T]; R],
    w: [&Dec; R],
    a: [&Prep; T],
) {
    let mut sums = [[_mm512_setzero_si512(); T]; R];
    for r in 0..4 {
        for i in 0..R {
            for j in 0..T {
                sums[i][j] = _mm512_dpbusd_epi32(sums[i][j], w[i].0[r], a[j].0[r]);
            }
        }
    }
    for i in 0..R {
        for j in 0..T {
            let scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(sums[i][j]), w[i].1);
            let fma = _mm512_fmadd_ps(scaled, a[j].1, acc[i][j]);
            acc[i][j] = _mm512_fnmadd_ps(w[i].2, a[j].2, fma);
        }
    }
}

/// The dot product from the accumulator.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn finish(acc: __m512) -> f32 {
    _mm512_reduce_add_ps(acc)
}

/// `vec_dot` of a Q4_K row and a Q8_K row.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn q4_k(x: &[BlockQ4_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm512_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        acc = step(acc, &decode(x), &prep(y));
    }
    finish(acc)
}
