//! ggml block formats: layouts, reference dequantization, quantization and dot products.
//!
//! Every ggml block format is a `#[repr(C)]` struct of byte arrays (alignment 1, layouts from
//! llama.cpp's `ggml/src/ggml-common.h`) implementing [`Block`]; those that can be produced from
//! f32 implement [`FromFloat`], and weight formats with an activation dot kernel implement
//! [`VecDot`]. The functions below dispatch on a runtime [`GgmlType`] over raw row bytes, as the
//! engine reads them from an mmapped GGUF file.
//!
//! Reference behaviour (tests/vectors.rs): [`dequantize`] is bit-identical to gguf-py's
//! `gguf.quants.dequantize` for every type gguf-py has, [`quantize`] to gguf-py's `quantize`
//! (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, BF16) and to ggml's `quantize_row_*_ref` (Q4_K, Q5_K,
//! Q6_K, Q8_K, Q8_1).
//!
//! [`vec_dot`], [`quantize`] (for the activation formats) and [`dot_f32`] (for F32, F16, BF16)
//! run SIMD kernels chosen once at run time ([`Isa::best`]); the `*_on` variants run a named
//! [`Isa`]. The SIMD paths equal the scalar references up to f32 summation order, and their
//! quantizers are bit-identical to them (tests/simd.rs).
//!
//! ```
//! use strata_quant::{dequantize, dot_f32, quantize, GgmlType};
//!
//! let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
//! let mut row = vec![0u8; 2 * 34]; // two Q8_0 blocks
//! quantize(GgmlType::Q8_0, &x, &mut row)?;
//! let mut y = vec![0.0f32; 64];
//! dequantize(GgmlType::Q8_0, &row, &mut y)?;
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.005));
//! let dot = dot_f32(GgmlType::Q8_0, &row, &x)?;
//! assert!((dot - x.iter().map(|v| v * v).sum::<f32>()).abs() < 0.05);
//! # Ok::<(), strata_quant::QuantError>(())
//! ```

#![warn(missing_docs)]

mod block;
mod dispatch;
mod dot;
mod error;
mod float;
mod gemm;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
#[rustfmt::skip]
pub mod iq_tables;
mod k_quantize;
mod k_quants;
mod legacy;
mod q8_k;
#[doc(hidden)]
pub mod testing;

pub use block::{
    blocks_as_bytes, cast_blocks, cast_blocks_mut, f16_to_f32, f32_to_f16, Block, FromFloat, VecDot,
};
pub use dispatch::{Isa, ISA_ENV};
pub use dot::{dot_f32_blocks, dot_f32_f32};
pub use error::{Op, QuantError};
pub use float::f32_to_bf16;
pub use gemm::gemm;
pub use gemm::gemm_on;
pub use gemm::{gemm_f32, gemm_f32_on};
pub use iq1::{BlockIQ1_M, BlockIQ1_S, IQ1_DELTA};
pub use iq2::{BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS};
pub use iq3::{BlockIQ3_S, BlockIQ3_XXS};
pub use iq4::{BlockIQ4_NL, BlockIQ4_XS, QK4_NL};
pub use k_quants::{
    q3_k_scales, scale_min_k4, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K, K_SCALE_SIZE,
    QK_K,
};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK as QK8_0};
pub use q8_k::BlockQ8_K;
pub use strata_gguf::GgmlType;

use dispatch::{Kernels, Supported};
use float::{BF16, F16, F32};

/// Runs `$body` with `$B` bound to the block struct of `$ty`, for every block type in `[...]`;
/// evaluates `$other` for any other type.
macro_rules! with_block {
    ($ty:expr, [$($name:ident => $block:ty),* $(,)?], $B:ident => $body:expr, _ => $other:expr) => {
        match $ty {
            $(GgmlType::$name => {
                type $B = $block;
                $body
            })*
            _ => $other,
        }
    };
}

/// Every block type with a [`Block`] impl.
macro_rules! each_block {
    ($ty:expr, $B:ident => $body:expr, _ => $other:expr) => {
        with_block!($ty, [
            Q4_0 => BlockQ4_0, Q4_1 => BlockQ4_1, Q5_0 => BlockQ5_0, Q5_1 => BlockQ5_1,
            Q8_0 => BlockQ8_0, Q8_1 => BlockQ8_1, Q2_K => BlockQ2_K, Q3_K => BlockQ3_K,
            Q4_K => BlockQ4_K, Q5_K => BlockQ5_K, Q6_K => BlockQ6_K, Q8_K => BlockQ8_K,
            IQ2_XXS => BlockIQ2_XXS, IQ2_XS => BlockIQ2_XS, IQ2_S => BlockIQ2_S,
            IQ3_XXS => BlockIQ3_XXS, IQ3_S => BlockIQ3_S, IQ1_S => BlockIQ1_S,
            IQ1_M => BlockIQ1_M, IQ4_NL => BlockIQ4_NL, IQ4_XS => BlockIQ4_XS,
        ], $B => $body, _ => $other)
    };
}

/// Every block type with a [`FromFloat`] impl.
macro_rules! each_from_float {
    ($ty:expr, $B:ident => $body:expr, _ => $other:expr) => {
        with_block!($ty, [
            Q4_0 => BlockQ4_0, Q4_1 => BlockQ4_1, Q5_0 => BlockQ5_0, Q5_1 => BlockQ5_1,
            Q8_0 => BlockQ8_0, Q8_1 => BlockQ8_1, Q4_K => BlockQ4_K, Q5_K => BlockQ5_K,
            Q6_K => BlockQ6_K, Q8_K => BlockQ8_K,
        ], $B => $body, _ => $other)
    };
}

/// Every block type with a [`VecDot`] impl.
macro_rules! each_vec_dot {
    ($ty:expr, $B:ident => $body:expr, _ => $other:expr) => {
        with_block!($ty, [
            Q4_0 => BlockQ4_0, Q4_1 => BlockQ4_1, Q5_0 => BlockQ5_0, Q5_1 => BlockQ5_1,
            Q8_0 => BlockQ8_0, Q2_K => BlockQ2_K, Q3_K => BlockQ3_K, Q4_K => BlockQ4_K,
            Q5_K => BlockQ5_K, Q6_K => BlockQ6_K, IQ2_XXS => BlockIQ2_XXS,
            IQ2_XS => BlockIQ2_XS, IQ2_S => BlockIQ2_S, IQ3_XXS => BlockIQ3_XXS,
            IQ3_S => BlockIQ3_S, IQ1_S => BlockIQ1_S, IQ1_M => BlockIQ1_M,
            IQ4_NL => BlockIQ4_NL, IQ4_XS => BlockIQ4_XS,
        ], $B => $body, _ => $other)
    };
}

/// True when [`dequantize`] and [`dot_f32`] accept `ty`: F32, F16, BF16 and every block format
/// above (all of ggml's quantized types except TQ1_0, TQ2_0 and MXFP4).
pub fn supports_dequantize(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        || each_block!(ty, B => { let _ = B::BLOCK_SIZE; true }, _ => false)
}

/// True when [`quantize`] accepts `ty`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K,
/// Q5_K, Q6_K and Q8_K.
pub fn supports_quantize(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        || each_from_float!(ty, B => { let _ = B::BLOCK_SIZE; true }, _ => false)
}

/// The activation format ggml pairs with weight type `ty` for [`vec_dot`] (`vec_dot_type` in
/// ggml's `type_traits_cpu`): Q8_0 for Q4_0, Q5_0, Q8_0 and IQ4_NL; Q8_1 for Q4_1 and Q5_1; Q8_K
/// for the k- and i-quants; BF16 for BF16 (activations rounded to bf16 by [`quantize`], as
/// ggml-cpu's `ggml_cpu_fp32_to_bf16` does). `None` for types without an activation kernel here,
/// F32 and F16 among them (their weights take [`dot_f32`]).
///
/// ```
/// use strata_quant::{vec_dot_type, GgmlType};
///
/// assert_eq!(vec_dot_type(GgmlType::Q4_K), Some(GgmlType::Q8_K));
/// assert_eq!(vec_dot_type(GgmlType::BF16), Some(GgmlType::BF16));
/// assert_eq!(vec_dot_type(GgmlType::F16), None);
/// ```
pub fn vec_dot_type(ty: GgmlType) -> Option<GgmlType> {
    if ty == GgmlType::BF16 {
        return Some(GgmlType::BF16);
    }
    each_vec_dot!(ty, B => Some(<B as VecDot>::VecDotType::TYPE), _ => None)
}

/// Bytes of a row of `n` elements of `ty`, checking that `n` is a whole number of blocks.
fn row_bytes(ty: GgmlType, n: usize) -> Result<usize, QuantError> {
    let block_size = ty.block_size();
    if !n.is_multiple_of(block_size) {
        return Err(QuantError::PartialBlock {
            ty,
            elements: n,
            block_size,
        });
    }
    Ok(n / block_size * ty.type_size())
}

fn check_len(
    ty: GgmlType,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), QuantError> {
    if expected == got {
        Ok(())
    } else {
        Err(QuantError::LengthMismatch {
            ty,
            what,
            expected,
            got,
        })
    }
}

/// Views a length-checked byte row as blocks (the length check makes the cast infallible).
pub(crate) fn blocks<B: Block>(bytes: &[u8]) -> &[B] {
    cast_blocks(bytes).expect("row length checked against the block size")
}

/// Dequantizes one row of `ty` into f32.
///
/// `dst.len()` is the row length in elements and must be a whole number of blocks of `ty`;
/// `src.len()` must equal `ty.row_bytes(dst.len())`. Allocation-free.
///
/// # Errors
/// [`QuantError::Unsupported`] when `!supports_dequantize(ty)`, [`QuantError::PartialBlock`] or
/// [`QuantError::LengthMismatch`] for inconsistent lengths (nothing is written then).
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    if !supports_dequantize(ty) {
        return Err(QuantError::Unsupported {
            ty,
            op: Op::Dequantize,
        });
    }
    check_len(
        ty,
        "quantized row (bytes)",
        row_bytes(ty, dst.len())?,
        src.len(),
    )?;
    match ty {
        GgmlType::F32 => float::decode::<F32, 4>(src, dst),
        GgmlType::F16 => float::decode::<F16, 2>(src, dst),
        GgmlType::BF16 => float::decode::<BF16, 2>(src, dst),
        _ => each_block!(ty, B => B::to_float(blocks::<B>(src), dst), _ => unreachable!()),
    }
    Ok(())
}

/// Quantizes one f32 row into `ty`.
///
/// `src.len()` must be a whole number of blocks of `ty`; `dst.len()` must equal
/// `ty.row_bytes(src.len())`. Allocation-free.
///
/// # Errors
/// [`QuantError::Unsupported`] when `!supports_quantize(ty)`, [`QuantError::PartialBlock`] or
/// [`QuantError::LengthMismatch`] for inconsistent lengths (nothing is written then).
pub fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    quantize_with(Supported::best(), ty, src, dst)
}

/// [`quantize`] on the kernels of `isa` (bit-identical on every path).
///
/// # Errors
/// As [`quantize`], and [`QuantError::IsaUnavailable`] when this CPU lacks `isa`.
pub fn quantize_on(isa: Isa, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    quantize_with(Supported::check(isa)?, ty, src, dst)
}

fn quantize_with(
    cpu: impl Kernels,
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), QuantError> {
    if !supports_quantize(ty) {
        return Err(QuantError::Unsupported {
            ty,
            op: Op::Quantize,
        });
    }
    check_len(
        ty,
        "quantized row (bytes)",
        row_bytes(ty, src.len())?,
        dst.len(),
    )?;
    if cpu.quantize(ty, src, dst) {
        return Ok(());
    }
    match ty {
        GgmlType::F32 => float::encode::<F32, 4>(src, dst),
        GgmlType::F16 => float::encode::<F16, 2>(src, dst),
        GgmlType::BF16 => float::encode::<BF16, 2>(src, dst),
        _ => each_from_float!(ty, B => {
            let dst = cast_blocks_mut::<B>(dst).expect("row length checked against the block size");
            B::from_float(src, dst)
        }, _ => unreachable!()),
    }
    Ok(())
}

/// Σ dequantized(`row`) · `x` for one row of `ty`, without allocating.
///
/// `x.len()` is the row length in elements (a whole number of blocks); `row.len()` must equal
/// `ty.row_bytes(x.len())`. Equal to dequantize-then-dot up to f32 summation order.
///
/// # Errors
/// As [`dequantize`], with [`Op::DotF32`].
pub fn dot_f32(ty: GgmlType, row: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    dot_f32_with(Supported::best(), ty, row, x)
}

/// [`dot_f32`] on the kernels of `isa`.
///
/// # Errors
/// As [`dot_f32`], and [`QuantError::IsaUnavailable`] when this CPU lacks `isa`.
pub fn dot_f32_on(isa: Isa, ty: GgmlType, row: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    dot_f32_with(Supported::check(isa)?, ty, row, x)
}

pub(crate) fn dot_f32_with(
    cpu: impl Kernels,
    ty: GgmlType,
    row: &[u8],
    x: &[f32],
) -> Result<f32, QuantError> {
    if !supports_dequantize(ty) {
        return Err(QuantError::Unsupported { ty, op: Op::DotF32 });
    }
    check_len(
        ty,
        "quantized row (bytes)",
        row_bytes(ty, x.len())?,
        row.len(),
    )?;
    if let Some(dot) = cpu.dot_f32(ty, row, x) {
        return Ok(dot);
    }
    Ok(match ty {
        GgmlType::F32 => float::dot::<F32, 4>(row, x),
        GgmlType::F16 => float::dot::<F16, 2>(row, x),
        GgmlType::BF16 => float::dot::<BF16, 2>(row, x),
        _ => each_block!(ty, B => dot_f32_blocks(blocks::<B>(row), x), _ => unreachable!()),
    })
}

/// Σ dequantized(`row`) · dequantized(`act`): one weight row of `ty` against one activation
/// row already quantized to `vec_dot_type(ty)` (see [`quantize`]), covering the same elements.
///
/// `row.len()` must be a whole number of `ty` blocks; `act.len()` the matching number of
/// activation blocks. Allocation-free; the scalar reference of ggml's `vec_dot` kernels.
///
/// ```
/// use strata_quant::{quantize, vec_dot, vec_dot_type, GgmlType};
///
/// let (w, x) = (vec![0.25f32; 256], vec![2.0f32; 256]);
/// let mut row = vec![0u8; 144];
/// quantize(GgmlType::Q4_K, &w, &mut row)?;
/// let act_ty = vec_dot_type(GgmlType::Q4_K).unwrap(); // Q8_K
/// let mut act = vec![0u8; 292];
/// quantize(act_ty, &x, &mut act)?;
/// let dot = vec_dot(GgmlType::Q4_K, &row, &act)?;
/// assert!((dot - 128.0).abs() < 0.5);
/// # Ok::<(), strata_quant::QuantError>(())
/// ```
///
/// `act` must come from [`quantize`] (any path): the SIMD kernels rely on its quants lying in
/// -127..=127 and on Q8_K's block sums matching its quants.
///
/// BF16 weights take a BF16 activation row of the same length (ggml's `ggml_vec_dot_bf16`).
/// On CPUs with AVX512-BF16 the [`Isa::Avx512`] path computes it with `vdpbf16ps`, which
/// treats subnormal inputs and results as zero and rounds each of its two adds per lane; the
/// other paths sum the exact f32 products. Either way the result is ggml's up to f32 rounding.
///
/// # Errors
/// [`QuantError::Unsupported`] when `vec_dot_type(ty)` is `None`,
/// [`QuantError::LengthMismatch`] for inconsistent lengths.
#[inline]
pub fn vec_dot(ty: GgmlType, row: &[u8], act: &[u8]) -> Result<f32, QuantError> {
    vec_dot_with(Supported::best(), ty, row, act)
}

/// [`vec_dot`] on the kernels of `isa`.
///
/// # Errors
/// As [`vec_dot`], and [`QuantError::IsaUnavailable`] when this CPU lacks `isa`.
pub fn vec_dot_on(isa: Isa, ty: GgmlType, row: &[u8], act: &[u8]) -> Result<f32, QuantError> {
    vec_dot_with(Supported::check(isa)?, ty, row, act)
}

fn vec_dot_with(
    cpu: impl Kernels,
    ty: GgmlType,
    row: &[u8],
    act: &[u8],
) -> Result<f32, QuantError> {
    if ty == GgmlType::BF16 {
        check_len(ty, "quantized row (bytes)", row.len() / 2 * 2, row.len())?;
        check_len(ty, "activation row (bytes)", row.len(), act.len())?;
        if let Some(dot) = cpu.vec_dot(ty, row, act) {
            return Ok(dot);
        }
        return Ok(float::dot_bf16(row, act));
    }
    each_vec_dot!(ty, B => {
        type A = <B as VecDot>::VecDotType;
        let n_blocks = row.len() / ty.type_size();
        check_len(ty, "quantized row (bytes)", n_blocks * ty.type_size(), row.len())?;
        check_len(A::TYPE, "activation row (bytes)", n_blocks * A::TYPE.type_size(), act.len())?;
        if let Some(dot) = cpu.vec_dot(ty, row, act) {
            return Ok(dot);
        }
        Ok(B::vec_dot(blocks::<B>(row), blocks::<A>(act)))
    }, _ => Err(QuantError::Unsupported { ty, op: Op::VecDot }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    fn size_of_block(ty: GgmlType) -> Option<(usize, usize)> {
        each_block!(ty, B => Some((size_of::<B>(), B::BLOCK_SIZE)), _ => None)
    }

    #[test]
    fn block_structs_match_ggml_type_sizes() {
        for ty in strata_gguf::ALL_TYPES {
            if let Some((size, block_size)) = size_of_block(ty) {
                assert_eq!(size, ty.type_size(), "{ty}");
                assert_eq!(block_size, ty.block_size(), "{ty}");
            }
        }
    }

    #[test]
    fn vec_dot_types_follow_ggml() {
        assert_eq!(vec_dot_type(GgmlType::Q4_0), Some(GgmlType::Q8_0));
        assert_eq!(vec_dot_type(GgmlType::Q4_1), Some(GgmlType::Q8_1));
        assert_eq!(vec_dot_type(GgmlType::Q5_1), Some(GgmlType::Q8_1));
        assert_eq!(vec_dot_type(GgmlType::IQ4_NL), Some(GgmlType::Q8_0));
        assert_eq!(vec_dot_type(GgmlType::Q6_K), Some(GgmlType::Q8_K));
        assert_eq!(vec_dot_type(GgmlType::IQ1_M), Some(GgmlType::Q8_K));
        assert_eq!(vec_dot_type(GgmlType::Q8_K), None);
        assert_eq!(vec_dot_type(GgmlType::F16), None);
        assert_eq!(vec_dot_type(GgmlType::BF16), Some(GgmlType::BF16));
    }
}
