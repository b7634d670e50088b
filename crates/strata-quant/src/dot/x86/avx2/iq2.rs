//! AVX2 `vec_dot` of IQ2_XXS, IQ2_XS and IQ2_S against Q8_K. Per 32 elements: four 8-byte
//! lattice points fetched from the grid into one register, the signs applied to the activation
//! bytes, `vpmaddubsw` (exact: grid bytes <= 43) and one i16 multiply-add by the odd sub-block
//! multiplier `2 s + 1` into i32 lanes. The exact i32 block sum is scaled once in float and the
//! formula's constant 1/8 applied at the end, as the scalar reference does (`dot/iq.rs`).

use std::arch::x86_64::*;

use super::super::{block_ptr, f16x4, hsum_ps, load32, IntDot};
use super::iq3::Partials;
use super::lattice::{
    bits_at, even_signs, negate_where, pick_pair, points64, split_scales, u16_at, u32_at,
};
use crate::iq2::{BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS};
use crate::iq_tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
use crate::q8_k::BlockQ8_K;

/// `acc + d_x d_y · sum` (`d_x` the block's leading f16, which is followed by >= 6 bytes).
#[inline(always)]
pub(crate) unsafe fn add_block<X>(acc: __m256, x: &X, y: &BlockQ8_K, sum: __m256i) -> __m256 {
    let d = _mm_mul_ss(f16x4(block_ptr(x)), _mm_set_ss(y.scale()));
    _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc)
}

/// The 16 four-bit scales of IQ2_XS / IQ2_S (two per 32 elements, low nibble first) as the
/// multipliers `2 s + 1` in the [`split_scales`] form.
#[inline(always)]
pub(crate) unsafe fn nibble_scales(scales: &[u8; 8]) -> [__m256i; 2] {
    let raw = _mm_loadl_epi64(scales.as_ptr().cast());
    let low4 = _mm_set1_epi8(0x0f);
    let s = _mm_unpacklo_epi8(
        _mm_and_si128(raw, low4),
        _mm_and_si128(_mm_srli_epi16(raw, 4), low4),
    );
    let odd = _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1));
    split_scales(_mm256_cvtepu8_epi16(odd))
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn iq2_xxs<M: IntDot>(x: &[BlockIQ2_XXS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        // Two i32 accumulators: the multiply-adds of consecutive sub-blocks overlap.
        let mut sums = [_mm256_setzero_si256(); 2];
        for ib in 0..8 {
            let q = &x.qs[8 * ib..8 * ib + 8];
            let aux = u32_at(q, 4);
            let g = |l: usize| IQ2XXS_GRID[q[l] as usize];
            let grid = points64([g(0), g(1), g(2), g(3)]);
            let yq = _mm256_sign_epi8(load32(y.qs.as_ptr().add(32 * ib)), even_signs(aux));
            let ls = _mm256_set1_epi16(2 * (aux >> 28) as i16 + 1);
            sums[ib % 2] = M::madd_i16(sums[ib % 2], _mm256_maddubs_epi16(grid, yq), ls);
        }
        acc = add_block(acc, x, y, _mm256_add_epi32(sums[0], sums[1]));
    }
    0.125 * hsum_ps(acc)
}

/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq2_xs<M: IntDot>(x: &[BlockIQ2_XS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let scales = nibble_scales(&x.scales);
        let mut sums = [_mm256_setzero_si256(); 2];
        for ib in 0..8 {
            // Per 8 elements a u16: 9-bit grid index, 7-bit sign index.
            let q = |l: usize| u16_at(&x.qs, 8 * ib + 2 * l) as u32;
            let g = |l: usize| IQ2XS_GRID[(q(l) & 511) as usize];
            let grid = points64([g(0), g(1), g(2), g(3)]);
            let packed = (q(0) >> 9) | (q(1) >> 9) << 7 | (q(2) >> 9) << 14 | (q(3) >> 9) << 21;
            let yq = _mm256_sign_epi8(load32(y.qs.as_ptr().add(32 * ib)), even_signs(packed));
            let ls = pick_pair(scales[ib / 4], 2 * (ib % 4));
            sums[ib % 2] = M::madd_i16(sums[ib % 2], _mm256_maddubs_epi16(grid, yq), ls);
        }
        acc = add_block(acc, x, y, _mm256_add_epi32(sums[0], sums[1]));
    }
    0.125 * hsum_ps(acc)
}

/// One IQ2_S block's exact i32 partial sums (see [`Partials`]).
///
/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq2_s_partials<M: IntDot>(x: &BlockIQ2_S, y: &BlockQ8_K) -> __m256i {
    let scales = nibble_scales(&x.scales);
    let mut sums = [_mm256_setzero_si256(); 2];
    for ib in 0..8 {
        let qh = x.qh[ib] as usize;
        let g = |l: usize| IQ2S_GRID[x.qs[4 * ib + l] as usize | ((qh >> (2 * l)) & 3) << 8];
        let grid = points64([g(0), g(1), g(2), g(3)]);
        let yq = negate_where(
            load32(y.qs.as_ptr().add(32 * ib)),
            bits_at(&x.qs, 32 + 4 * ib),
        );
        let ls = pick_pair(scales[ib / 4], 2 * (ib % 4));
        sums[ib % 2] = M::madd_i16(sums[ib % 2], _mm256_maddubs_epi16(grid, yq), ls);
    }
    _mm256_add_epi32(sums[0], sums[1])
}

impl Partials for BlockIQ2_S {
    const FINAL: f32 = 0.125;
    #[inline(always)]
    unsafe fn partials<M: IntDot>(&self, y: &BlockQ8_K) -> __m256i {
        iq2_s_partials::<M>(self, y)
    }
}

/// `vec_dot` with one f32 sum per lane (the AVX2 path's order).
///
/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq2_s<M: IntDot>(x: &[BlockIQ2_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        acc = add_block(acc, x, y, iq2_s_partials::<M>(x, y));
    }
    0.125 * hsum_ps(acc)
}
