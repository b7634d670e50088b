//! NEON `vec_dot` of the 32-element formats against Q8_0 / Q8_1: a block is two 16-byte
//! registers of quants, two `SDOT`s give its exact i32 sum in four lanes, and each block adds
//! `d_x d_y · sum` to an f32 accumulator (two accumulators, alternating, to hide the FMA
//! latency). The affine formats add `m_x s_y` (Q8_1's `s = d Σq`) in a scalar accumulator.

use std::arch::aarch64::*;

use super::{bit_masks, dot32, f16, load_i8, load_u8, nibbles};
use crate::iq4::BlockIQ4_NL;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// A weight block of 32 quants with an f16 scale `d`.
trait Block32 {
    /// The 32 quants as i8 lanes in element order (0..16, 16..32); unsigned formats give
    /// their quants (< 32) unchanged.
    unsafe fn quants(&self) -> [int8x16_t; 2];
    fn d(&self) -> f32;
}

/// The nibbles of `qs` as elements 0..16 (low) and 16..32 (high).
#[inline(always)]
unsafe fn nibbles32(qs: &[u8; 16]) -> [uint8x16_t; 2] {
    let (lo, hi) = nibbles(load_u8(qs.as_ptr()));
    [lo, hi]
}

impl Block32 for BlockQ4_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        let eight = vdupq_n_s8(8);
        nibbles32(&self.qs).map(|q| vsubq_s8(vreinterpretq_s8_u8(q), eight))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

impl Block32 for BlockQ5_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        // q - 16 is the nibble with 0xf0 or'ed in where the 5th bit is clear.
        let high = bit_masks(u32::from_le_bytes(self.qh));
        let low = nibbles32(&self.qs);
        let minus16 = vdupq_n_u8(0xf0);
        [0, 1].map(|h| vreinterpretq_s8_u8(vorrq_u8(low[h], vbicq_u8(minus16, high[h]))))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

impl Block32 for BlockQ8_0 {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        let p = self.qs.as_ptr();
        [load_i8(p), load_i8(p.add(16))]
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

impl Block32 for BlockIQ4_NL {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        let table = load_i8(KVALUES_IQ4NL.as_ptr());
        nibbles32(&self.qs).map(|q| vqtbl1q_s8(table, q))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

impl Block32 for BlockQ4_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        nibbles32(&self.qs).map(|q| vreinterpretq_s8_u8(q))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

impl Block32 for BlockQ5_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> [int8x16_t; 2] {
        let high = bit_masks(u32::from_le_bytes(self.qh));
        let low = nibbles32(&self.qs);
        let bit4 = vdupq_n_u8(0x10);
        [0, 1].map(|h| vreinterpretq_s8_u8(vorrq_u8(low[h], vandq_u8(high[h], bit4))))
    }
    #[inline(always)]
    fn d(&self) -> f32 {
        f16(self.d)
    }
}

/// `acc + d_x d_y · Σ x y` for one block against Q8_0.
#[inline(always)]
unsafe fn block<X: Block32>(x: &X, y: &BlockQ8_0, acc: float32x4_t) -> float32x4_t {
    let sum = dot32(x.quants(), y.qs.as_ptr());
    vfmaq_n_f32(acc, vcvtq_f32_s32(sum), x.d() * f16(y.d))
}

/// Σ over blocks of `d_x d_y Σ x y` (Q4_0, Q5_0, Q8_0, IQ4_NL).
#[inline(always)]
unsafe fn symmetric<X: Block32>(x: &[X], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc0, mut acc1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let (xs, ys) = (x.chunks_exact(2), y.chunks_exact(2));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        acc0 = block(&x[0], &y[0], acc0);
        acc1 = block(&x[1], &y[1], acc1);
    }
    if let (Some(x), Some(y)) = (x_rest.first(), y_rest.first()) {
        acc0 = block(x, y, acc0);
    }
    vaddvq_f32(vaddq_f32(acc0, acc1))
}

/// Q4_1 and Q5_1: a [`Block32`] whose f16 minimum `m` follows `d`.
trait Affine: Block32 {
    fn m(&self) -> f32;
}

impl Affine for BlockQ4_1 {
    #[inline(always)]
    fn m(&self) -> f32 {
        f16(self.m)
    }
}

impl Affine for BlockQ5_1 {
    #[inline(always)]
    fn m(&self) -> f32 {
        f16(self.m)
    }
}

/// `acc + d_x d_y · Σ q y` for one affine block, and `mins + m_x s_y`.
#[inline(always)]
unsafe fn affine_block<X: Affine>(
    x: &X,
    y: &BlockQ8_1,
    acc: float32x4_t,
    mins: f32,
) -> (float32x4_t, f32) {
    let sum = dot32(x.quants(), y.qs.as_ptr());
    let acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), x.d() * f16(y.d));
    (acc, mins + x.m() * f16(y.s))
}

/// Σ over blocks of `d_x d_y Σ q y + m_x s_y` (Q4_1, Q5_1).
#[inline(always)]
unsafe fn affine<X: Affine>(x: &[X], y: &[BlockQ8_1]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc0, mut acc1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let (mut mins0, mut mins1) = (0.0f32, 0.0f32);
    let (xs, ys) = (x.chunks_exact(2), y.chunks_exact(2));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        (acc0, mins0) = affine_block(&x[0], &y[0], acc0, mins0);
        (acc1, mins1) = affine_block(&x[1], &y[1], acc1, mins1);
    }
    if let (Some(x), Some(y)) = (x_rest.first(), y_rest.first()) {
        (acc0, mins0) = affine_block(x, y, acc0, mins0);
    }
    vaddvq_f32(vaddq_f32(acc0, acc1)) + (mins0 + mins1)
}

/// # Safety
/// NEON and dotprod are available (all kernels of this module).
#[inline(always)]
pub(crate) unsafe fn q4_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    symmetric(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    symmetric(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    symmetric(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn iq4_nl(x: &[BlockIQ4_NL], y: &[BlockQ8_0]) -> f32 {
    symmetric(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q4_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    affine(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    affine(x, y)
}
