//! Prefill-shaped matrix products: 512 weight rows × 64 tokens at the column counts of SmolLM2
//! (576, 1536) and of 7B-class models (4096), per weight type: tiled `gemm` against the loop
//! over `vec_dot` it replaces, on the best path (and on AVX2 at 4096 columns, and for Q4_1 at
//! 576, when the best path is wider). Run with `cargo bench -p strata-quant --bench gemm`;
//! filter with e.g. `-- Q4_K`.
//! On aarch64 the best path is `neon`, which has no tiles yet: its `gemm` is the `vec_dot` loop.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strata_quant::testing::AvxVnniTwin;
use strata_quant::{dot_f32, gemm_f32, gemm_on, quantize, vec_dot_on, vec_dot_type, GgmlType, Isa};

const ROWS: usize = 512;
const TOKENS: usize = 64;
const COLUMNS: [usize; 3] = [576, 1536, 4096];

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

/// `count` rows of `n` elements quantized to `ty`, back to back.
fn rows(ty: GgmlType, count: usize, n: usize, seed: u64) -> Vec<u8> {
    let row_bytes = ty.row_bytes(n as u64).unwrap() as usize;
    let x = values(count * n, seed);
    let mut out = vec![0u8; count * row_bytes];
    for (src, dst) in x.chunks_exact(n).zip(out.chunks_exact_mut(row_bytes)) {
        quantize(ty, src, dst).unwrap();
    }
    out
}

/// `count` weight rows of `n` elements of `ty`: quantized values, or for the types without a
/// quantizer here (IQ4_XS and the lattice i-quants) random bytes with sane block scales.
fn weights(ty: GgmlType, count: usize, n: usize) -> Vec<u8> {
    if strata_quant::supports_quantize(ty) {
        return rows(ty, count, n, 1);
    }
    let len = count * ty.row_bytes(n as u64).unwrap() as usize;
    let mut w: Vec<u8> = (0..len as u32)
        .map(|i| i.wrapping_mul(2654435761).rotate_right(13) as u8)
        .collect();
    for block in w.chunks_exact_mut(ty.type_size()) {
        block[..2].copy_from_slice(&strata_quant::f32_to_f16(0.01).to_le_bytes());
    }
    w
}

/// The loop `gemm` replaces.
fn vec_dot_loop(isa: Isa, ty: GgmlType, w: &[u8], acts: &[u8], out: &mut [f32]) {
    let (wrb, arb) = (w.len() / ROWS, acts.len() / TOKENS);
    for t in 0..TOKENS {
        for r in 0..ROWS {
            out[t * ROWS + r] =
                vec_dot_on(isa, ty, &w[r * wrb..][..wrb], &acts[t * arb..][..arb]).unwrap();
        }
    }
}

fn bench_gemm(c: &mut Criterion) {
    use GgmlType as T;
    let types = [
        T::Q4_1,
        T::Q4_K,
        T::Q6_K,
        T::Q8_0,
        T::Q4_0,
        T::Q5_0,
        T::IQ4_NL,
        T::Q5_K,
        T::IQ4_XS,
        T::IQ3_XXS,
        T::IQ3_S,
        T::IQ2_S,
    ];
    let best = Isa::best();
    for ty in types {
        let mut group = c.benchmark_group(format!("gemm/{ty}"));
        for n in COLUMNS {
            if n % ty.block_size() != 0 {
                continue;
            }
            let w = weights(ty, ROWS, n);
            let acts = rows(vec_dot_type(ty).unwrap(), TOKENS, n, 2);
            let mut out = vec![0.0f32; ROWS * TOKENS];
            group.throughput(Throughput::Elements((ROWS * TOKENS * n) as u64));
            let mut isas = vec![best];
            // AVX2 at 4096 columns, and at 576 for the formats whose steps take several
            // blocks (Q4_1: 18 blocks, four steps of four and a part step of two).
            let avx2_too = n == 4096 || (n == 576 && ty == T::Q4_1);
            if avx2_too && best != Isa::Avx2 && Isa::Avx2.is_available() {
                isas.push(Isa::Avx2);
            }
            for isa in isas {
                group.bench_function(BenchmarkId::new(format!("gemm/{isa}"), n), |b| {
                    b.iter(|| {
                        gemm_on(isa, ty, black_box(&w), ROWS, &acts, TOKENS, &mut out, ROWS)
                            .unwrap()
                    })
                });
                group.bench_function(BenchmarkId::new(format!("vec_dot_loop/{isa}"), n), |b| {
                    b.iter(|| vec_dot_loop(isa, ty, black_box(&w), &acts, &mut out))
                });
            }
        }
        group.finish();
    }
}

/// Rows whose decoded form outgrows L1 (a tile of four Q6_K rows over 8192 columns: 70 KiB):
/// 128 rows × 64 tokens (a prefill tile) over 8192 and 14336 columns, the down projections of
/// 7–8B dense models, in the K-quant formats of Q4_K_M files. Filter with `-- wide`.
fn bench_wide(c: &mut Criterion) {
    use GgmlType as T;
    for ty in [T::Q4_K, T::Q6_K, T::Q5_K] {
        let mut group = c.benchmark_group(format!("wide/{ty}"));
        for n in [8192usize, 14336] {
            let w = weights(ty, 128, n);
            let acts = rows(vec_dot_type(ty).unwrap(), 64, n, 2);
            let mut out = vec![0.0f32; 128 * 64];
            group.throughput(Throughput::Elements((128 * 64 * n) as u64));
            for isa in compared_isas() {
                group.bench_function(BenchmarkId::new(format!("gemm/{isa}"), n), |b| {
                    b.iter(|| {
                        gemm_on(isa, ty, black_box(&w), 128, &acts, 64, &mut out, 128).unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

/// The best path, then AVX-VNNI (Intel's client cores) and plain AVX2 (AMD's client cores
/// before Zen 4) where those are others.
fn compared_isas() -> Vec<Isa> {
    let mut isas = vec![Isa::best()];
    for isa in [Isa::AvxVnni, Isa::Avx2] {
        if Isa::best() != isa && isa.is_available() {
            isas.push(isa);
        }
    }
    isas
}

/// One routed expert's matrix in a prefill chunk: 512 rows × 2048 columns (Qwen3-Next's and
/// qwen4exp's expert width), against the few tokens a chunk routes to one expert (512 tokens ×
/// 10 of 512 experts ≈ 10; Qwen3-30B-A3B's 8 of 128 ≈ 32). Filter with `-- expert`.
/// Q5_0 is the type of experts whose width is no multiple of 256 (qwen4exp's down
/// projections at `--type q4_k`, as llama.cpp's quantizer falls back); Q6_K that of half the
/// down projections of a Q4_K_M file; IQ3_XXS and IQ4_NL those of an IQ3_XXS file (gate/up, down);
/// IQ3_S and IQ2_S that file's dense attention projections (output; `q` and `k`), here at the
/// same shape.
fn bench_expert(c: &mut Criterion) {
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_0,
        GgmlType::Q6_K,
        GgmlType::IQ3_XXS,
        GgmlType::Q8_0,
        GgmlType::IQ4_NL,
        GgmlType::Q5_K,
        GgmlType::IQ4_XS,
        GgmlType::Q4_1,
        GgmlType::IQ3_S,
        GgmlType::IQ2_S,
    ] {
        bench_expert_type(c, ty);
    }
}

fn bench_expert_type(c: &mut Criterion, ty: GgmlType) {
    let (n, n_rows) = (2048, 512);
    let w = weights(ty, n_rows, n);
    let mut group = c.benchmark_group(format!("expert/{ty}"));
    for n_tok in [1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 52, 64] {
        let acts = rows(vec_dot_type(ty).unwrap(), n_tok, n, 2);
        let mut out = vec![0.0f32; n_rows * n_tok];
        group.throughput(Throughput::Elements((n_rows * n_tok * n) as u64));
        for isa in compared_isas() {
            group.bench_function(BenchmarkId::new(format!("gemm/{isa}"), n_tok), |b| {
                b.iter(|| {
                    gemm_on(
                        isa,
                        ty,
                        black_box(&w),
                        n_rows,
                        &acts,
                        n_tok,
                        &mut out,
                        n_rows,
                    )
                    .unwrap()
                })
            });
        }
        // The AVX-VNNI kernels through their AVX-512 encodings, on a CPU without AVX-VNNI.
        if let Some(twin) = AvxVnniTwin::new().filter(|_| !Isa::AvxVnni.is_available()) {
            group.bench_function(BenchmarkId::new(AvxVnniTwin::NAME, n_tok), |b| {
                b.iter(|| {
                    twin.gemm(ty, black_box(&w), n_rows, &acts, n_tok, &mut out, n_rows)
                        .unwrap()
                })
            });
        }
    }
    group.finish();
}

/// Routed experts as a prefill chunk or a decode step meets them: each call multiplies the
/// *next* of 256 experts' 512 × 2048 matrices (150–300 MB in all, so the weights come from
/// DRAM, read once per pass as a chunk reads each expert once) by 1 to 32 tokens (one: the
/// decode row loop). Against `expert/…/N`, whose one matrix stays in L2, this shows what
/// streaming the weights costs: where the two read alike, the kernel, not DRAM, sets the
/// pace. Filter with `-- dram`.
fn bench_expert_dram(c: &mut Criterion) {
    let n_experts = 256;
    // Gate/up (512 rows × 2048) and down (2048 rows × 512) of Qwen3-Next's experts.
    for (ty, n_rows, n) in [
        (GgmlType::Q4_K, 512, 2048),
        (GgmlType::Q4_K, 2048, 512),
        (GgmlType::IQ3_XXS, 512, 2048),
        // IQ4_NL: the type of the expert downs in qwen4exp's IQ3_XXS file (2560 rows × 640
        // there), at Qwen3-Next's down shape.
        (GgmlType::IQ4_NL, 2048, 512),
    ] {
        let one = weights(ty, n_rows, n);
        let all: Vec<u8> = one
            .iter()
            .copied()
            .cycle()
            .take(one.len() * n_experts)
            .collect();
        let mut group = c.benchmark_group(format!("expert_dram/{ty}/{n_rows}x{n}"));
        for n_tok in [1, 4, 8, 10, 16, 32] {
            let acts = rows(vec_dot_type(ty).unwrap(), n_tok, n, 2);
            let mut out = vec![0.0f32; n_rows * n_tok];
            group.throughput(Throughput::Elements((n_rows * n_tok * n) as u64));
            for isa in compared_isas() {
                let mut e = 0;
                let id = BenchmarkId::new(format!("gemm/{isa}"), n_tok);
                group.bench_function(id, |b| {
                    b.iter(|| {
                        e = (e + 1) % n_experts;
                        let w = black_box(&all[e * one.len()..(e + 1) * one.len()]);
                        gemm_on(isa, ty, w, n_rows, &acts, n_tok, &mut out, n_rows).unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

/// Decode from DRAM: one token against a 151936 × 896 matrix (Qwen2.5-0.5B's output
/// projection, 145 MB at Q8_0, 94 MB at Q5_0), one thread: the bytes stream from DRAM once per
/// call, so this measures the row loop's memory access. Filter with `-- decode_dram`.
fn bench_decode_dram(c: &mut Criterion) {
    let (n_rows, n) = (151_936, 896);
    for ty in [GgmlType::Q8_0, GgmlType::Q5_0] {
        let w = weights(ty, n_rows, n);
        let acts = rows(vec_dot_type(ty).unwrap(), 1, n, 2);
        let mut out = vec![0.0f32; n_rows];
        let mut group = c.benchmark_group(format!("decode_dram/{ty}"));
        group.throughput(Throughput::Bytes(w.len() as u64));
        group.sample_size(10);
        group.bench_function(BenchmarkId::new(format!("gemm/{}", Isa::best()), 1), |b| {
            b.iter(|| {
                gemm_on(
                    Isa::best(),
                    ty,
                    black_box(&w),
                    n_rows,
                    &acts,
                    1,
                    &mut out,
                    n_rows,
                )
                .unwrap()
            })
        });
        group.finish();
    }
}

/// Decode from cache: one token against SmolLM2-135M's FFN matrix (1536 × 576, 553 KB at
/// Q4_1), Qwen2.5-0.5B's FFN down projection (896 × 4864, 2.5 MB at Q5_0) and its gate or up
/// projection (4864 rows of 896, short rows as the model meets them), the K-quants at the
/// down projection's shape (Q5_K: the qwen4exp cuts' LM head format), one thread,
/// repeated so the rows come from L2/L3: the one-token row loop's own speed, which bounds
/// decode where it is below the DRAM rate. Filter with `-- decode_cached`.
fn bench_decode_cached(c: &mut Criterion) {
    use GgmlType as T;
    for (ty, n_rows, n) in [
        (T::Q4_1, 1536, 576),
        (T::Q5_0, 896, 4864),
        (T::Q8_0, 896, 4864),
        (T::Q5_0, 4864, 896),
        (T::Q8_0, 4864, 896),
        (T::Q4_K, 896, 4864),
        (T::Q5_K, 896, 4864),
        (T::Q6_K, 896, 4864),
    ] {
        let w = weights(ty, n_rows, n);
        let acts = rows(vec_dot_type(ty).unwrap(), 1, n, 2);
        let mut out = vec![0.0f32; n_rows];
        let mut group = c.benchmark_group(format!("decode_cached/{ty}/{n_rows}x{n}"));
        group.throughput(Throughput::Bytes(w.len() as u64));
        for isa in compared_isas() {
            group.bench_function(BenchmarkId::new(format!("gemm/{isa}"), 1), |b| {
                b.iter(|| {
                    gemm_on(isa, ty, black_box(&w), n_rows, &acts, 1, &mut out, n_rows).unwrap()
                })
            });
        }
        group.finish();
    }
}

/// A router: 512 experts × 2048 F32 columns (Qwen3-Next's, qwen4exp's) against a chunk's
/// f32 activations, tiled (`gemm_f32`) and as one `dot_f32` per (row, token). Filter with
/// `-- router`.
fn bench_router(c: &mut Criterion) {
    let (n, n_rows) = (2048, 512);
    let w: Vec<u8> = (0..n * n_rows)
        .flat_map(|i| ((i as f32 * 0.37).sin()).to_le_bytes())
        .collect();
    let mut group = c.benchmark_group("router/F32");
    for n_tok in [1, 16, 64] {
        let x: Vec<f32> = (0..n * n_tok).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut out = vec![0.0f32; n_rows * n_tok];
        group.throughput(Throughput::Elements((n_rows * n_tok * n) as u64));
        group.bench_function(BenchmarkId::new("gemm_f32", n_tok), |b| {
            b.iter(|| {
                let (w, x) = (black_box(&w), black_box(&x));
                gemm_f32(GgmlType::F32, w, n_rows, x, n, n_tok, &mut out, n_rows).unwrap()
            })
        });
        group.bench_function(BenchmarkId::new("dot_f32", n_tok), |b| {
            b.iter(|| {
                let (w, x) = (black_box(&w), black_box(&x));
                for t in 0..n_tok {
                    for r in 0..n_rows {
                        let row = &w[r * n * 4..(r + 1) * n * 4];
                        out[t * n_rows + r] =
                            dot_f32(GgmlType::F32, row, &x[t * n..(t + 1) * n]).unwrap();
                    }
                }
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_gemm, bench_wide, bench_expert, bench_expert_dram, bench_decode_dram, bench_decode_cached, bench_router
}
criterion_main!(benches);
