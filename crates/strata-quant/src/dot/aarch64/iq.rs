//! NEON `vec_dot` of IQ4_XS against Q8_K: per 32 elements a table lookup (`TBL`) of the 4-bit
//! codes into the non-linear IQ4 values, two `SDOT`s with the activation bytes and an i32
//! multiply-add by the signed 6-bit sub-block scale.

use std::arch::aarch64::*;

use super::{dot32, f16, load_i8, load_u8, nibbles};
use crate::iq4::BlockIQ4_XS;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::q8_k::BlockQ8_K;

/// # Safety
/// NEON and dotprod are available.
#[inline(always)]
pub(crate) unsafe fn iq4_xs(x: &[BlockIQ4_XS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let table = load_i8(KVALUES_IQ4NL.as_ptr());
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in x.iter().zip(y) {
        // Two i32 accumulators: the multiply-adds of consecutive sub-blocks overlap.
        let mut sums = [vdupq_n_s32(0); 2];
        for ib in 0..8 {
            // Byte j of the sub-block's 16 holds element j (low nibble) and j + 16 (high).
            let (lo, hi) = nibbles(load_u8(x.qs.as_ptr().add(16 * ib)));
            let v = [vqtbl1q_s8(table, lo), vqtbl1q_s8(table, hi)];
            let p = dot32(v, y.qs.as_ptr().add(32 * ib));
            sums[ib % 2] = vmlaq_n_s32(sums[ib % 2], p, x.scale(ib));
        }
        let sum = vaddq_s32(sums[0], sums[1]);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), f16(x.d) * y.scale());
    }
    vaddvq_f32(acc)
}
