//! Kernel throughput per instruction-set path: `vec_dot` of one weight row against a quantized
//! (for BF16: bf16) activation row, activation quantization and the float `dot_f32`, for rows of
//! 4096 and 14336 elements (a 0.5B model's hidden size scale and a 7B FFN's). Run with
//! `cargo bench -p strata-quant --bench vec_dot`; filter with e.g. `-- Q4_K/4096`.
//!
//! Every path the CPU has is measured, under ids like `vec_dot/Q4_K/avx2/4096`: on an aarch64
//! machine with dotprod (Graviton2+, Apple M1+, Raspberry Pi 5) that is `scalar` and `neon`, so
//! `cargo bench -p strata-quant --bench vec_dot -- /neon/` there times the NEON kernels (qemu's
//! emulated timings mean nothing).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strata_quant::{dot_f32_on, quantize, quantize_on, vec_dot_on, vec_dot_type, GgmlType, Isa};

const LENGTHS: [usize; 2] = [4096, 14336];

/// Deterministic pseudo-random values in about [-1, 1].
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A weight row of `ty`: quantized where this crate can, else random bytes with sane scales.
fn weight_row(ty: GgmlType, n: usize) -> Vec<u8> {
    let mut row = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
    if strata_quant::supports_quantize(ty) {
        quantize(ty, &values(n, 1), &mut row).unwrap();
    } else {
        for (i, b) in row.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2654435761).rotate_right(13) as u8;
        }
        for block in row.chunks_exact_mut(ty.type_size()) {
            block[..2].copy_from_slice(&strata_quant::f32_to_f16(0.01).to_le_bytes());
        }
    }
    row
}

fn paths() -> Vec<Isa> {
    Isa::ALL
        .into_iter()
        .filter(|isa| isa.is_available())
        .collect()
}

fn bench_vec_dot(c: &mut Criterion) {
    use GgmlType as T;
    let types = [
        T::Q4_0,
        T::Q4_1,
        T::Q5_0,
        T::Q5_1,
        T::Q8_0,
        T::IQ4_NL,
        T::Q4_K,
        T::Q5_K,
        T::Q6_K,
        T::IQ4_XS,
        T::IQ2_XXS,
        T::IQ2_XS,
        T::IQ2_S,
        T::IQ3_XXS,
        T::IQ3_S,
        T::IQ1_S,
        T::IQ1_M,
        T::Q2_K,
        T::Q3_K,
        T::BF16,
    ];
    for ty in types {
        let act_ty = vec_dot_type(ty).unwrap();
        let mut group = c.benchmark_group(format!("vec_dot/{ty}"));
        for n in LENGTHS {
            let row = weight_row(ty, n);
            let mut act = vec![0u8; act_ty.row_bytes(n as u64).unwrap() as usize];
            quantize(act_ty, &values(n, 2), &mut act).unwrap();
            group.throughput(Throughput::Elements(n as u64));
            for isa in paths() {
                group.bench_with_input(BenchmarkId::new(isa.name(), n), &n, |b, _| {
                    b.iter(|| vec_dot_on(isa, ty, black_box(&row), black_box(&act)).unwrap())
                });
            }
        }
        group.finish();
    }
}

fn bench_quantize(c: &mut Criterion) {
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let mut group = c.benchmark_group(format!("quantize/{ty}"));
        for n in LENGTHS {
            let x = values(n, 3);
            let mut out = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
            group.throughput(Throughput::Elements(n as u64));
            for isa in paths() {
                group.bench_with_input(BenchmarkId::new(isa.name(), n), &n, |b, _| {
                    b.iter(|| quantize_on(isa, ty, black_box(&x), &mut out).unwrap())
                });
            }
        }
        group.finish();
    }
}

fn bench_dot_f32(c: &mut Criterion) {
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let mut group = c.benchmark_group(format!("dot_f32/{ty}"));
        for n in LENGTHS {
            let x = values(n, 4);
            let mut row = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
            quantize(ty, &values(n, 5), &mut row).unwrap();
            group.throughput(Throughput::Elements(n as u64));
            for isa in paths() {
                group.bench_with_input(BenchmarkId::new(isa.name(), n), &n, |b, _| {
                    b.iter(|| dot_f32_on(isa, ty, black_box(&row), black_box(&x)).unwrap())
                });
            }
        }
        group.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_vec_dot, bench_quantize, bench_dot_f32
}
criterion_main!(benches);
