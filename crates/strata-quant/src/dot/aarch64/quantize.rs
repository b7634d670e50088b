//! NEON quantization of activation rows to Q8_0, Q8_1 and Q8_K, bit-identical to the scalar
//! quantizers (`legacy.rs`, `q8_k.rs`): the same f32 operations per element, Q8_0/Q8_1 rounding
//! half away from zero (`FCVTAS`, `roundf`), Q8_K half to even (`FCVTNS`, `nearest_int`), both
//! saturating like Rust's float-to-int casts. A block holding Inf or NaN, or whose inverse
//! scale overflows (a subnormal maximum), takes the scalar path.

use std::arch::aarch64::*;

use crate::block::{write_f16, Block, FromFloat};
use crate::k_quants::QK_K;
use crate::legacy::{BlockQ8_0, BlockQ8_1, QK};
use crate::q8_k::BlockQ8_K;

/// The 16 f32 at `p` as four registers.
#[inline(always)]
unsafe fn load16(p: *const f32) -> [float32x4_t; 4] {
    [
        vld1q_f32(p),
        vld1q_f32(p.add(4)),
        vld1q_f32(p.add(8)),
        vld1q_f32(p.add(12)),
    ]
}

/// Four i32 registers (elements 0..16 in order) as 16 saturated i8.
#[inline(always)]
unsafe fn narrow(q: [int32x4_t; 4]) -> int8x16_t {
    let lo = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
    let hi = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
    vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi))
}

/// Whether every lane of `abs` (absolute values) is finite, and the largest lane.
#[inline(always)]
unsafe fn finite_max(abs: impl Iterator<Item = float32x4_t>) -> (bool, f32) {
    let inf = vdupq_n_f32(f32::INFINITY);
    let (mut ok, mut max) = (vdupq_n_u32(u32::MAX), vdupq_n_f32(0.0));
    for a in abs {
        // NaN compares false, so it fails the test like Inf.
        ok = vandq_u32(ok, vcltq_f32(a, inf));
        max = vmaxq_f32(max, a);
    }
    (vminvq_u32(ok) != 0, vmaxvq_f32(max))
}

/// Q8_0's `d` and quants of one block, or `None` for the scalar path.
#[inline(always)]
unsafe fn q8_symmetric(x: &[f32]) -> Option<(f32, [int8x16_t; 2])> {
    let p = x.as_ptr();
    let v = [load16(p), load16(p.add(16))];
    let (finite, amax) = finite_max(v.iter().flatten().map(|&v| vabsq_f32(v)));
    if !finite {
        return None;
    }
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    if !id.is_finite() {
        return None;
    }
    let q = v.map(|v| narrow(v.map(|v| vcvtaq_s32_f32(vmulq_n_f32(v, id)))));
    Some((d, q))
}

/// # Safety
/// NEON is available; `src.len() == 32 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    assert_eq!(src.len(), QK * dst.len(), "Q8_0 quantize lengths");
    for (x, block) in src.chunks_exact(QK).zip(dst) {
        match q8_symmetric(x) {
            Some((d, q)) => {
                vst1q_s8(block.qs.as_mut_ptr(), q[0]);
                vst1q_s8(block.qs.as_mut_ptr().add(16), q[1]);
                block.d = write_f16(d);
            }
            None => *block = BlockQ8_0::quantize_block(x),
        }
    }
}

/// # Safety
/// NEON is available; `src.len() == 32 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
    assert_eq!(src.len(), QK * dst.len(), "Q8_1 quantize lengths");
    for (x, block) in src.chunks_exact(QK).zip(dst) {
        match q8_symmetric(x) {
            Some((d, q)) => {
                vst1q_s8(block.qs.as_mut_ptr(), q[0]);
                vst1q_s8(block.qs.as_mut_ptr().add(16), q[1]);
                let sum = vaddlvq_s8(q[0]) as i32 + vaddlvq_s8(q[1]) as i32;
                block.d = write_f16(d);
                block.s = write_f16(sum as f32 * d);
            }
            None => *block = BlockQ8_1::quantize_block(x),
        }
    }
}

/// One Q8_K block, or `None` for the scalar path.
#[inline(always)]
unsafe fn q8_k_block(x: &[f32], block: &mut BlockQ8_K) -> Option<()> {
    let p = x.as_ptr();
    let abs = (0..QK_K).step_by(4).map(|i| vabsq_f32(vld1q_f32(p.add(i))));
    let (finite, amax) = finite_max(abs);
    if !finite {
        return None;
    }
    if amax == 0.0 {
        *block = BlockQ8_K::zeroed();
        return Some(());
    }
    // The reference keeps the sign of the first element of largest magnitude.
    let first = x.iter().position(|v| v.abs() == amax)?;
    let iscale = -127.0 / x[first];
    if !iscale.is_finite() {
        return None;
    }
    let limit = vdupq_n_s32(127);
    for (i, bsum) in block.bsums.iter_mut().enumerate() {
        let v = load16(p.add(16 * i));
        let q = narrow(v.map(|v| vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v, iscale)), limit)));
        vst1q_s8(block.qs.as_mut_ptr().add(16 * i), q);
        *bsum = vaddlvq_s8(q).to_le_bytes();
    }
    block.d = (1.0 / iscale).to_le_bytes();
    Some(())
}

/// # Safety
/// NEON is available; `src.len() == 256 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_k(src: &[f32], dst: &mut [BlockQ8_K]) {
    assert_eq!(src.len(), QK_K * dst.len(), "Q8_K quantize lengths");
    for (x, block) in src.chunks_exact(QK_K).zip(dst) {
        if q8_k_block(x, block).is_none() {
            *block = BlockQ8_K::quantize_block(x);
        }
    }
}
