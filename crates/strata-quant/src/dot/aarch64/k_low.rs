//! NEON `vec_dot` of Q2_K and Q3_K against Q8_K. Both have 16 sub-blocks of 16, one register
//! each: an `SDOT` of the 2- or 3-bit quants with the activation bytes, then an i32
//! multiply-add by the sub-block scale. Q2_K's minimums come from Q8_K's 16-element sums; Q3_K's
//! quants are made signed (`q - 4` where the high bit is clear) before the dot.

use std::arch::aarch64::*;

use super::k_quants::bsums;
use super::{f16, load_i8, load_u8, sdot};
use crate::k_quants::{q3_k_scales, BlockQ2_K, BlockQ3_K};
use crate::q8_k::BlockQ8_K;

/// The 2-bit fields `2s..2s+2` of the bytes of `q` (`s` < 4).
#[inline(always)]
unsafe fn two_bits(q: uint8x16_t, s: usize) -> uint8x16_t {
    vandq_u8(vshlq_u8(q, vdupq_n_s8(-2 * s as i8)), vdupq_n_u8(3))
}

/// `sum + sc · Σ q y` for the 16 elements of `q` and the activation bytes at `y`.
#[inline(always)]
unsafe fn scaled(sum: int32x4_t, q: uint8x16_t, y: *const i8, sc: i32) -> int32x4_t {
    let p = sdot(vdupq_n_s32(0), vreinterpretq_s8_u8(q), load_i8(y));
    vmlaq_n_s32(sum, p, sc)
}

/// # Safety
/// NEON and dotprod are available (all kernels of this module).
#[inline(always)]
pub(crate) unsafe fn q2_k(x: &[BlockQ2_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (vdupq_n_f32(0.0), 0.0f32);
    for (x, y) in x.iter().zip(y) {
        let packed = load_u8(x.scales.as_ptr());
        // Σ_j bsum(j) · min_j, the minimums being the high nibbles of the scale bytes.
        let mins = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8::<4>(packed))));
        let mins_hi = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8::<4>(packed)));
        let [b_lo, b_hi] = bsums(y);
        let m = vmull_s16(vget_low_s16(b_lo), vget_low_s16(mins));
        let m = vmlal_high_s16(m, b_lo, mins);
        let m = vmlal_s16(m, vget_low_s16(b_hi), vget_low_s16(mins_hi));
        let summs = vaddvq_s32(vmlal_high_s16(m, b_hi, mins_hi));
        let mut sums = [vdupq_n_s32(0); 2];
        for c in 0..2 {
            let q = [
                load_u8(x.qs.as_ptr().add(32 * c)),
                load_u8(x.qs.as_ptr().add(32 * c + 16)),
            ];
            for s in 0..4 {
                // Element 128c + 32s + l: bits 2s of qs[32c + l]; sub-block 8c + 2s + l / 16.
                let yq = y.qs.as_ptr().add(128 * c + 32 * s);
                for h in 0..2 {
                    let sc = (x.scales[8 * c + 2 * s + h] & 0x0f) as i32;
                    sums[h] = scaled(sums[h], two_bits(q[h], s), yq.add(16 * h), sc);
                }
            }
        }
        let dy = y.scale();
        let sum = vaddq_s32(sums[0], sums[1]);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), f16(x.d) * dy);
        acc_min += f16(x.dmin) * dy * summs as f32;
    }
    vaddvq_f32(acc) - acc_min
}

/// # Safety
/// As for [`q2_k`].
#[inline(always)]
pub(crate) unsafe fn q3_k(x: &[BlockQ3_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        let scales = q3_k_scales(&x.scales);
        let hmask = [load_u8(x.hmask.as_ptr()), load_u8(x.hmask.as_ptr().add(16))];
        let four = vdupq_n_u8(4);
        let mut sums = [vdupq_n_s32(0); 2];
        for c in 0..2 {
            let q = [
                load_u8(x.qs.as_ptr().add(32 * c)),
                load_u8(x.qs.as_ptr().add(32 * c + 16)),
            ];
            for s in 0..4 {
                // Bit 4c + s of hmask[l] is the high bit of element 128c + 32s + l; the quant
                // is the low 2 bits minus 4 where it is clear.
                let bit = vdupq_n_u8(1 << (4 * c + s));
                let yq = y.qs.as_ptr().add(128 * c + 32 * s);
                for h in 0..2 {
                    let minus4 = vbicq_u8(four, vtstq_u8(hmask[h], bit));
                    let v = vsubq_s8(
                        vreinterpretq_s8_u8(two_bits(q[h], s)),
                        vreinterpretq_s8_u8(minus4),
                    );
                    let p = sdot(vdupq_n_s32(0), v, load_i8(yq.add(16 * h)));
                    sums[h] = vmlaq_n_s32(sums[h], p, scales[8 * c + 2 * s + h] as i32);
                }
            }
        }
        // `d` ends the block: read as a scalar field, never past the row.
        let sum = vaddq_s32(sums[0], sums[1]);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), f16(x.d) * y.scale());
    }
    vaddvq_f32(acc)
}
