//! Bit-exact agreement with the Python `gguf` package (gguf-py) and ggml's C reference, through
//! the vectors committed in tests/data/quant_vectors.bin (scripts/gen_quant_vectors.py).

mod common;

use common::{f32s, load_vectors, Kind, Record};
use strata_quant::{dequantize, quantize, vec_dot, vec_dot_type, GgmlType};

fn records(kind: Kind) -> Vec<Record> {
    let (header, records) = load_vectors();
    assert_eq!(header["generator"], "scripts/gen_quant_vectors.py");
    assert!(header["gguf_version"].is_string() && header["numpy_version"].is_string());
    records.into_iter().filter(|r| r.kind == kind).collect()
}

/// The first differing element, reported with its block so a layout slip is easy to locate.
fn first_mismatch(ty: GgmlType, got: &[u32], want: &[u32]) -> Option<String> {
    let i = got.iter().zip(want).position(|(g, w)| g != w)?;
    Some(format!(
        "{ty}: element {i} (block {}, offset {}): got {:#010x} ({}), want {:#010x} ({})",
        i / ty.block_size(),
        i % ty.block_size(),
        got[i],
        f32::from_bits(got[i]),
        want[i],
        f32::from_bits(want[i])
    ))
}

#[test]
fn dequantize_is_bit_identical_to_gguf_py_and_ggml() {
    let records = records(Kind::Dequantize);
    let mut seen = Vec::new();
    for r in &records {
        let mut out = vec![0.0f32; r.elements];
        dequantize(r.ty, &r.a, &mut out).unwrap_or_else(|e| panic!("{}: {e}", r.ty));
        let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = f32s(&r.b).iter().map(|v| v.to_bits()).collect();
        assert_eq!(got.len(), want.len());
        if let Some(msg) = first_mismatch(r.ty, &got, &want) {
            panic!("{} vectors: {msg}", r.source);
        }
        seen.push(r.ty);
    }
    // Every type gguf-py dequantizes, plus Q8_K from ggml.
    use GgmlType::*;
    for ty in [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS,
        IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS,
    ] {
        assert!(seen.contains(&ty), "no dequantize vectors for {ty}");
    }
}

#[test]
fn quantize_is_bit_identical_to_gguf_py_and_ggml() {
    let records = records(Kind::Quantize);
    let mut seen = Vec::new();
    for r in &records {
        let x = f32s(&r.a);
        let mut out = vec![0u8; r.b.len()];
        quantize(r.ty, &x, &mut out).unwrap_or_else(|e| panic!("{}: {e}", r.ty));
        let bs = r.ty.type_size();
        for (k, (got, want)) in out.chunks(bs).zip(r.b.chunks(bs)).enumerate() {
            assert_eq!(
                got,
                want,
                "{} {} block {k}: input {:?}",
                r.source,
                r.ty,
                &x[k * r.ty.block_size()..(k + 1) * r.ty.block_size()]
            );
        }
        seen.push(r.ty);
    }
    use GgmlType::*;
    for ty in [
        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, BF16, Q4_K, Q5_K, Q6_K, Q8_K, Q8_1,
    ] {
        assert!(seen.contains(&ty), "no quantize vectors for {ty}");
    }
}

/// ggml's kernels (the SIMD ones this CPU dispatches to) sum in another order, with FMA, so the
/// comparison allows 1e-6 of Σ|w_i a_i| (the scale of the rounding errors of either sum).
#[test]
fn vec_dot_matches_ggml_kernels() {
    let records = records(Kind::VecDot);
    let mut seen = Vec::new();
    for r in &records {
        let want = f32s(&r.c)[0];
        let got = vec_dot(r.ty, &r.a, &r.b).unwrap_or_else(|e| panic!("{}: {e}", r.ty));
        let act_ty = vec_dot_type(r.ty).unwrap();
        let (mut w, mut a) = (vec![0.0f32; r.elements], vec![0.0f32; r.elements]);
        dequantize(r.ty, &r.a, &mut w).unwrap();
        dequantize(act_ty, &r.b, &mut a).unwrap();
        let magnitude: f64 = w
            .iter()
            .zip(&a)
            .map(|(w, a)| (*w as f64 * *a as f64).abs())
            .sum();
        let tol = 1e-6 * magnitude + 1e-30;
        assert!(
            ((got - want) as f64).abs() <= tol,
            "{}: ours {got}, ggml {want}, |diff| {} > {tol}",
            r.ty,
            (got - want).abs()
        );
        seen.push(r.ty);
    }
    for ty in strata_gguf::ALL_TYPES {
        if vec_dot_type(ty).is_some() {
            assert!(seen.contains(&ty), "no vec_dot vectors for {ty}");
        }
    }
}
