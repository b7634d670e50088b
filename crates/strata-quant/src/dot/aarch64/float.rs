//! NEON `dot_f32` of F32, F16 and BF16 rows: four 4-lane FMA accumulators over 16 elements a
//! step, then 4 at a time, then a scalar tail. The conversions are exact (F16 by `FCVTL`, base
//! AdvSIMD; BF16 by a shift), so only the summation order differs from the scalar reference.

use std::arch::aarch64::*;

use crate::block::f16_to_f32;

/// A little-endian float row: 4 elements at a time as f32 lanes, or one.
trait Row {
    unsafe fn load4(&self, i: usize) -> float32x4_t;
    fn get(&self, i: usize) -> f32;
}

struct F32Row<'a>(&'a [u8]);
struct F16Row<'a>(&'a [u8]);
struct BF16Row<'a>(&'a [u8]);

/// The 4 little-endian u16 at `p` (8 readable bytes, any alignment) as u32 lanes.
#[inline(always)]
unsafe fn widen4(p: *const u8) -> uint32x4_t {
    vmovl_u16(vreinterpret_u16_u8(vld1_u8(p)))
}

impl Row for F32Row<'_> {
    #[inline(always)]
    unsafe fn load4(&self, i: usize) -> float32x4_t {
        vreinterpretq_f32_u8(vld1q_u8(self.0.as_ptr().add(4 * i)))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_le_bytes(self.0[4 * i..4 * i + 4].try_into().unwrap())
    }
}

impl Row for F16Row<'_> {
    #[inline(always)]
    unsafe fn load4(&self, i: usize) -> float32x4_t {
        let h = vreinterpret_u16_u8(vld1_u8(self.0.as_ptr().add(2 * i)));
        let out: float32x4_t;
        // FCVTL (half to single, base AdvSIMD: no FEAT_FP16 needed) converts every half
        // exactly, subnormals included; `vcvt_f32_f16` is not stable at this crate's MSRV.
        // SAFETY: a register-only instruction (no memory or stack; it may set FPSR's
        // cumulative exception bits, so flags are not declared preserved).
        std::arch::asm!(
            "fcvtl {o:v}.4s, {h:v}.4h",
            o = lateout(vreg) out,
            h = in(vreg) h,
            options(pure, nomem, nostack),
        );
        out
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f16_to_f32(u16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]]))
    }
}

impl Row for BF16Row<'_> {
    #[inline(always)]
    unsafe fn load4(&self, i: usize) -> float32x4_t {
        vreinterpretq_f32_u32(vshlq_n_u32::<16>(widen4(self.0.as_ptr().add(2 * i))))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_bits((u16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]]) as u32) << 16)
    }
}

/// `Σ row[i] · x[i]`; the row holds `x.len()` elements.
#[inline(always)]
unsafe fn dot<R: Row>(row: R, x: &[f32]) -> f32 {
    let (n, xp) = (x.len(), x.as_ptr());
    let x4 = |at: usize| vreinterpretq_f32_u8(vld1q_u8(xp.add(at).cast()));
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 4 * k;
            *acc = vfmaq_f32(*acc, row.load4(at), x4(at));
        }
        i += 16;
    }
    while i + 4 <= n {
        acc[0] = vfmaq_f32(acc[0], row.load4(i), x4(i));
        i += 4;
    }
    let sum = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
    let mut total = vaddvq_f32(sum);
    for (j, &xj) in x.iter().enumerate().skip(i) {
        total += row.get(j) * xj;
    }
    total
}

/// # Safety
/// NEON is available; `row.len() == 4 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f32(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 4 * x.len(), "F32 dot_f32 lengths");
    dot(F32Row(row), x)
}

/// # Safety
/// NEON is available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "F16 dot_f32 lengths");
    dot(F16Row(row), x)
}

/// # Safety
/// NEON is available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn bf16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "BF16 dot_f32 lengths");
    dot(BF16Row(row), x)
}
