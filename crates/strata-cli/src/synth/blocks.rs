//! Random rows of the ggml block types strata-quant has no encoder for (the 2- and 3-bit
//! k-quants and the i-quants), so that `strata synth` can write files typed as llama.cpp's
//! IQ3_XXS and IQ2_XS mixes produce them.
//!
//! Every bit pattern of these blocks' quant fields is a valid value: grid indices address
//! tables with exactly 2^bits entries, sign indices and packed sub-block scales use all their
//! bits. Only the f16 super-block scales (`d`, and `dmin` for Q2_K) can be NaN or infinite,
//! so a block is random bytes with those fields written afterwards: first as 1.0, then
//! rescaled so the block's dequantized values have root mean square `std` (as a trained
//! weight row drawn ~ N(0, std²) would). Random weights are all a synthetic file needs;
//! these are not quantizations of given values.
//!
//! Layouts: ggml's `block_*` structs (`ggml-common.h`); the offsets of the f16 fields below
//! are those structs' and are checked against [`GgmlType::type_size`] in the tests.

use anyhow::{bail, Result};
use half::f16;
use strata_gguf::GgmlType;

use super::rows::{mix, Normal};

/// Byte offsets of the f16 scale fields in one block of `ty`, or `None` when the type is not
/// drawn here.
fn scale_fields(ty: GgmlType) -> Option<&'static [usize]> {
    use GgmlType as T;
    Some(match ty {
        // scales[16], qs[64], d, dmin.
        T::Q2_K => &[80, 82],
        // hmask[32], qs[64], scales[12], d.
        T::Q3_K => &[108],
        // d first, then quant fields.
        T::IQ2_XXS | T::IQ2_XS | T::IQ2_S | T::IQ3_XXS | T::IQ3_S | T::IQ1_S => &[0],
        T::IQ4_NL | T::IQ4_XS => &[0],
        _ => return None,
    })
}

/// True when rows of `ty` can be drawn here.
pub fn supports(ty: GgmlType) -> bool {
    scale_fields(ty).is_some()
}

/// Fills `dst` (one row: whole blocks of `ty`) with random valid blocks whose dequantized
/// values have RMS `std` per block. Deterministic in `seed`.
///
/// Errors: a type not drawn here, or `dst` not a whole number of blocks.
pub fn random_row(ty: GgmlType, seed: u64, std: f32, dst: &mut [u8]) -> Result<()> {
    let Some(fields) = scale_fields(ty) else {
        bail!("{ty} rows cannot be drawn at random");
    };
    let bytes = ty.type_size();
    if !dst.len().is_multiple_of(bytes) {
        bail!("{} bytes are not whole {ty} blocks", dst.len());
    }
    let mut state = mix(seed);
    for chunk in dst.chunks_mut(8) {
        state = mix(state);
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    let mut values = vec![0f32; ty.block_size()];
    let one = f16::ONE.to_le_bytes();
    for block in dst.chunks_exact_mut(bytes) {
        for &f in fields {
            block[f..f + 2].copy_from_slice(&one);
        }
        strata_quant::dequantize(ty, block, &mut values)?;
        let ms = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
        // An all-zero block (possible for Q3_K's packed scales) keeps d = 1: it is zero anyway.
        let scale = if ms > 0.0 { std / ms.sqrt() } else { 1.0 };
        let d = f16::from_f32(scale).to_le_bytes();
        for &f in fields {
            block[f..f + 2].copy_from_slice(&d);
        }
    }
    Ok(())
}

/// A row of `row_len` values ~ N(0, std²) encoded as `ty`: quantized by strata-quant where
/// it has an encoder, else drawn by [`random_row`].
///
/// Errors: a type neither can produce.
pub fn encode_row(ty: GgmlType, seed: u64, row_len: usize, std: f32, dst: &mut [u8]) -> Result<()> {
    if strata_quant::supports_quantize(ty) {
        let mut n = Normal::new(seed);
        let src: Vec<f32> = (0..row_len).map(|_| n.next() * std).collect();
        strata_quant::quantize(ty, &src, dst)?;
        Ok(())
    } else {
        random_row(ty, seed, std, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAWN: [GgmlType; 10] = [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ2_S,
        GgmlType::IQ3_XXS,
        GgmlType::IQ3_S,
        GgmlType::IQ1_S,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ];

    #[test]
    fn drawn_rows_are_finite_with_the_asked_spread() {
        let row_len = 2048;
        let std = 1.0 / (row_len as f32).sqrt();
        for ty in DRAWN {
            let mut row = vec![0u8; ty.row_bytes(row_len as u64).unwrap() as usize];
            random_row(ty, 7, std, &mut row).unwrap();
            let mut v = vec![0f32; row_len];
            strata_quant::dequantize(ty, &row, &mut v).unwrap();
            assert!(v.iter().all(|x| x.is_finite()), "{ty}");
            let rms = (v.iter().map(|x| x * x).sum::<f32>() / row_len as f32).sqrt();
            // f16 rounding of d and blocks whose RMS is near zero move it a little.
            assert!((rms / std - 1.0).abs() < 0.05, "{ty}: rms {rms} vs {std}");
            let nonzero = v.iter().filter(|x| **x != 0.0).count();
            assert!(nonzero > row_len / 2, "{ty}: {nonzero} nonzero");
        }
    }

    #[test]
    fn scale_fields_lie_inside_the_block() {
        for ty in DRAWN {
            let fields = scale_fields(ty).unwrap();
            assert!(fields.iter().all(|f| f + 2 <= ty.type_size()), "{ty}");
        }
        assert!(!supports(GgmlType::Q4_K));
        assert!(!supports(GgmlType::IQ1_M));
    }

    #[test]
    fn the_same_seed_gives_the_same_row() {
        let ty = GgmlType::IQ3_XXS;
        let mut a = vec![0u8; ty.type_size() * 4];
        let mut b = a.clone();
        random_row(ty, 3, 0.02, &mut a).unwrap();
        random_row(ty, 3, 0.02, &mut b).unwrap();
        assert_eq!(a, b);
        random_row(ty, 4, 0.02, &mut b).unwrap();
        assert_ne!(a, b);
    }
}
