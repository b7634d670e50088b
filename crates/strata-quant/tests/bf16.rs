//! BF16 weights against BF16 activations (ggml's `vec_dot_type` of BF16; ggml-cpu/vec.cpp
//! `ggml_vec_dot_bf16`): every SIMD path against the scalar reference and against the exact
//! (f64) sum of the bf16 products, on lengths around the 64-element step of the AVX512-BF16
//! kernel and on inputs that reach subnormals and overflow.
//!
//! The tolerance comes from magnitudes: 1e-5 of Σ|w·a| for the f32 summation order (as
//! tests/simd.rs allows the other kernels), plus what `vdpbf16ps` may drop on top: every
//! product with a subnormal operand or a subnormal result (it reads subnormals as zero and
//! flushes subnormal results), and 2^-126 per element for a lane sum flushed to zero. The
//! other paths sum exact f32 products and are held to the first bound alone. Where the
//! CPU has AVX512-BF16 the kernel is also checked to run (its flushing shows) and to give
//! ggml's own `vdpbf16ps` results bit for bit.

mod common;

use common::{Path, Rng};
use strata_quant::{dequantize, f32_to_bf16, quantize, vec_dot_on, vec_dot_type, GgmlType, Isa};

const BF16: GgmlType = GgmlType::BF16;

fn bf16_row(x: &[f32]) -> Vec<u8> {
    x.iter()
        .flat_map(|v| f32_to_bf16(*v).to_le_bytes())
        .collect()
}

fn decode(row: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0f32; row.len() / 2];
    dequantize(BF16, row, &mut out).unwrap();
    out
}

/// Sums over the exact (f64) products of two BF16 rows.
struct Exact {
    /// Σ w·a.
    sum: f64,
    /// Σ |w·a|.
    magnitude: f64,
    /// Σ |w·a| over the products `vdpbf16ps` may drop: a subnormal operand or result.
    flushable: f64,
    /// Elements.
    n: usize,
}

impl Exact {
    fn of(w: &[u8], a: &[u8]) -> Exact {
        let (w, a) = (decode(w), decode(a));
        let subnormal = |v: f64| v != 0.0 && v.abs() < f32::MIN_POSITIVE as f64;
        let mut e = Exact {
            sum: 0.0,
            magnitude: 0.0,
            flushable: 0.0,
            n: w.len(),
        };
        for (&w, &a) in w.iter().zip(&a) {
            let p = w as f64 * a as f64;
            e.sum += p;
            e.magnitude += p.abs();
            if subnormal(w as f64) || subnormal(a as f64) || subnormal(p) {
                e.flushable += p.abs();
            }
        }
        e
    }

    /// Allowed |error| of an f32 sum of the exact products in any order (a product that is
    /// subnormal in f32 is rounded to 2^-149).
    fn sum_tolerance(&self) -> f64 {
        1e-5 * self.magnitude + self.n as f64 * 2f64.powi(-149)
    }

    /// [`Exact::sum_tolerance`] plus what `vdpbf16ps` flushes: the flushable products, and
    /// 2^-126 per element for a lane sum flushed to zero.
    fn flushing_tolerance(&self) -> f64 {
        self.sum_tolerance() + self.flushable + self.n as f64 * f32::MIN_POSITIVE as f64
    }
}

/// Activation rows of several kinds; `kind` 6 and 7 reach subnormal inputs and products.
fn activations(rng: &mut Rng, n: usize, kind: usize) -> Vec<f32> {
    match kind {
        0 => rng.normals(n, 1.0),
        1 => rng.normals(n, 1e-3),
        2 => rng.normals(n, 300.0),
        3 => vec![-1e4; n],
        4 => vec![0.0; n],
        5 => (0..n)
            .map(|i| if i % 97 == 0 { 1e3 } else { rng.normal() })
            .collect(),
        // Subnormal bf16 inputs (below 2^-126) among normal ones.
        6 => (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    1e-39 * rng.normal()
                } else {
                    rng.normal()
                }
            })
            .collect(),
        // Normal inputs whose products with small weights (1e-19) are subnormal.
        _ => rng.normals(n, 1e-20),
    }
}
const ACTIVATION_KINDS: usize = 8;

fn check(paths: &[Path], w: &[u8], x: &[f32], what: &str) {
    let mut act = vec![0u8; 2 * x.len()];
    quantize(vec_dot_type(BF16).unwrap(), x, &mut act).unwrap();
    let exact = Exact::of(w, &act);
    if exact.magnitude >= f32::MAX as f64 {
        // Some order of the f32 sum may overflow where another does not: nothing to compare.
        return;
    }
    let want = vec_dot_on(Isa::Scalar, BF16, w, &act).unwrap();
    assert!(
        (want as f64 - exact.sum).abs() <= exact.sum_tolerance(),
        "scalar, {what}: {want} vs exact {}",
        exact.sum
    );
    for &path in paths {
        // Only `vdpbf16ps` flushes subnormal products; every other path must not.
        let tol = if matches!(path, Path::Isa(Isa::Avx512)) && has_avx512_bf16() {
            exact.flushing_tolerance()
        } else {
            exact.sum_tolerance()
        };
        let got = path.vec_dot(BF16, w, &act).unwrap();
        assert!(
            (got as f64 - want as f64).abs() <= tol,
            "{path}, {what}, {} elements: {got} vs scalar {want} (allowed {tol:e})",
            x.len()
        );
    }
}

#[test]
fn bf16_vec_dot_matches_scalar_on_every_path_and_length() {
    let paths = common::available_paths(false);
    let mut rng = Rng::new(31);
    let lengths = [
        0, 1, 2, 7, 31, 32, 33, 63, 64, 65, 95, 96, 127, 128, 129, 1000, 4096, 14336,
    ];
    for n in lengths {
        for kind in 0..ACTIVATION_KINDS {
            let w = bf16_row(&rng.normals(n, 2.0));
            let x = activations(&mut rng, n, kind);
            check(&paths, &w, &x, &format!("activations {kind}"));
        }
    }
}

#[test]
fn bf16_vec_dot_matches_scalar_on_edge_weights() {
    let paths = common::available_paths(false);
    let mut rng = Rng::new(32);
    // The largest finite bf16 (products overflow: skipped unless the activations are small),
    // the smallest normal, the smallest subnormal, a small weight, ±0, ±1.
    let edges = [
        3.3895314e38,
        1.1754944e-38,
        9.2e-41,
        1e-19,
        0.0,
        -0.0,
        1.0,
        -1.0,
    ];
    for n in [64, 100, 4096] {
        for edge in edges {
            let w: Vec<f32> = (0..n)
                .map(|i| if i % 4 == 0 { edge } else { rng.normal() })
                .collect();
            let w = bf16_row(&w);
            for kind in 0..ACTIVATION_KINDS {
                let x = activations(&mut rng, n, kind);
                check(
                    &paths,
                    &w,
                    &x,
                    &format!("weights {edge:e}, activations {kind}"),
                );
            }
        }
    }
}

/// Whether the AVX-512 path runs the AVX512-BF16 kernel on this CPU.
fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    let has = Isa::Avx512.is_available() && std::arch::is_x86_feature_detected!("avx512bf16");
    #[cfg(not(target_arch = "x86_64"))]
    let has = false;
    if !has {
        eprintln!("skipping: this CPU lacks avx512 or avx512bf16");
    }
    has
}

/// Where the CPU has AVX512-BF16, the AVX-512 path runs `vdpbf16ps`, whose reading of subnormal
/// inputs as zero shows in the result (the other paths keep those products).
#[test]
fn avx512_bf16_kernel_runs_where_the_cpu_has_it() {
    if !has_avx512_bf16() {
        return;
    }
    // 2^-130 (subnormal) × 2^100 = 2^-30: a normal product of a subnormal input.
    let w = bf16_row(&[2f32.powi(-130); 64]);
    let a = bf16_row(&[2f32.powi(100); 64]);
    let scalar = vec_dot_on(Isa::Scalar, BF16, &w, &a).unwrap();
    assert_eq!(scalar, 64.0 * 2f32.powi(-30));
    assert_eq!(vec_dot_on(Isa::Avx2, BF16, &w, &a).unwrap(), scalar);
    assert_eq!(vec_dot_on(Isa::Avx512, BF16, &w, &a).unwrap(), 0.0);
}

/// The AVX512-BF16 kernel sums in `ggml_vec_dot_bf16`'s order, so where ggml ran `vdpbf16ps` for
/// the committed vectors (tests/data/quant_vectors.bin, scripts/gen_quant_vectors.py) it gives
/// ggml's bits, tail past the last 64 elements included.
#[test]
fn avx512_bf16_kernel_gives_ggml_bits() {
    let (header, records) = common::load_vectors();
    if header["ggml_avx512_bf16"] != true || !has_avx512_bf16() {
        eprintln!("skipping: the vectors' ggml or this CPU ran no vdpbf16ps");
        return;
    }
    let records: Vec<_> = records
        .iter()
        .filter(|r| r.kind == common::Kind::VecDot && r.ty == BF16)
        .collect();
    assert!(records.iter().any(|r| r.elements % 64 != 0));
    for r in records {
        let want = common::f32s(&r.c)[0];
        let got = vec_dot_on(Isa::Avx512, BF16, &r.a, &r.b).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{} elements: {got} vs ggml {want}",
            r.elements
        );
    }
}
