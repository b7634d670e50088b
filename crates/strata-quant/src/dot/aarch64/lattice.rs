//! NEON `vec_dot` of the lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S against
//! Q8_K. Per 32 elements: the lattice points fetched from the grid tables into two registers
//! (8-byte points for IQ2, 4-byte points for IQ3), their signs applied (grid bytes are at most
//! 62, so negating cannot wrap), two `SDOT`s with the activation bytes and an i32 multiply-add
//! by the odd sub-block multiplier `2 s + 1`. The exact i32 block sum is scaled once in f32 and
//! the formula's constant (1/8 for IQ2, 1/4 for IQ3_XXS) applied at the end, as the scalar
//! reference does (`dot/iq.rs`).

use std::arch::aarch64::*;

use super::{bit_masks, dot32, f16, load_i8, points64, sdot};
use crate::iq2::{BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS};
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};
use crate::iq_tables::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KEVEN_SIGNS_Q2XS,
};
use crate::q8_k::BlockQ8_K;

/// Four 4-byte lattice points as one register, `p[0]` in bytes 0..4.
#[inline(always)]
unsafe fn points32(p: [u32; 4]) -> int8x16_t {
    vreinterpretq_s8_u32(vld1q_u32(p.as_ptr()))
}

/// `g` times the ±1 bytes of four 7-bit sign indices (`KSIGNS_IQ2XS` order, parity bit
/// implied) packed at bits 0, 7, 14 and 21 of `packed`; index `l` covers elements `8l..8l+8`.
#[inline(always)]
unsafe fn even_signs(g: [int8x16_t; 2], packed: u32) -> [int8x16_t; 2] {
    let s = |l: u32| KEVEN_SIGNS_Q2XS[((packed >> (7 * l)) & 127) as usize];
    [
        vmulq_s8(g[0], points64(s(0), s(1))),
        vmulq_s8(g[1], points64(s(2), s(3))),
    ]
}

/// `g` with byte `j` negated where bit `j` of `bits` is set.
#[inline(always)]
unsafe fn negate_where(g: [int8x16_t; 2], bits: u32) -> [int8x16_t; 2] {
    let m = bit_masks(bits).map(|m| vreinterpretq_s8_u8(m));
    // (g ^ m) - m is -g where m is all ones, g where it is zero.
    [
        vsubq_s8(veorq_s8(g[0], m[0]), m[0]),
        vsubq_s8(veorq_s8(g[1], m[1]), m[1]),
    ]
}

/// `acc + d_x d_y · sum` in f32 lanes.
#[inline(always)]
unsafe fn add_block(acc: float32x4_t, d: [u8; 2], y: &BlockQ8_K, sum: int32x4_t) -> float32x4_t {
    vfmaq_n_f32(acc, vcvtq_f32_s32(sum), f16(d) * y.scale())
}

/// `sum + (2 lo + 1) Σ_{<16} w y + (2 hi + 1) Σ_{16..32} w y`: 32 elements whose two halves
/// have their own 4-bit scales.
#[inline(always)]
unsafe fn two_scales(sum: int32x4_t, w: [int8x16_t; 2], y: *const i8, lo: u8, hi: u8) -> int32x4_t {
    let p0 = sdot(vdupq_n_s32(0), w[0], load_i8(y));
    let p1 = sdot(vdupq_n_s32(0), w[1], load_i8(y.add(16)));
    let sum = vmlaq_n_s32(sum, p0, 2 * lo as i32 + 1);
    vmlaq_n_s32(sum, p1, 2 * hi as i32 + 1)
}

#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

#[inline(always)]
fn u16_at(bytes: &[u8], at: usize) -> u32 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]]) as u32
}

/// # Safety
/// NEON and dotprod are available (all kernels of this module).
#[inline(always)]
pub(crate) unsafe fn iq2_xxs(x: &[BlockIQ2_XXS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        // Two i32 accumulators: the multiply-adds of consecutive sub-blocks overlap.
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // 4 grid indices, then a u32 of 4 sign indices and the 4-bit scale.
            let q = &x.qs[8 * ib..8 * ib + 8];
            let aux = u32_at(q, 4);
            let g = |l: usize| IQ2XXS_GRID[q[l] as usize];
            let w = even_signs([points64(g(0), g(1)), points64(g(2), g(3))], aux);
            let p = dot32(w, y.qs.as_ptr().add(32 * ib));
            sums[ib % 2] = vmlaq_n_s32(sums[ib % 2], p, 2 * (aux >> 28) as i32 + 1);
        }
        acc = add_block(acc, x.d, y, vaddq_s32(sums[0], sums[1]));
    }
    0.125 * vaddvq_f32(acc)
}

/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq2_xs(x: &[BlockIQ2_XS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // Per 8 elements a u16: 9-bit grid index, 7-bit sign index.
            let q = |l: usize| u16_at(&x.qs, 8 * ib + 2 * l);
            let g = |l: usize| IQ2XS_GRID[(q(l) & 511) as usize];
            let packed = (q(0) >> 9) | (q(1) >> 9) << 7 | (q(2) >> 9) << 14 | (q(3) >> 9) << 21;
            let w = even_signs([points64(g(0), g(1)), points64(g(2), g(3))], packed);
            let (lo, hi) = (x.scales[ib] & 0x0f, x.scales[ib] >> 4);
            let yq = y.qs.as_ptr().add(32 * ib);
            sums[ib % 2] = two_scales(sums[ib % 2], w, yq, lo, hi);
        }
        acc = add_block(acc, x.d, y, vaddq_s32(sums[0], sums[1]));
    }
    0.125 * vaddvq_f32(acc)
}

/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq2_s(x: &[BlockIQ2_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // 10-bit grid indices: a byte of qs and 2 bits of qh; one sign bit per element.
            let qh = x.qh[ib] as usize;
            let g = |l: usize| IQ2S_GRID[x.qs[4 * ib + l] as usize | ((qh >> (2 * l)) & 3) << 8];
            let w = negate_where(
                [points64(g(0), g(1)), points64(g(2), g(3))],
                u32_at(&x.qs, 32 + 4 * ib),
            );
            let (lo, hi) = (x.scales[ib] & 0x0f, x.scales[ib] >> 4);
            let yq = y.qs.as_ptr().add(32 * ib);
            sums[ib % 2] = two_scales(sums[ib % 2], w, yq, lo, hi);
        }
        acc = add_block(acc, x.d, y, vaddq_s32(sums[0], sums[1]));
    }
    0.125 * vaddvq_f32(acc)
}

/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq3_xxs(x: &[BlockIQ3_XXS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // 8 grid indices per 32 elements; the signs and scale in a u32 after all indices.
            let q = &x.qs[8 * ib..8 * ib + 8];
            let g = |k: usize| IQ3XXS_GRID[q[k] as usize];
            let grid = [
                points32([g(0), g(1), g(2), g(3)]),
                points32([g(4), g(5), g(6), g(7)]),
            ];
            let aux = u32_at(&x.qs, 64 + 4 * ib);
            let p = dot32(even_signs(grid, aux), y.qs.as_ptr().add(32 * ib));
            sums[ib % 2] = vmlaq_n_s32(sums[ib % 2], p, 2 * (aux >> 28) as i32 + 1);
        }
        acc = add_block(acc, x.d, y, vaddq_s32(sums[0], sums[1]));
    }
    0.25 * vaddvq_f32(acc)
}

/// # Safety
/// As for [`iq2_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq3_s(x: &[BlockIQ3_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // 9-bit grid indices: byte qs[8 ib + k] and bit k of qh[ib].
            let qh = x.qh[ib] as usize;
            let g = |k: usize| IQ3S_GRID[x.qs[8 * ib + k] as usize | ((qh >> k) & 1) << 8];
            let grid = [
                points32([g(0), g(1), g(2), g(3)]),
                points32([g(4), g(5), g(6), g(7)]),
            ];
            let w = negate_where(grid, u32_at(&x.signs, 4 * ib));
            let p = dot32(w, y.qs.as_ptr().add(32 * ib));
            let s = (x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
            sums[ib % 2] = vmlaq_n_s32(sums[ib % 2], p, 2 * s as i32 + 1);
        }
        acc = add_block(acc, x.d, y, vaddq_s32(sums[0], sums[1]));
    }
    vaddvq_f32(acc)
}
