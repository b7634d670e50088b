//! NEON `vec_dot` of IQ1_S and IQ1_M against Q8_K. A weight is `dl · (g + δ/8)` with `g` a
//! ternary lattice byte (-1, 0, 1) and `δ = ±1`: per 32 elements, `SDOT`s of the lattice
//! points with the activation bytes give `Σ g y`, multiplied by the odd scale `2 s + 1` in i32;
//! the `δ` term is `Σ δ y`, from Q8_K's 16-element sums (IQ1_S, one `δ` per 32 elements) or
//! from an `SDOT` of the ±1 bytes (IQ1_M, one `δ` per 8). Both i32 sums are exact; per block
//! they are combined as `sumi + sumi1 / 8` in f32, as the scalar reference does (`dot/iq.rs`).

use std::arch::aarch64::*;

use super::{dot32, f16, load_i8, points64, sdot};
use crate::iq1::{BlockIQ1_M, BlockIQ1_S, IQ1_DELTA};
use crate::iq_tables::IQ1S_GRID;
use crate::q8_k::BlockQ8_K;

#[inline(always)]
fn u16_at(bytes: &[u8], at: usize) -> usize {
    u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize
}

/// # Safety
/// NEON and dotprod are available (both kernels of this module).
#[inline(always)]
pub(crate) unsafe fn iq1_s(x: &[BlockIQ1_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut sumf = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        let mut sumi1 = 0i32;
        for ib in 0..8 {
            // Per sub-block a u16: four 3-bit index extensions, the 3-bit scale, the δ sign.
            let qh = u16_at(&x.qh, 2 * ib);
            let g = |l: usize| IQ1S_GRID[x.qs[4 * ib + l] as usize | ((qh >> (3 * l)) & 7) << 8];
            let grid = [points64(g(0), g(1)), points64(g(2), g(3))];
            let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
            let p = dot32(grid, y.qs.as_ptr().add(32 * ib));
            sums[ib % 2] = vmlaq_n_s32(sums[ib % 2], p, ls);
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            sumi1 += ls * delta * (y.bsum(2 * ib) + y.bsum(2 * ib + 1));
        }
        let sumi = vaddvq_s32(vaddq_s32(sums[0], sums[1]));
        sumf += f16(x.d) * y.scale() * (sumi as f32 + IQ1_DELTA * sumi1 as f32);
    }
    sumf
}

/// # Safety
/// As for [`iq1_s`].
#[inline(always)]
pub(crate) unsafe fn iq1_m(x: &[BlockIQ1_M], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut sumf = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        let sc = x.scale_words();
        let (mut sum_g, mut sum_d) = (vdupq_n_s32(0), vdupq_n_s32(0));
        for ib in 0..8 {
            // Per 8 elements a nibble of qh: 3 index bits and the δ sign (bit 3).
            let qh = u16_at(&x.qh, 2 * ib);
            let nibble = |l: usize| (qh >> (4 * l)) & 15;
            let g = |l: usize| IQ1S_GRID[x.qs[4 * ib + l] as usize | (nibble(l) & 7) << 8];
            // δ of group l as 8 bytes of ±1.
            let d = |l: usize| {
                let byte: u64 = if nibble(l) & 8 != 0 { 0xff } else { 0x01 };
                byte * 0x0101_0101_0101_0101
            };
            let yq = y.qs.as_ptr().add(32 * ib);
            // 3-bit scales of the two 16-element halves, at bits 6 (ib % 2) and + 3 of
            // word ib / 2.
            let word = sc[ib / 2] >> (6 * (ib % 2));
            let ls = [2 * (word & 7) as i32 + 1, 2 * ((word >> 3) & 7) as i32 + 1];
            for (h, &ls) in ls.iter().enumerate() {
                let y = load_i8(yq.add(16 * h));
                let pg = sdot(vdupq_n_s32(0), points64(g(2 * h), g(2 * h + 1)), y);
                let pd = sdot(vdupq_n_s32(0), points64(d(2 * h), d(2 * h + 1)), y);
                sum_g = vmlaq_n_s32(sum_g, pg, ls);
                sum_d = vmlaq_n_s32(sum_d, pd, ls);
            }
        }
        let (sumi1, sumi2) = (vaddvq_s32(sum_g), vaddvq_s32(sum_d));
        sumf += x.super_scale() * y.scale() * (sumi1 as f32 + IQ1_DELTA * sumi2 as f32);
    }
    sumf
}
