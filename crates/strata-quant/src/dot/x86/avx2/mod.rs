//! The AVX2 kernels (256-bit), generic over the integer-dot instruction ([`IntDot`]): plain AVX2
//! and both VNNI flavours share this code.

pub(super) mod float;
mod iq;
mod iq1;
pub(crate) mod iq2;
pub(crate) mod iq3;
pub(super) mod k_low;
pub(crate) mod k_quants;
pub(crate) mod lattice;
pub(crate) mod legacy;
pub(crate) mod q4_k;
mod quantize;

use strata_gguf::GgmlType;

use super::IntDot;
use crate::block::cast_blocks_mut;

pub(super) use crate::blocks;

/// `vec_dot` for the types with an AVX2 kernel (BF16's widens both rows to f32 and FMAs).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; lengths as in `entry_points!`.
#[inline(always)]
pub(super) unsafe fn vec_dot<M: IntDot>(ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => legacy::q4_0::<M>(blocks(row), blocks(act)),
        T::Q4_1 => legacy::q4_1::<M>(blocks(row), blocks(act)),
        T::Q5_0 => legacy::q5_0::<M>(blocks(row), blocks(act)),
        T::Q5_1 => legacy::q5_1::<M>(blocks(row), blocks(act)),
        T::Q8_0 => legacy::q8_0::<M>(blocks(row), blocks(act)),
        T::IQ4_NL => legacy::iq4_nl::<M>(blocks(row), blocks(act)),
        T::Q4_K => q4_k::q4_k::<M>(blocks(row), blocks(act)),
        T::Q5_K => k_quants::q5_k::<M>(blocks(row), blocks(act)),
        T::Q6_K => k_quants::q6_k::<M>(blocks(row), blocks(act)),
        T::IQ4_XS => iq::iq4_xs::<M>(blocks(row), blocks(act)),
        T::IQ2_XXS => iq2::iq2_xxs::<M>(blocks(row), blocks(act)),
        T::IQ2_XS => iq2::iq2_xs::<M>(blocks(row), blocks(act)),
        T::IQ2_S => iq2::iq2_s::<M>(blocks(row), blocks(act)),
        // The paths with VNNI take the block order at their entry points (`x86/mod.rs`).
        T::IQ3_XXS => iq3::iq3_xxs::<M>(blocks(row), blocks(act)),
        T::IQ3_S => iq3::iq3_s::<M>(blocks(row), blocks(act)),
        T::IQ1_S => iq1::iq1_s::<M>(blocks(row), blocks(act)),
        T::IQ1_M => iq1::iq1_m::<M>(blocks(row), blocks(act)),
        T::Q2_K => k_low::q2_k::<M>(blocks(row), blocks(act)),
        T::Q3_K => k_low::q3_k::<M>(blocks(row), blocks(act)),
        T::BF16 => float::bf16_bf16(row, act),
        _ => return None,
    })
}

/// `quantize` for the activation formats Q8_0, Q8_1 and Q8_K.
///
/// # Safety
/// AVX2, FMA and F16C are available; lengths as in `entry_points!`.
#[inline(always)]
pub(super) unsafe fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool {
    const CHECKED: &str = "row length checked against the block size";
    match ty {
        GgmlType::Q8_0 => quantize::q8_0(src, cast_blocks_mut(dst).expect(CHECKED)),
        GgmlType::Q8_1 => quantize::q8_1(src, cast_blocks_mut(dst).expect(CHECKED)),
        GgmlType::Q8_K => quantize::q8_k(src, cast_blocks_mut(dst).expect(CHECKED)),
        _ => return false,
    }
    true
}

/// `dot_f32` for F32, F16 and BF16 rows.
///
/// # Safety
/// AVX2, FMA and F16C are available; lengths as in `entry_points!`.
#[inline(always)]
pub(super) unsafe fn dot_f32(ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
    Some(match ty {
        GgmlType::F32 => float::f32(row, x),
        GgmlType::F16 => float::f16(row, x),
        GgmlType::BF16 => float::bf16(row, x),
        _ => return None,
    })
}
