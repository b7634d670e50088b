//! aarch64 SIMD kernels: AdvSIMD (NEON, 128-bit) with the `dotprod` extension, the path
//! [`Isa::Neon`](crate::Isa::Neon). [`crate::dispatch`] picks it when the CPU has both
//! features; the scalar kernels in `dot/` are the references every kernel here is tested
//! against (tests/simd.rs, run under qemu-user by scripts/test_aarch64.sh).
//!
//! Every integer dot goes through `SDOT` (signed i8 × i8, four products summed into each i32
//! lane), so unlike x86's `vpmaddubsw` there is no unsigned operand, no sign trick and no i16
//! saturation to avoid: the i32 block sums are exact by construction. Sub-block scales are
//! applied as i32 multiply-adds (`MLA` by element) and each block's exact i32 lanes are scaled
//! once in f32, so only the f32 summation order differs from the scalar reference.
//!
//! `SDOT`'s intrinsic (`vdotq_s32`) is not stable Rust yet, so [`sdot`] emits the instruction
//! with `asm!`; it is only ever inlined into the `#[target_feature(enable = "neon,dotprod")]`
//! entry points at the bottom of this file. Decode does no software prefetching here: the
//! intrinsic (`_prefetch`) is unstable, and the x86 prefetch distance was measured on x86 only.

mod float;
mod iq;
mod iq1;
mod k_low;
mod k_quants;
mod lattice;
mod legacy;
mod quantize;

use std::arch::aarch64::*;
use std::arch::asm;

use strata_gguf::GgmlType;

use crate::block::cast_blocks_mut;

/// `acc[i] + Σ_{k<4} a[4i+k] · b[4i+k]` over signed bytes (`SDOT`, FEAT_DotProd), exact.
///
/// # Safety
/// The CPU has `dotprod`; the caller is compiled with it enabled (the assembler needs it).
#[inline(always)]
pub(crate) unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: a register-only instruction (no memory, flags or stack), available per the
    // function's contract.
    asm!(
        "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// `Σ_{k<32} a[k] · y[k]` as 4 exact i32 lanes: `a` holds elements 0..16 and 16..32, `y`
/// points at 32 readable activation bytes.
#[inline(always)]
pub(crate) unsafe fn dot32(a: [int8x16_t; 2], y: *const i8) -> int32x4_t {
    let s = sdot(vdupq_n_s32(0), a[0], vld1q_s8(y));
    sdot(s, a[1], vld1q_s8(y.add(16)))
}

/// 16 bytes at `p` as i8 lanes (any alignment).
#[inline(always)]
pub(crate) unsafe fn load_i8<T>(p: *const T) -> int8x16_t {
    vld1q_s8(p.cast())
}

/// 16 bytes at `p` as u8 lanes (any alignment).
#[inline(always)]
pub(crate) unsafe fn load_u8<T>(p: *const T) -> uint8x16_t {
    vld1q_u8(p.cast())
}

/// The low and high nibbles of 16 bytes: `(q & 15, q >> 4)`.
#[inline(always)]
pub(crate) unsafe fn nibbles(q: uint8x16_t) -> (uint8x16_t, uint8x16_t) {
    (vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q))
}

/// The 32 bits of `bits` as 32 bytes: lane `j` of `[0]` (of `[1]`) is 0xff where bit `j`
/// (`16 + j`) is set, 0 elsewhere.
#[inline(always)]
pub(crate) unsafe fn bit_masks(bits: u32) -> [uint8x16_t; 2] {
    let word = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    // Lane j takes byte j / 8 of its half of the word, then tests bit j % 8.
    let pick = |lo: u64, hi: u64| vcombine_u8(vcreate_u8(lo), vcreate_u8(hi));
    let bit = pick(0x8040_2010_0804_0201, 0x8040_2010_0804_0201);
    [
        vtstq_u8(vqtbl1q_u8(word, pick(0, 0x0101_0101_0101_0101)), bit),
        vtstq_u8(
            vqtbl1q_u8(word, pick(0x0202_0202_0202_0202, 0x0303_0303_0303_0303)),
            bit,
        ),
    ]
}

pub(crate) use crate::block::read_f16 as f16;

pub(crate) use crate::blocks;

/// Two 8-byte lattice points as one register, `a` in bytes 0..8.
#[inline(always)]
pub(crate) unsafe fn points64(a: u64, b: u64) -> int8x16_t {
    vreinterpretq_s8_u8(vcombine_u8(vcreate_u8(a), vcreate_u8(b)))
}

/// `vec_dot` for the types with a NEON kernel.
///
/// # Safety
/// NEON and dotprod are available; lengths as for [`vec_dot_neon`].
#[inline(always)]
unsafe fn vec_dot(ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => legacy::q4_0(blocks(row), blocks(act)),
        T::Q4_1 => legacy::q4_1(blocks(row), blocks(act)),
        T::Q5_0 => legacy::q5_0(blocks(row), blocks(act)),
        T::Q5_1 => legacy::q5_1(blocks(row), blocks(act)),
        T::Q8_0 => legacy::q8_0(blocks(row), blocks(act)),
        T::IQ4_NL => legacy::iq4_nl(blocks(row), blocks(act)),
        T::Q4_K => k_quants::q4_k(blocks(row), blocks(act)),
        T::Q5_K => k_quants::q5_k(blocks(row), blocks(act)),
        T::Q6_K => k_quants::q6_k(blocks(row), blocks(act)),
        T::Q2_K => k_low::q2_k(blocks(row), blocks(act)),
        T::Q3_K => k_low::q3_k(blocks(row), blocks(act)),
        T::IQ4_XS => iq::iq4_xs(blocks(row), blocks(act)),
        T::IQ2_XXS => lattice::iq2_xxs(blocks(row), blocks(act)),
        T::IQ2_XS => lattice::iq2_xs(blocks(row), blocks(act)),
        T::IQ2_S => lattice::iq2_s(blocks(row), blocks(act)),
        T::IQ3_XXS => lattice::iq3_xxs(blocks(row), blocks(act)),
        T::IQ3_S => lattice::iq3_s(blocks(row), blocks(act)),
        T::IQ1_S => iq1::iq1_s(blocks(row), blocks(act)),
        T::IQ1_M => iq1::iq1_m(blocks(row), blocks(act)),
        _ => return None,
    })
}

/// `vec_dot` on the NEON path; `None` when the type has no kernel here.
///
/// # Safety
/// The CPU has NEON and dotprod; `row` and `act` hold the same whole number of blocks of `ty`
/// and `vec_dot_type(ty)`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn vec_dot_neon(ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
    vec_dot(ty, row, act)
}

/// `out[r]` = `vec_dot` of row `r` of `w` (`out.len()` rows back to back) and `act`, one row
/// after the other (no software prefetch: see the module docs). `false` when the type has no
/// kernel here (nothing written).
///
/// # Safety
/// As for [`vec_dot_neon`], for every row; `out` is not empty.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn vec_dot_rows_neon(
    ty: GgmlType,
    w: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> bool {
    let wrb = w.len() / out.len();
    for (row, o) in w.chunks_exact(wrb).zip(out.iter_mut()) {
        match vec_dot(ty, row, act) {
            Some(v) => *o = v,
            None => return false,
        }
    }
    true
}

/// `quantize` on the NEON path for the activation formats Q8_0, Q8_1 and Q8_K, bit-identical
/// to the scalar quantizers; `false` for other types (nothing written).
///
/// # Safety
/// As for [`vec_dot_neon`]; `dst` holds exactly the blocks of `src`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn quantize_neon(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool {
    const CHECKED: &str = "row length checked against the block size";
    match ty {
        GgmlType::Q8_0 => quantize::q8_0(src, cast_blocks_mut(dst).expect(CHECKED)),
        GgmlType::Q8_1 => quantize::q8_1(src, cast_blocks_mut(dst).expect(CHECKED)),
        GgmlType::Q8_K => quantize::q8_k(src, cast_blocks_mut(dst).expect(CHECKED)),
        _ => return false,
    }
    true
}

/// `dot_f32` on the NEON path for F32, F16 and BF16 rows; `None` for other types.
///
/// # Safety
/// As for [`vec_dot_neon`]; `row` holds exactly `x.len()` elements of `ty`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn dot_f32_neon(ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
    Some(match ty {
        GgmlType::F32 => float::f32(row, x),
        GgmlType::F16 => float::f16(row, x),
        GgmlType::BF16 => float::bf16(row, x),
        _ => return None,
    })
}
