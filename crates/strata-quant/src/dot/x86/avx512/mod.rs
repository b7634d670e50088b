//! AVX-512 kernels (512-bit registers, VNNI): the formats where doubling the register width pays.
//! Types without a kernel here fall back to the 256-bit AVX2 code compiled with AVX-512 VNNI.
//! BF16 × BF16 has a kernel here only where the CPU also has AVX512-BF16 (probed per call, not
//! a path of its own): `vdpbf16ps`, as ggml uses; elsewhere it takes the AVX2 widening kernel.

mod bf16;
pub(super) mod float;
pub(crate) mod iq3_xxs;
mod k_low;
pub(crate) mod k_quants;
pub(crate) mod legacy;
pub(crate) mod q4_k;

use strata_gguf::GgmlType;

use super::avx2::{blocks, iq3};
use super::Avx512Vnni;
use crate::iq2::BlockIQ2_S;
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};

/// `vec_dot` for the types with a 512-bit kernel.
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, FMA and F16C are available; lengths as in `entry_points!`.
#[inline(always)]
pub(super) unsafe fn vec_dot(ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
    use GgmlType as T;
    Some(match ty {
        T::Q4_0 => legacy::q4_0(blocks(row), blocks(act)),
        T::Q4_1 => legacy::q4_1(blocks(row), blocks(act)),
        T::Q5_0 => legacy::q5_0(blocks(row), blocks(act)),
        T::Q5_1 => legacy::q5_1(blocks(row), blocks(act)),
        T::Q8_0 => legacy::q8_0(blocks(row), blocks(act)),
        T::IQ4_NL => legacy::iq4_nl(blocks(row), blocks(act)),
        T::Q4_K => q4_k::q4_k(blocks(row), blocks(act)),
        T::Q5_K => k_quants::q5_k(blocks(row), blocks(act)),
        T::Q6_K => k_quants::q6_k(blocks(row), blocks(act)),
        T::IQ4_XS => k_quants::iq4_xs(blocks(row), blocks(act)),
        // Block order, so that the 16-token GEMM kernel (`gemm/x86/iq3_xxs_lanes.rs`) has the
        // same bits.
        // SAFETY: AVX-512 F, BW, VL and VNNI are available (above) and VBMI was just probed.
        T::IQ3_XXS if iq3_xxs::available() => unsafe { iq3_xxs::vec_dot(blocks(row), blocks(act)) },
        T::IQ3_XXS => iq3::block_order::<BlockIQ3_XXS, Avx512Vnni>(blocks(row), blocks(act)),
        // Block order too, so that their 16-token GEMM kernels (`gemm/x86/lattice_lanes.rs`)
        // have the same bits.
        T::IQ3_S => iq3::block_order::<BlockIQ3_S, Avx512Vnni>(blocks(row), blocks(act)),
        T::IQ2_S => iq3::block_order::<BlockIQ2_S, Avx512Vnni>(blocks(row), blocks(act)),
        T::Q2_K => k_low::q2_k(blocks(row), blocks(act)),
        T::Q3_K => k_low::q3_k(blocks(row), blocks(act)),
        // SAFETY: AVX-512 F and BW are available (above) and AVX512-BF16 was just probed.
        T::BF16 if bf16::available() => unsafe { bf16::vec_dot(row, act) },
        _ => return None,
    })
}

/// `dot_f32` for F32, F16 and BF16 rows.
///
/// # Safety
/// AVX-512 F is available; lengths as in `entry_points!`.
#[inline(always)]
pub(super) unsafe fn dot_f32(ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
    Some(match ty {
        GgmlType::F32 => float::f32(row, x),
        GgmlType::F16 => float::f16(row, x),
        GgmlType::BF16 => float::bf16(row, x),
        _ => return None,
    })
}
