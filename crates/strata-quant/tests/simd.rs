//! Every SIMD path against the scalar reference, run explicitly per instruction set (paths the
//! CPU lacks are skipped and named): `vec_dot` within a tight relative tolerance (only the f32
//! summation order may differ; the integer block sums are exact), activation quantizers
//! bit-identical, and the F32/F16/BF16 `dot_f32`. Inputs: random rows, all-zero and
//! max-magnitude quants, extreme f16 scales, rows of one block up to 14336 elements, and
//! rows whose bytes step through every value (every grid point and sign pattern of the i-quants).
//! The AVX-VNNI path runs here as its EVEX twin (`strata_quant::testing::AvxVnniTwin`) on CPUs
//! with AVX-512 VNNI but not AVX-VNNI.

mod common;

use common::{Path, Rng};
use strata_quant::testing::AvxVnniTwin;
use strata_quant::{
    dequantize, dot_f32_on, f32_to_bf16, f32_to_f16, quantize, quantize_on, vec_dot, vec_dot_on,
    vec_dot_type, GgmlType, Isa, QuantError,
};

/// The SIMD paths this CPU has; the others are reported on stderr.
fn simd_paths() -> Vec<Path> {
    common::available_paths(false)
}

/// Byte offsets of the f16 scale fields in a block of `ty`: (scales, minimums).
fn f16_fields(ty: GgmlType) -> (&'static [usize], &'static [usize]) {
    use GgmlType as T;
    match ty {
        T::Q4_1 | T::Q5_1 | T::Q4_K | T::Q5_K => (&[0], &[2]),
        T::Q2_K => (&[80], &[82]),
        T::Q3_K => (&[108], &[]),
        T::Q6_K => (&[208], &[]),
        T::IQ1_M => (&[], &[]),
        _ => (&[0], &[]),
    }
}

fn f16_bytes(x: f32) -> [u8; 2] {
    f32_to_f16(x).to_le_bytes()
}

/// How the weight row's quant bytes are filled.
#[derive(Clone, Copy, Debug)]
enum Fill {
    Random,
    Byte(u8),
    /// Byte `i` of the row is `i · stride` (mod 256): every grid index and sign pattern occurs.
    Step(u8),
}

/// How its f16 scale fields are set.
#[derive(Clone, Copy, Debug)]
enum Scales {
    /// Random, spread over 2^-10 .. 2^2, either sign.
    Random,
    /// Every scale field this value.
    All(f32),
}

fn weight_row(rng: &mut Rng, ty: GgmlType, blocks: usize, fill: Fill, scales: Scales) -> Vec<u8> {
    let size = ty.type_size();
    let mut row: Vec<u8> = (0..blocks * size)
        .map(|i| match fill {
            Fill::Random => rng.next_u64() as u8,
            Fill::Byte(b) => b,
            Fill::Step(stride) => (i as u8).wrapping_mul(stride),
        })
        .collect();
    let (ds, mins) = f16_fields(ty);
    for block in row.chunks_exact_mut(size) {
        for &at in ds.iter().chain(mins) {
            let v = match scales {
                Scales::Random => {
                    let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
                    sign * 2f32.powf(rng.uniform() as f32 * 12.0 - 10.0)
                }
                Scales::All(v) => v,
            };
            block[at..at + 2].copy_from_slice(&f16_bytes(v));
        }
    }
    row
}

/// The same row with the scale (`keep_min == false`) or minimum fields zeroed, dequantized:
/// the two parts of an affine weight, so the tolerance covers both partial sums.
fn weight_parts(ty: GgmlType, row: &[u8], n: usize) -> (Vec<f32>, Vec<f32>) {
    let (ds, mins) = f16_fields(ty);
    let part = |zero: &[usize]| {
        let mut r = row.to_vec();
        for block in r.chunks_exact_mut(ty.type_size()) {
            for &at in zero {
                block[at..at + 2].fill(0);
            }
        }
        let mut w = vec![0.0f32; n];
        dequantize(ty, &r, &mut w).unwrap();
        w
    };
    (
        part(mins),
        if mins.is_empty() {
            vec![0.0; n]
        } else {
            part(ds)
        },
    )
}

fn activations(rng: &mut Rng, n: usize, kind: usize) -> Vec<f32> {
    match kind {
        0 => rng.normals(n, 1.0),
        1 => rng.normals(n, 1e-3),
        2 => rng.normals(n, 300.0),
        // All quants ±127: the largest products.
        3 => (0..n)
            .map(|i| if i % 3 == 0 { -5.0 } else { 5.0 })
            .collect(),
        4 => vec![-1e4; n],
        5 => vec![0.0; n],
        // Outliers: most quants round to 0 or ±1.
        _ => (0..n)
            .map(|i| if i % 97 == 0 { 1e3 } else { rng.normal() })
            .collect(),
    }
}
const ACTIVATION_KINDS: usize = 7;

/// Checks every SIMD path's `vec_dot` against the scalar one for this row.
fn check_vec_dot(paths: &[Path], ty: GgmlType, row: &[u8], x: &[f32], what: &str) {
    let act_ty = vec_dot_type(ty).unwrap();
    let mut act = vec![0u8; act_ty.row_bytes(x.len() as u64).unwrap() as usize];
    quantize(act_ty, x, &mut act).unwrap();
    let want = vec_dot_on(Isa::Scalar, ty, row, &act).unwrap();
    let mut xq = vec![0.0f32; x.len()];
    dequantize(act_ty, &act, &mut xq).unwrap();
    let (scaled, mins) = weight_parts(ty, row, x.len());
    let magnitude: f64 = scaled
        .iter()
        .zip(&mins)
        .zip(&xq)
        .map(|((s, m), a)| (s.abs() as f64 + m.abs() as f64) * a.abs() as f64)
        .sum();
    for &path in paths {
        let got = path.vec_dot(ty, row, &act).unwrap();
        if !want.is_finite() {
            // An f16 overflow (Q8_1's `s` of a huge row, a 65504 scale) or NaN: the same value.
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{ty} on {path}, {what}: {got}, scalar {want}"
            );
            continue;
        }
        let err = (got as f64 - want as f64).abs();
        assert!(
            err <= 1e-5 * magnitude + 1e-30,
            "{ty} on {path}, {what}, {} elements: {got} vs scalar {want} (|Σ| {magnitude:e})",
            x.len()
        );
    }
}

/// The block types with an activation kernel. BF16 (its own activation type, no scale fields
/// for `weight_row` to set) has its own tests in tests/bf16.rs.
fn vec_dot_types() -> impl Iterator<Item = GgmlType> {
    strata_gguf::ALL_TYPES
        .into_iter()
        .filter(|&ty| vec_dot_type(ty).is_some_and(|act| act != ty))
}

#[test]
fn vec_dot_matches_scalar_on_random_rows_of_every_length() {
    let paths = simd_paths();
    let mut rng = Rng::new(11);
    for ty in vec_dot_types() {
        let bs = ty.block_size();
        for n in [bs, 2 * bs, 3 * bs, 4096, 14336] {
            for kind in 0..ACTIVATION_KINDS {
                let row = weight_row(&mut rng, ty, n / bs, Fill::Random, Scales::Random);
                let x = activations(&mut rng, n, kind);
                check_vec_dot(
                    &paths,
                    ty,
                    &row,
                    &x,
                    &format!("random row, activations {kind}"),
                );
            }
        }
    }
}

/// The x86 paths (AVX2, AVX-VNNI, AVX-512) run the symmetric 32-element formats in the scalar
/// reference's float order (one f32 sum, block after block: `gemm/x86/block_order.rs` and
/// `block_order_avx2.rs`), and the paths with VNNI IQ3_XXS (`gemm/x86/iq3_xxs_lanes.rs`), so
/// there their results are the scalar ones bit for bit, on random rows and on every edge fill
/// and scale.
#[test]
#[cfg(target_arch = "x86_64")]
fn x86_block_order_formats_equal_scalar_bit_for_bit() {
    let paths: Vec<Path> = simd_paths()
        .into_iter()
        .filter(|p| !matches!(p, Path::Isa(Isa::Neon | Isa::Scalar)))
        .collect();
    if paths.is_empty() {
        // Only an x86-64 CPU older than AVX2 (Haswell, Zen 1) has none.
        eprintln!("skipping: this CPU lacks avx2");
        return;
    }
    use GgmlType as T;
    let mut rng = Rng::new(17);
    let fills = [
        Fill::Random,
        Fill::Byte(0),
        Fill::Byte(0xff),
        Fill::Byte(0x80),
        Fill::Byte(0x88),
    ];
    let scales = [
        Scales::Random,
        Scales::All(65504.0),
        Scales::All(5.9604645e-8),
        Scales::All(-1.0),
    ];
    // IQ3_XXS in block order: the paths with VNNI (plain AVX2 keeps its lane order).
    let vnni: Vec<Path> = paths
        .iter()
        .copied()
        .filter(|p| !matches!(p, Path::Isa(Isa::Avx2)))
        .collect();
    let cases = [
        (T::Q4_0, &paths),
        (T::Q5_0, &paths),
        (T::Q8_0, &paths),
        (T::IQ4_NL, &paths),
        (T::IQ3_XXS, &vnni),
    ];
    for (ty, on) in cases {
        let act_ty = vec_dot_type(ty).unwrap();
        let bs = ty.block_size();
        for blocks in [1, 2, 3, 7, 128, 151] {
            for (i, (&fill, &scale)) in fills.iter().zip(scales.iter().cycle()).enumerate() {
                let row = weight_row(&mut rng, ty, blocks, fill, scale);
                let x = activations(&mut rng, blocks * bs, i % ACTIVATION_KINDS);
                let mut act = vec![0u8; blocks * act_ty.type_size()];
                quantize(act_ty, &x, &mut act).unwrap();
                let want = vec_dot_on(Isa::Scalar, ty, &row, &act).unwrap();
                for &path in on {
                    let got = path.vec_dot(ty, &row, &act).unwrap();
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty}, {blocks} blocks, {fill:?}, {scale:?}: {path:?} {got}, scalar {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn vec_dot_matches_scalar_on_edge_values() {
    let paths = simd_paths();
    let mut rng = Rng::new(12);
    let fills = [
        Fill::Byte(0),
        Fill::Byte(0xff),
        Fill::Byte(0x80),
        Fill::Byte(0x7f),
        Fill::Byte(0x88),
    ];
    // f16 max, min normal, a subnormal, zero, negative.
    let scales = [65504.0, 6.1035156e-5, 5.9604645e-8, 0.0, -1.0, 1.0];
    for ty in vec_dot_types() {
        let bs = ty.block_size();
        for n in [bs, 8 * bs] {
            for fill in fills {
                for s in scales {
                    for kind in 0..ACTIVATION_KINDS {
                        let row = weight_row(&mut rng, ty, n / bs, fill, Scales::All(s));
                        let x = activations(&mut rng, n, kind);
                        let what = format!("{fill:?}, scales {s}, activations {kind}");
                        check_vec_dot(&paths, ty, &row, &x, &what);
                    }
                }
            }
        }
    }
}

/// The kernels that fetch lattice points by index (grid tables, sign tables) and the low-bit
/// k-quants, on rows that step through every byte value with several strides, so every grid
/// point, sign pattern, delta sign and scale reaches each path.
#[test]
fn lattice_vec_dot_matches_scalar_on_every_index() {
    use GgmlType as T;
    let paths = simd_paths();
    let mut rng = Rng::new(17);
    let types = [
        T::IQ2_XXS,
        T::IQ2_XS,
        T::IQ2_S,
        T::IQ3_XXS,
        T::IQ3_S,
        T::IQ1_S,
        T::IQ1_M,
        T::Q2_K,
        T::Q3_K,
    ];
    for ty in types {
        let blocks = 64;
        for stride in [1u8, 3, 37, 101, 255] {
            for kind in [0, 3, 6] {
                let row = weight_row(&mut rng, ty, blocks, Fill::Step(stride), Scales::Random);
                let x = activations(&mut rng, blocks * ty.block_size(), kind);
                let what = format!("stride {stride}, activations {kind}");
                check_vec_dot(&paths, ty, &row, &x, &what);
            }
        }
    }
}

#[test]
fn vec_dot_of_quantized_weights_matches_scalar() {
    let paths = simd_paths();
    let mut rng = Rng::new(13);
    for ty in vec_dot_types().filter(|&ty| strata_quant::supports_quantize(ty)) {
        for n in [256, 4096, 14336] {
            let w = rng.normals(n, 0.05);
            let mut row = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
            quantize(ty, &w, &mut row).unwrap();
            let x = rng.normals(n, 1.0);
            check_vec_dot(&paths, ty, &row, &x, "quantized Gaussian row");
        }
    }
}

/// Activation rows for the quantizer tests: random scales, exact ties, an equal-magnitude
/// maximum of both signs, zeros, subnormals, huge values, Inf and NaN.
fn quantizer_inputs(rng: &mut Rng, n: usize) -> Vec<(String, Vec<f32>)> {
    let mut cases = vec![
        ("normal".to_string(), rng.normals(n, 1.0)),
        ("tiny".to_string(), rng.normals(n, 1e-30)),
        ("huge".to_string(), rng.normals(n, 1e30)),
        ("zeros".to_string(), vec![0.0; n]),
        ("negative zeros".to_string(), vec![-0.0; n]),
        (
            "subnormal max".to_string(),
            (0..n).map(|i| (i % 5) as f32 * 1e-41).collect(),
        ),
    ];
    // amax 127 makes d = 1 (Q8_0) and iscale = ±1 (Q8_K), so x.5 values are exact ties.
    let ties = (0..n)
        .map(|i| match i % 32 {
            0 => 127.0,
            k => (k as f32 - 16.0) + 0.5,
        })
        .collect();
    cases.push(("ties".to_string(), ties));
    let neg_ties = (0..n)
        .map(|i| {
            if i % 32 == 0 {
                -127.0
            } else {
                (i % 7) as f32 - 3.5
            }
        })
        .collect();
    cases.push(("negative ties".to_string(), neg_ties));
    let both_signs = (0..n)
        .map(|i| if i % 2 == 0 { 3.0 } else { -3.0 })
        .collect();
    cases.push(("±max".to_string(), both_signs));
    for (name, bad) in [
        ("inf", f32::INFINITY),
        ("-inf", f32::NEG_INFINITY),
        ("nan", f32::NAN),
    ] {
        let mut x = rng.normals(n, 1.0);
        x[n / 2] = bad;
        cases.push((name.to_string(), x));
    }
    cases
}

#[test]
fn activation_quantizers_are_bit_identical_on_every_path() {
    let paths = simd_paths();
    let mut rng = Rng::new(14);
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let bs = ty.block_size();
        for n in [bs, 3 * bs, 4096] {
            for (name, x) in quantizer_inputs(&mut rng, n) {
                let mut want = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
                quantize_on(Isa::Scalar, ty, &x, &mut want).unwrap();
                for &path in &paths {
                    let mut got = vec![0xa5u8; want.len()];
                    path.quantize(ty, &x, &mut got).unwrap();
                    assert!(
                        got == want,
                        "{ty} on {path}, {name}, {n} elements: bytes differ"
                    );
                }
            }
        }
    }
}

#[test]
fn float_dot_matches_scalar_on_every_path() {
    let paths = simd_paths();
    let mut rng = Rng::new(15);
    let lengths = [
        0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1000, 4096, 14336,
    ];
    for n in lengths {
        let (w, x) = (rng.normals(n, 2.0), rng.normals(n, 1.0));
        let mut extremes = w.clone();
        for (i, v) in extremes.iter_mut().enumerate() {
            match i % 4 {
                0 => *v = 65504.0,
                1 => *v = -6e-8,
                _ => {}
            }
        }
        let rows: [(GgmlType, Vec<u8>); 4] = [
            (
                GgmlType::F32,
                w.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            (
                GgmlType::F16,
                w.iter().flat_map(|&v| f16_bytes(v)).collect(),
            ),
            (
                GgmlType::F16,
                extremes.iter().flat_map(|&v| f16_bytes(v)).collect(),
            ),
            (
                GgmlType::BF16,
                w.iter()
                    .flat_map(|&v| f32_to_bf16(v).to_le_bytes())
                    .collect(),
            ),
        ];
        for (ty, row) in rows {
            let want = dot_f32_on(Isa::Scalar, ty, &row, &x).unwrap();
            let mut deq = vec![0.0f32; n];
            dequantize(ty, &row, &mut deq).unwrap();
            let magnitude: f64 = deq.iter().zip(&x).map(|(a, b)| (a * b).abs() as f64).sum();
            for &path in &paths {
                let got = path.dot_f32(ty, &row, &x).unwrap();
                assert!(
                    (got as f64 - want as f64).abs() <= 1e-5 * magnitude,
                    "{ty} on {path}, {n} elements: {got} vs scalar {want}"
                );
            }
        }
    }
}

#[test]
fn default_entry_points_use_the_best_available_path() {
    let best = Isa::best();
    assert!(best.is_available());
    let mut rng = Rng::new(16);
    let ty = GgmlType::Q4_K;
    let row = weight_row(&mut rng, ty, 16, Fill::Random, Scales::Random);
    let x = rng.normals(4096, 1.0);
    let mut act = vec![0u8; GgmlType::Q8_K.row_bytes(4096).unwrap() as usize];
    quantize(GgmlType::Q8_K, &x, &mut act).unwrap();
    let got = vec_dot(ty, &row, &act).unwrap();
    assert_eq!(
        got.to_bits(),
        vec_dot_on(best, ty, &row, &act).unwrap().to_bits()
    );
}

#[test]
fn unavailable_paths_are_refused_not_run() {
    for isa in Isa::ALL.into_iter().filter(|isa| !isa.is_available()) {
        let act = vec![0u8; 34];
        let err = vec_dot_on(isa, GgmlType::Q8_0, &act, &act).unwrap_err();
        assert_eq!(err, QuantError::IsaUnavailable { isa });
    }
    assert!(Isa::Scalar.is_available());
}

/// Where a CPU has both AVX-VNNI and AVX-512 VNNI (Zen 5, Sapphire Rapids), the twin that the
/// other tests stand in for the AVX-VNNI path with must give that path's bits: the twin's
/// premise, checked on random and edge rows, the quantizers and the float dots.
#[test]
fn avxvnni_twin_is_bit_identical_to_avxvnni() {
    let (Some(twin), true) = (AvxVnniTwin::new(), Isa::AvxVnni.is_available()) else {
        eprintln!("skipping: this CPU lacks avxvnni or {}", AvxVnniTwin::NAME);
        return;
    };
    let (real, twin) = (Path::Isa(Isa::AvxVnni), Path::AvxVnniTwin(twin));
    let mut rng = Rng::new(18);
    for ty in vec_dot_types() {
        let bs = ty.block_size();
        let act_ty = vec_dot_type(ty).unwrap();
        let fills = [
            Fill::Random,
            Fill::Byte(0xff),
            Fill::Byte(0x80),
            Fill::Step(37),
        ];
        for (fill, kind) in fills
            .into_iter()
            .zip(0..)
            .flat_map(|(f, k)| [(f, k), (f, k + 3)])
        {
            let n = 4096;
            let row = weight_row(&mut rng, ty, n / bs, fill, Scales::Random);
            let x = activations(&mut rng, n, kind);
            let mut act = vec![0u8; act_ty.row_bytes(n as u64).unwrap() as usize];
            quantize(act_ty, &x, &mut act).unwrap();
            let want = real.vec_dot(ty, &row, &act).unwrap();
            let got = twin.vec_dot(ty, &row, &act).unwrap();
            let what = format!("{ty}, {fill:?}, activations {kind}");
            assert_eq!(got.to_bits(), want.to_bits(), "{what}: {got} vs {want}");
        }
    }
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        for (name, x) in quantizer_inputs(&mut rng, 4096) {
            let mut want = vec![0u8; ty.row_bytes(4096).unwrap() as usize];
            let mut got = vec![0xa5u8; want.len()];
            real.quantize(ty, &x, &mut want).unwrap();
            twin.quantize(ty, &x, &mut got).unwrap();
            assert!(got == want, "{ty}, {name}: bytes differ");
        }
    }
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let n = 1000;
        let mut row = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
        quantize(ty, &rng.normals(n, 2.0), &mut row).unwrap();
        let x = rng.normals(n, 1.0);
        let want = real.dot_f32(ty, &row, &x).unwrap();
        let got = twin.dot_f32(ty, &row, &x).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "{ty}");
    }
}
