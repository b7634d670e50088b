//! AVX2 `vec_dot` of IQ1_S and IQ1_M against Q8_K. A weight is `dl · (g + δ/8)` with `g` a
//! ternary lattice byte and `δ = ±1`, so the kernels work on the odd integer `w = 8 g + δ`
//! (|w| <= 9): `vpmaddubsw(|w|, ±y)` per 32 elements, an i16 multiply-add by the odd scale
//! `2 s + 1`, and the 1/8 applied once at the end. The i32 sum `Σ ls (8 Σ g y + δ Σ y)` is the
//! scalar reference's `8 · sumi + sumi1` exactly (`dot/iq.rs`), so only float rounding differs.

use std::arch::x86_64::*;

use super::super::{hsum_ps, load32, sign_split, IntDot};
use super::iq2::add_block;
use super::lattice::{halves16, points64, u16_at};
use crate::iq1::{BlockIQ1_M, BlockIQ1_S};
use crate::iq_tables::IQ1S_GRID;
use crate::q8_k::BlockQ8_K;

/// `8 g + δ` for the ternary lattice bytes `grid` and ±1 bytes `delta`.
#[inline(always)]
unsafe fn odd_weights(grid: __m256i, delta: __m256i) -> __m256i {
    _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta)
}

/// `acc + Σ w · y` scaled by `ls` (i16 lanes), with `w` odd (never 0, so the sign split keeps
/// every product).
#[inline(always)]
unsafe fn scaled_dot<M: IntDot>(acc: __m256i, w: __m256i, y: *const i8, ls: __m256i) -> __m256i {
    let (aw, sy) = sign_split(w, load32(y));
    M::madd_i16(acc, _mm256_maddubs_epi16(aw, sy), ls)
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn iq1_s<M: IntDot>(x: &[BlockIQ1_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let mut sums = [_mm256_setzero_si256(); 2];
        for ib in 0..8 {
            let qh = u16_at(&x.qh, 2 * ib) as usize;
            let g = |l: usize| IQ1S_GRID[x.qs[4 * ib + l] as usize | ((qh >> (3 * l)) & 7) << 8];
            let grid = points64([g(0), g(1), g(2), g(3)]);
            let delta = _mm256_set1_epi8(if qh & 0x8000 != 0 { -1 } else { 1 });
            let ls = _mm256_set1_epi16(2 * ((qh >> 12) & 7) as i16 + 1);
            let yq = y.qs.as_ptr().add(32 * ib);
            sums[ib % 2] = scaled_dot::<M>(sums[ib % 2], odd_weights(grid, delta), yq, ls);
        }
        acc = add_block(acc, x, y, _mm256_add_epi32(sums[0], sums[1]));
    }
    0.125 * hsum_ps(acc)
}

/// # Safety
/// As for [`iq1_s`].
#[inline(always)]
pub(crate) unsafe fn iq1_m<M: IntDot>(x: &[BlockIQ1_M], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    // Bit 3 of group l's nibble, within the u16 of a sub-block's two qh bytes.
    let delta_bits = _mm256_set_epi64x(0x8000, 0x0800, 0x0080, 0x0008);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let sc = x.scale_words();
        let mut sums = [_mm256_setzero_si256(); 2];
        for ib in 0..8 {
            let qh = u16_at(&x.qh, 2 * ib);
            let nibble = |l: usize| (qh >> (4 * l)) as usize & 7;
            let g = |l: usize| IQ1S_GRID[x.qs[4 * ib + l] as usize | nibble(l) << 8];
            let grid = points64([g(0), g(1), g(2), g(3)]);
            // -1 (all ones) where the group's delta bit is set, else +1.
            let set = _mm256_and_si256(_mm256_set1_epi64x(qh as i64), delta_bits);
            let delta = _mm256_or_si256(_mm256_cmpeq_epi64(set, delta_bits), _mm256_set1_epi8(1));
            // 3-bit scales of the two 16-element halves, at bits 6 (ib % 2) and + 3 of word ib / 2.
            let word = sc[ib / 2] >> (6 * (ib % 2));
            let ls = halves16(2 * (word & 7) as i16 + 1, 2 * ((word >> 3) & 7) as i16 + 1);
            let yq = y.qs.as_ptr().add(32 * ib);
            sums[ib % 2] = scaled_dot::<M>(sums[ib % 2], odd_weights(grid, delta), yq, ls);
        }
        let sum = _mm256_add_epi32(sums[0], sums[1]);
        // The super-block scale has no field of its own: assembled, then converted by F16C.
        let bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        let d = _mm_mul_ss(
            _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)),
            _mm_set_ss(y.scale()),
        );
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    0.125 * hsum_ps(acc)
}
