//! `gemm_f32` against `dot_f32`: for the float weight types (and one quantized type, which
//! loops over `dot_f32`) on every instruction-set path this CPU has, each (row, token) entry is
//! bit-identical to `dot_f32_on` the same path, on shapes that are not multiples of the tiles
//! (rows, tokens, row lengths with a remainder after the widest step or no SIMD step at all)
//! and with an output stride wider than the row count; other output entries stay as they were.

mod common;

use common::{Path, Rng};
use strata_quant::{dot_f32_on, gemm_f32, gemm_f32_on, quantize, GgmlType, QuantError};

/// `n_rows` rows of `n` elements of `ty` from normal values with a few large and tiny ones.
fn rows(rng: &mut Rng, ty: GgmlType, n_rows: usize, n: usize) -> Vec<u8> {
    let mut x = rng.normals(n_rows * n, 1.0);
    for (i, v) in x.iter_mut().enumerate() {
        match i % 97 {
            3 => *v *= 1e4,
            5 => *v *= 1e-6,
            _ => {}
        }
    }
    let mut out = vec![0u8; ty.row_bytes((n_rows * n) as u64).unwrap() as usize];
    quantize(ty, &x, &mut out).unwrap();
    out
}

#[test]
fn gemm_f32_matches_dot_f32_bit_for_bit() {
    let mut rng = Rng::new(0xf10a7);
    let types = [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0];
    for path in common::available_paths(true) {
        let Path::Isa(isa) = path else { continue };
        for ty in types {
            let lens: &[usize] = if ty == GgmlType::Q8_0 {
                &[32, 96]
            } else {
                &[8, 16, 24, 40, 48, 64, 72, 80, 200, 2048]
            };
            for &n in lens {
                for (n_rows, n_tok) in [(1, 1), (3, 2), (4, 4), (5, 9), (9, 5), (8, 13)] {
                    let w = rows(&mut rng, ty, n_rows, n);
                    let x = rng.normals(n_tok * n, 2.0);
                    let stride = n_rows + 3;
                    let mut out = vec![f32::NAN; (n_tok - 1) * stride + n_rows + 1];
                    gemm_f32_on(isa, ty, &w, n_rows, &x, n, n_tok, &mut out, stride).unwrap();
                    let rb = w.len() / n_rows;
                    for t in 0..n_tok {
                        for r in 0..n_rows {
                            let want =
                                dot_f32_on(isa, ty, &w[r * rb..(r + 1) * rb], &x[t * n..][..n])
                                    .unwrap();
                            let got = out[t * stride + r];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{isa} {ty:?} n={n} {n_rows}x{n_tok} (row {r}, token {t}): {got} vs {want}"
                            );
                        }
                        if t + 1 < n_tok {
                            for gap in &out[t * stride + n_rows..(t + 1) * stride] {
                                assert!(gap.is_nan(), "{isa} {ty:?}: wrote between rows");
                            }
                        }
                    }
                    assert!(
                        out.last().unwrap().is_nan(),
                        "{isa} {ty:?}: wrote past the end"
                    );
                }
            }
        }
    }
}

#[test]
fn gemm_f32_rejects_bad_lengths() {
    let w = vec![0u8; 4 * 16 * 2];
    let x = vec![0.0f32; 16 * 3];
    let mut out = vec![0.0f32; 2 * 3];
    let short = gemm_f32(GgmlType::F32, &w[..100], 2, &x, 16, 3, &mut out, 2);
    assert!(
        matches!(short, Err(QuantError::LengthMismatch { .. })),
        "{short:?}"
    );
    let tokens = gemm_f32(GgmlType::F32, &w, 2, &x[..40], 16, 3, &mut out, 2);
    assert!(
        matches!(tokens, Err(QuantError::LengthMismatch { .. })),
        "{tokens:?}"
    );
    let small_out = gemm_f32(GgmlType::F32, &w, 2, &x, 16, 3, &mut out[..5], 2);
    assert!(
        matches!(small_out, Err(QuantError::LengthMismatch { .. })),
        "{small_out:?}"
    );
    assert!(gemm_f32(GgmlType::F32, &w, 2, &x, 16, 3, &mut out, 2).is_ok());
}
