//! NEON `vec_dot` of Q4_K, Q5_K and Q6_K against Q8_K. Per sub-block: `SDOT`s of the quants
//! with the activation bytes into i32 lanes, then one i32 multiply-add by the sub-block scale;
//! the exact i32 block sum is scaled once in f32. Q4_K/Q5_K's minimums come from Q8_K's
//! 16-element sums (`bsums`); Q6_K's quants are made signed (`q - 32`) before the dot, so it
//! needs no offset term.

use std::arch::aarch64::*;

use super::{dot32, f16, load_i8, load_u8, nibbles, sdot};
use crate::k_quants::{scales_mins_k4, BlockQ4_K, BlockQ5_K, BlockQ6_K, K_SCALE_SIZE};
use crate::q8_k::BlockQ8_K;

/// Byte `g` of `bytes`, as the i32 multiplier of a sub-block.
#[inline(always)]
fn byte(bytes: u64, g: usize) -> i32 {
    (bytes >> (8 * g)) as u8 as i32
}

/// The 16 i16 `bsums` of a Q8_K block as two registers (elements' sums 0..8, 8..16).
#[inline(always)]
pub(crate) unsafe fn bsums(y: &BlockQ8_K) -> [int16x8_t; 2] {
    let p = y.bsums.as_ptr();
    [
        vreinterpretq_s16_u8(load_u8(p)),
        vreinterpretq_s16_u8(load_u8(p.add(8))),
    ]
}

/// Σ_g `mins[g]` · (bsum(2g) + bsum(2g+1)), exactly.
#[inline(always)]
unsafe fn min_terms(mins: u64, y: &BlockQ8_K) -> i32 {
    let [lo, hi] = bsums(y);
    // A pair of 16-element sums is at most 32 · 127 in magnitude: fits i16.
    let pairs = vpaddq_s16(lo, hi);
    let m = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mins)));
    let prod = vmull_s16(vget_low_s16(pairs), vget_low_s16(m));
    vaddvq_s32(vmlal_high_s16(prod, pairs, m))
}

/// Q4_K and Q5_K: blocks starting with the f16 `d` and `dmin`, then the packed scales.
trait AffineK {
    fn d_dmin(&self) -> (f32, f32);
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE];
    /// The unsigned quants of elements `64c..64c+32` (sub-block 2c) and `64c+32..64c+64`
    /// (sub-block 2c + 1), 16 at a time.
    unsafe fn quants(&self, c: usize) -> [[int8x16_t; 2]; 2];
}

impl AffineK for BlockQ4_K {
    #[inline(always)]
    fn d_dmin(&self) -> (f32, f32) {
        (f16(self.d), f16(self.dmin))
    }
    #[inline(always)]
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE] {
        &self.scales
    }
    #[inline(always)]
    unsafe fn quants(&self, c: usize) -> [[int8x16_t; 2]; 2] {
        let p = self.qs.as_ptr().add(32 * c);
        let (lo0, hi0) = nibbles(load_u8(p));
        let (lo1, hi1) = nibbles(load_u8(p.add(16)));
        let s = vreinterpretq_s8_u8;
        [[s(lo0), s(lo1)], [s(hi0), s(hi1)]]
    }
}

impl AffineK for BlockQ5_K {
    #[inline(always)]
    fn d_dmin(&self) -> (f32, f32) {
        (f16(self.d), f16(self.dmin))
    }
    #[inline(always)]
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE] {
        &self.scales
    }
    #[inline(always)]
    unsafe fn quants(&self, c: usize) -> [[int8x16_t; 2]; 2] {
        let p = self.qs.as_ptr().add(32 * c);
        let (lo0, hi0) = nibbles(load_u8(p));
        let (lo1, hi1) = nibbles(load_u8(p.add(16)));
        // Bit 2c of qh[l] is the 5th bit of element 64c + l, bit 2c + 1 of 64c + 32 + l.
        let shift = vdupq_n_s8(-2 * c as i8);
        let h0 = vshlq_u8(load_u8(self.qh.as_ptr()), shift);
        let h1 = vshlq_u8(load_u8(self.qh.as_ptr().add(16)), shift);
        let low_bit = |h: uint8x16_t| vshlq_n_u8::<4>(vandq_u8(h, vdupq_n_u8(1)));
        let high_bit = |h: uint8x16_t| vshlq_n_u8::<3>(vandq_u8(h, vdupq_n_u8(2)));
        let s = |q: uint8x16_t, h: uint8x16_t| vreinterpretq_s8_u8(vorrq_u8(q, h));
        [
            [s(lo0, low_bit(h0)), s(lo1, low_bit(h1))],
            [s(hi0, high_bit(h0)), s(hi1, high_bit(h1))],
        ]
    }
}

/// Σ over Q4_K/Q5_K blocks of `d_x d_y Σ_g sc_g Σ q y - dmin_x d_y Σ_g m_g Σ y`.
#[inline(always)]
unsafe fn affine_k<X: AffineK>(x: &[X], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (vdupq_n_f32(0.0), 0.0f32);
    for (x, y) in x.iter().zip(y) {
        let (scales, mins) = scales_mins_k4(x.packed_scales());
        // Two i32 accumulators: the multiply-adds of consecutive sub-blocks overlap.
        let mut sums = [vdupq_n_s32(0); 2];
        for c in 0..4 {
            let [lo, hi] = x.quants(c);
            let yq = y.qs.as_ptr().add(64 * c);
            sums[0] = vmlaq_n_s32(sums[0], dot32(lo, yq), byte(scales, 2 * c));
            sums[1] = vmlaq_n_s32(sums[1], dot32(hi, yq.add(32)), byte(scales, 2 * c + 1));
        }
        let (d, dmin) = x.d_dmin();
        let dy = y.scale();
        let sum = vaddq_s32(sums[0], sums[1]);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), d * dy);
        acc_min += dmin * dy * min_terms(mins, y) as f32;
    }
    vaddvq_f32(acc) - acc_min
}

/// # Safety
/// NEON and dotprod are available (all kernels of this module).
#[inline(always)]
pub(crate) unsafe fn q4_k(x: &[BlockQ4_K], y: &[BlockQ8_K]) -> f32 {
    affine_k(x, y)
}

/// # Safety
/// As for [`q4_k`].
#[inline(always)]
pub(crate) unsafe fn q5_k(x: &[BlockQ5_K], y: &[BlockQ8_K]) -> f32 {
    affine_k(x, y)
}

/// The signed quants (`q - 32`, -32..=31) of elements `128c + 32t .. + 32` of a Q6_K block,
/// `t` < 4, 16 at a time (ggml `block_q6_K`: element `128c + 32t + l` has low nibble `t / 2`
/// of `ql[64c + 32 (t % 2) + l]` and high bits `2t` of `qh[32c + l]`).
#[inline(always)]
unsafe fn q6_k_quants(x: &BlockQ6_K, c: usize) -> [[int8x16_t; 2]; 4] {
    let ql = x.ql.as_ptr().add(64 * c);
    let qh = x.qh.as_ptr().add(32 * c);
    let (ql0, ql1) = (
        [load_u8(ql), load_u8(ql.add(16))],
        [load_u8(ql.add(32)), load_u8(ql.add(48))],
    );
    let qh = [load_u8(qh), load_u8(qh.add(16))];
    let top2 = vdupq_n_u8(0x30);
    let minus32 = vdupq_n_s8(32);
    let make = |low: uint8x16_t, high: uint8x16_t| {
        vsubq_s8(
            vreinterpretq_s8_u8(vorrq_u8(low, vandq_u8(high, top2))),
            minus32,
        )
    };
    let low4 = |q: uint8x16_t| vandq_u8(q, vdupq_n_u8(0x0f));
    let mut out = [[vdupq_n_s8(0); 2]; 4];
    for h in 0..2 {
        out[0][h] = make(low4(ql0[h]), vshlq_n_u8::<4>(qh[h]));
        out[1][h] = make(low4(ql1[h]), vshlq_n_u8::<2>(qh[h]));
        out[2][h] = make(vshrq_n_u8::<4>(ql0[h]), qh[h]);
        out[3][h] = make(vshrq_n_u8::<4>(ql1[h]), vshrq_n_u8::<2>(qh[h]));
    }
    out
}

/// # Safety
/// As for [`q4_k`].
#[inline(always)]
pub(crate) unsafe fn q6_k(x: &[BlockQ6_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let mut sums = [vdupq_n_s32(0); 2];
        for c in 0..2 {
            let q = q6_k_quants(x, c);
            for (t, q) in q.iter().enumerate() {
                // Sub-blocks of 16: 8c + 2t for lanes 0..16, 8c + 2t + 1 for 16..32.
                let g = 8 * c + 2 * t;
                let yq = y.qs.as_ptr().add(128 * c + 32 * t);
                for h in 0..2 {
                    let p = sdot(vdupq_n_s32(0), q[h], load_i8(yq.add(16 * h)));
                    sums[h] = vmlaq_n_s32(sums[h], p, x.scales[g + h] as i32);
                }
            }
        }
        // `d` ends the block: read as a scalar field, never past the row.
        let sum = vaddq_s32(sums[0], sums[1]);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), f16(x.d) * y.scale());
    }
    vaddvq_f32(acc)
}
