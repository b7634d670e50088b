//! Dot products: `dot_f32` against dequantize-then-dot, and the quantized-activation `vec_dot`
//! paths against the f32 dot within the error the activation quantization allows.

mod common;

use common::{f32s, load_vectors, Kind, Rng};
use strata_quant::{
    cast_blocks, dequantize, dot_f32, f16_to_f32, quantize, vec_dot, vec_dot_type, BlockQ4_1,
    BlockQ5_1, BlockQ8_1, GgmlType,
};

/// Rows of every dequantizable type with their dequantized values: the committed reference rows
/// (random bytes with finite scales), except for F32 and BF16, whose random bit patterns reach
/// 1e38 and overflow any dot; those rows are encoded Gaussians instead.
fn reference_rows() -> Vec<(GgmlType, Vec<u8>, Vec<f32>)> {
    let (_, records) = load_vectors();
    let mut rows: Vec<_> = records
        .into_iter()
        .filter(|r| r.kind == Kind::Dequantize && !matches!(r.ty, GgmlType::F32 | GgmlType::BF16))
        .map(|r| (r.ty, r.a, f32s(&r.b)))
        .collect();
    let mut rng = Rng::new(9);
    for ty in [GgmlType::F32, GgmlType::BF16] {
        let x = rng.normals(1000, 3.0);
        let mut row = vec![0u8; ty.row_bytes(1000).unwrap() as usize];
        quantize(ty, &x, &mut row).unwrap();
        let mut w = vec![0.0f32; 1000];
        dequantize(ty, &row, &mut w).unwrap();
        rows.push((ty, row, w));
    }
    rows
}

fn dot64(a: &[f32], b: &[f32]) -> (f64, f64) {
    let terms = a.iter().zip(b).map(|(a, b)| *a as f64 * *b as f64);
    terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()))
}

#[test]
fn dot_f32_equals_dequantize_then_dot() {
    let mut rng = Rng::new(1);
    for (ty, row, w) in reference_rows() {
        // Also a prefix (odd lengths exercise the float types' tail handling).
        let cut = if ty.block_size() == 1 {
            13
        } else {
            ty.block_size()
        };
        for (row, w) in [
            (&row[..], &w[..]),
            (&row[..cut / ty.block_size() * ty.type_size()], &w[..cut]),
        ] {
            let x = rng.normals(w.len(), 1.0);
            let got = dot_f32(ty, row, &x).unwrap() as f64;
            let mut deq = vec![0.0f32; w.len()];
            dequantize(ty, row, &mut deq).unwrap();
            let (want, magnitude) = dot64(&deq, &x);
            assert!(
                (got - want).abs() <= 1e-5 * magnitude,
                "{ty} ({} elements): dot_f32 {got}, dequantize-then-dot {want}",
                w.len()
            );
        }
    }
}

/// `|Σ w (x - x̂)| <= Σ |w| |x - x̂|` bounds what activation quantization can change; Q4_1 and
/// Q5_1 also take each block's `Σ m x̂` from Q8_1's f16 `s`, off by up to 2^-11 of `|m s|`.
#[test]
fn vec_dot_is_within_activation_quantization_error_of_dot_f32() {
    let mut rng = Rng::new(2);
    for (ty, row, w) in reference_rows() {
        let Some(act_ty) = vec_dot_type(ty) else {
            continue;
        };
        for scale in [1.0f32, 1e-3, 300.0] {
            let x = rng.normals(w.len(), scale);
            let mut act = vec![0u8; act_ty.row_bytes(x.len() as u64).unwrap() as usize];
            quantize(act_ty, &x, &mut act).unwrap();
            let mut xq = vec![0.0f32; x.len()];
            dequantize(act_ty, &act, &mut xq).unwrap();

            let got = vec_dot(ty, &row, &act).unwrap() as f64;
            let want = dot_f32(ty, &row, &x).unwrap() as f64;
            let quant_err: f64 = w
                .iter()
                .zip(x.iter().zip(&xq))
                .map(|(w, (x, q))| (*w as f64 * (x - q) as f64).abs())
                .sum();
            let s_err = if act_ty == GgmlType::Q8_1 {
                q8_1_s_error(ty, &row, &act)
            } else {
                0.0
            };
            let (_, magnitude) = dot64(&w, &x);
            let tol = quant_err + s_err + 1e-5 * magnitude;
            assert!(
                (got - want).abs() <= tol,
                "{ty} x{scale}: vec_dot {got}, dot_f32 {want}, allowed {tol}"
            );
            // And the bound is not vacuous: the activation error is small next to the dot's
            // magnitude (8-bit activations).
            assert!(
                quant_err <= 0.02 * magnitude,
                "{ty} x{scale}: {quant_err} vs {magnitude}"
            );
        }
    }
}

fn q8_1_s_error(ty: GgmlType, row: &[u8], act: &[u8]) -> f64 {
    let mins: Vec<f32> = match ty {
        GgmlType::Q4_1 => cast_blocks::<BlockQ4_1>(row)
            .unwrap()
            .iter()
            .map(|b| f16(b.m))
            .collect(),
        GgmlType::Q5_1 => cast_blocks::<BlockQ5_1>(row)
            .unwrap()
            .iter()
            .map(|b| f16(b.m))
            .collect(),
        _ => unreachable!("{ty} is not paired with Q8_1"),
    };
    let act = cast_blocks::<BlockQ8_1>(act).unwrap();
    mins.iter()
        .zip(act)
        .map(|(m, a)| (m * f16(a.s)).abs() as f64 * 2f64.powi(-11))
        .sum()
}

fn f16(bytes: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(bytes))
}

/// Realistic rows (quantized from Gaussian weights) against Gaussian activations: the relative
/// error of the activation path stays at the 8-bit level.
#[test]
fn vec_dot_of_quantized_weights_tracks_the_f32_dot() {
    let mut rng = Rng::new(4);
    let n = 4096;
    for ty in strata_gguf::ALL_TYPES {
        let Some(act_ty) = vec_dot_type(ty) else {
            continue;
        };
        if !strata_quant::supports_quantize(ty) {
            continue;
        }
        let (w, x) = (rng.normals(n, 0.05), rng.normals(n, 1.0));
        let mut row = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
        quantize(ty, &w, &mut row).unwrap();
        let mut act = vec![0u8; act_ty.row_bytes(n as u64).unwrap() as usize];
        quantize(act_ty, &x, &mut act).unwrap();
        let exact = dot_f32(ty, &row, &x).unwrap();
        let got = vec_dot(ty, &row, &act).unwrap();
        // Random-sign errors: |Σ w e| ~ ||w|| · rms(e) ≈ ||w|| · 0.01 · rms(x) for 8-bit x.
        let norm_w = w.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!(
            (got - exact).abs() <= 0.03 * norm_w,
            "{ty}: {got} vs {exact}"
        );
    }
}
