//! Cycles per block of a (row, token) pair for the plain-AVX2 Q4_K integer tile at several
//! shapes, with its operands in L1: what the shapes cost on a CPU before any is built into
//! `strata-quant` (`gemm/x86/avx2.rs`, `dot/x86/avx2/q4_k.rs`). Standalone, not part of the
//! workspace, x86-64 with AVX2 and FMA only:
//!
//! ```text
//! rustc -O scripts/microbench/q4k_tile_shapes.rs -o /tmp/q4k_tile_shapes
//! taskset -c 1 /tmp/q4k_tile_shapes
//! ```
//!
//! A block is what the transposed Q4_K tile does per pair and 256-element block: eight
//! `vpmaddubsw` added in i16, one `vpmaddwd`, then convert, scale, and two FMAs into the
//! accumulator. Cycles are TSC ticks scaled by the ticks per core cycle that a chain of
//! dependent `vpaddd` (one cycle each) takes.
//!
//! The shapes (rows × tokens): `R×T` keeps every sum and accumulator in registers as the
//! compiler allots them; `mem` keeps the float accumulators in memory (volatile); `seq`
//! computes pair after pair with the row's eight weight registers live (the form LLVM gave
//! the real 1 × 4 tile). These are indications, not the real kernel: in `strata-quant` the
//! 1 × 4 and `mem` shapes measured slower than 4 × 2 (BENCHMARKS.md, thirty-fourth session).

use std::arch::x86_64::*;

/// Blocks per row and per token: 2048 columns, as the expert benches of `benches/gemm.rs`.
const NB: usize = 8;

/// A decoded weight block or a prepared activation block, as the transposed Q4_K tile holds
/// them (`q4_k::Dec`, `q4_k::Prep`).
#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct Block {
    /// The eight quant registers (weights: nibbles 0..=15; activations: i8).
    q: [__m256i; 8],
    /// Per i32 lane, the scale the lane's sum is multiplied by (`d·sc_s`, or `d_y`).
    scale: __m256,
    /// Per lane, the minimum term's factor (`dmin·m_s`, or `d_y·bsum_s`).
    min: __m256,
}

/// One row's (or one token's) blocks.
type Row = [Block; NB];

/// One pair and block's float part: widen the i16 sums, scale, and two FMAs into `acc`.
#[inline(always)]
unsafe fn float_part(acc: __m256, sums: __m256i, w: &Block, a: &Block) -> __m256 {
    let s = _mm256_madd_epi16(sums, _mm256_set1_epi16(1));
    let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(s), w.scale);
    _mm256_fnmadd_ps(w.min, a.min, _mm256_fmadd_ps(scaled, a.scale, acc))
}

/// Register index `r` of every pair at a time, all `R × T` i16 sums live (the intrinsic form
/// of `sum8_u8i8_tile`). At 1 × 1 the single accumulator's two FMAs a block bind it.
#[inline(always)]
unsafe fn interleaved<const R: usize, const T: usize, const MEM: bool>(
    w: [&Row; R],
    a: [&Row; T],
    out: &mut [[__m256; T]; R],
) {
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for b in 0..NB {
        let mut p = [[_mm256_setzero_si256(); T]; R];
        for r in 0..8 {
            let av: [__m256i; T] = std::array::from_fn(|j| a[j][b].q[r]);
            for i in 0..R {
                let wv = w[i][b].q[r];
                for j in 0..T {
                    let x = _mm256_maddubs_epi16(wv, av[j]);
                    p[i][j] = if r == 0 {
                        x
                    } else {
                        _mm256_add_epi16(p[i][j], x)
                    };
                }
            }
        }
        for i in 0..R {
            for j in 0..T {
                if MEM {
                    let ptr: *mut __m256 = &mut out[i][j];
                    ptr.write_volatile(float_part(
                        ptr.read_volatile(),
                        p[i][j],
                        &w[i][b],
                        &a[j][b],
                    ));
                } else {
                    acc[i][j] = float_part(acc[i][j], p[i][j], &w[i][b], &a[j][b]);
                }
            }
        }
    }
    if !MEM {
        for i in 0..R {
            for j in 0..T {
                out[i][j] = _mm256_add_ps(out[i][j], acc[i][j]);
            }
        }
    }
}

/// One row, pair after pair, the row's eight weight registers live.
#[inline(always)]
unsafe fn sequential<const T: usize>(w: &Row, a: [&Row; T], out: &mut [__m256; T]) {
    let mut acc = [_mm256_setzero_ps(); T];
    for b in 0..NB {
        let wv: [__m256i; 8] = w[b].q;
        for j in 0..T {
            let mut p = _mm256_maddubs_epi16(wv[0], a[j][b].q[0]);
            for r in 1..8 {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(wv[r], a[j][b].q[r]));
            }
            acc[j] = float_part(acc[j], p, &w[b], &a[j][b]);
        }
    }
    for j in 0..T {
        out[j] = _mm256_add_ps(out[j], acc[j]);
    }
}

/// `reps` times the tile of `FORM` (0: interleaved, 1: interleaved with the accumulators in
/// memory, 2: sequential, one row only) over rows `w[..R]` and tokens `a[..T]`.
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn repeat<const R: usize, const T: usize, const FORM: u8>(
    reps: usize,
    w: &[Row; 4],
    a: &[Row; 4],
    out: &mut [[__m256; T]; R],
) {
    assert!(FORM != 2 || R == 1, "the sequential form has one row");
    for _ in 0..reps {
        // Opaque inputs each time, so that no work is hoisted out of the repetitions.
        let (w, a) = (std::hint::black_box(w), std::hint::black_box(a));
        let wr: [&Row; R] = std::array::from_fn(|i| &w[i]);
        let ar: [&Row; T] = std::array::from_fn(|j| &a[j]);
        match FORM {
            0 => interleaved::<R, T, false>(wr, ar, out),
            1 => interleaved::<R, T, true>(wr, ar, out),
            _ => sequential::<T>(wr[0], ar, &mut out[0]),
        }
        std::hint::black_box(&mut *out);
    }
}

/// `n` times eight dependent `vpaddd` (one cycle each on Haswell and later, and on Zen).
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn add_chain(n: usize) {
    std::arch::asm!(
        "vpxor ymm0, ymm0, ymm0",
        "2:",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "vpaddd ymm0, ymm0, ymm0",
        "dec {n}",
        "jnz 2b",
        n = inout(reg) n => _,
        out("ymm0") _,
        options(nomem, nostack),
    );
}

/// TSC ticks per core cycle, from a chain of dependent one-cycle adds.
fn tsc_per_cycle() -> f64 {
    let n = 20_000_000;
    let t = unsafe { _rdtsc() };
    unsafe { add_chain(n) };
    (unsafe { _rdtsc() } - t) as f64 / (n * 8) as f64
}

/// Prints the best of five timings of `repeat` in core cycles per pair and block.
fn measure<const R: usize, const T: usize, const FORM: u8>(
    name: &str,
    w: &[Row; 4],
    a: &[Row; 4],
    tpc: f64,
) {
    let mut out = [[unsafe { _mm256_setzero_ps() }; T]; R];
    let reps = 100_000;
    let best = (0..5)
        .map(|_| {
            let t = unsafe { _rdtsc() };
            unsafe { repeat::<R, T, FORM>(reps, w, a, &mut out) };
            (unsafe { _rdtsc() } - t) as f64 / tpc / (reps * NB * R * T) as f64
        })
        .fold(f64::MAX, f64::min);
    println!("{name:12} {best:6.2} cycles per pair and block");
}

/// Calibrates the clock, then times every shape.
fn main() {
    assert!(
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
        "needs AVX2 and FMA"
    );
    let tpc = tsc_per_cycle();
    let mut s = 12345u64;
    let mut byte = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as u8
    };
    let mut rows = |mask: u8| -> [Row; 4] {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| unsafe {
                let q = std::array::from_fn(|_| {
                    std::mem::transmute::<[u8; 32], __m256i>(std::array::from_fn(|_| byte() & mask))
                });
                Block {
                    q,
                    scale: _mm256_set1_ps(0.01),
                    min: _mm256_set1_ps(0.02),
                }
            })
        })
    };
    let (w, a) = (rows(0x0f), rows(0xff));
    println!("TSC ticks per core cycle: {tpc:.3}");
    measure::<4, 2, 0>("4x2", &w, &a, tpc);
    measure::<4, 2, 1>("4x2 mem", &w, &a, tpc);
    measure::<2, 4, 1>("2x4 mem", &w, &a, tpc);
    measure::<1, 4, 0>("1x4", &w, &a, tpc);
    measure::<1, 4, 2>("1x4 seq", &w, &a, tpc);
    measure::<1, 1, 0>("1x1", &w, &a, tpc);
}
