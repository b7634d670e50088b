//! Nanoseconds per block of the plain-AVX2 IQ3_XXS one-token row (`dot/x86/avx2/iq3.rs`,
//! decode's `vec_dot` rows) with its parts swapped or removed, operands in L1/L2: where the
//! loop's time goes on a CPU without performance counters. Standalone, not part of the
//! workspace, x86-64 with AVX2, FMA and F16C only:
//!
//! ```text
//! rustc --edition 2021 -O scripts/microbench/iq3_xxs_row_parts.rs -o /tmp/iq3_xxs_row_parts
//! taskset -c 1 /tmp/iq3_xxs_row_parts
//! ```
//!
//! Each variant runs the kernel's loop (per block: the 8 groups' sign masks computed in
//! registers, then per group of 32 weights 8 grid points, the signs applied to the activation
//! bytes, one `vpmaddubsw`, one `vpmaddwd` by the group's multiplier; one FMA per block) over
//! 64 rows of 8 blocks against one token, and differs only in how a group's 8 grid points
//! become one register:
//!
//! - `blend`: each point a broadcast load, seven blends (the kernel's `points32`);
//! - `pinsrd`: `vmovd` and three `vpinsrd` per 128-bit half, one insert;
//! - `pairs64`: two points joined in a general register, four 64-bit lanes;
//! - `store32` / `store64`: the points stored to the stack, the register loaded back;
//! - `gather`: one `vpgatherdd`;
//! - `nogrid`: no table at all (the 8 index bytes widened): the loop without its lookups;
//! - `nosigns`: `blend` without the sign masks and their two operations a group;
//! - `unrolled`: `blend` with the eight groups written out, where the kernel loops over four
//!   pairs of groups (LLVM keeps that loop, storing the eight sign masks to the stack).
//!
//! LLVM compiles `blend`'s broadcasts and blends to `vmovd` and `vpinsrd` with the table
//! loads folded in, as in the kernel, so `blend` and `pinsrd` differ only in that `pinsrd`'s
//! loop over the pairs is unrolled as `unrolled`'s is. The unrolled forms' medians ran faster
//! here on Zen 3, their fastest rounds not, and in `strata-quant` the written-out loop was no
//! faster (criterion, BENCHMARKS.md, 37th session).
//!
//! The grid here is random even bytes 4..=62, as IQ3_XXS's are; the time does not depend on
//! the values. The output is the median of 7 rounds per variant. BENCHMARKS.md (37th session)
//! has the readings on Zen 3.

use std::arch::x86_64::*;
use std::time::Instant;

/// An IQ3_XXS block (`iq3::BlockIQ3_XXS`): f16 `d`, 64 grid indices, 8 sign and scale words.
#[repr(C)]
#[derive(Clone, Copy)]
struct BlockIq3Xxs {
    d: [u8; 2],
    qs: [u8; 96],
}

/// A Q8_K block (`q8_k::BlockQ8_K`): f32 `d`, 256 quants, 16 sums.
#[repr(C)]
#[derive(Clone, Copy)]
struct BlockQ8K {
    d: f32,
    qs: [i8; 256],
    bsums: [i16; 16],
}

/// Blocks per row: 2048 columns, as the expert benches of `benches/gemm.rs`.
const NB: usize = 8;
/// Rows per pass: 64 · 8 blocks of 98 bytes (50 KiB) stay in L2.
const ROWS: usize = 64;

const BLEND: u8 = 0;
const PINSRD: u8 = 1;
const PAIRS64: u8 = 2;
const STORE32: u8 = 3;
const STORE64: u8 = 4;
const GATHER: u8 = 5;
const NOGRID: u8 = 6;
const NOSIGNS: u8 = 7;
const UNROLLED: u8 = 8;
const NAMES: [&str; 9] = [
    "blend", "pinsrd", "pairs64", "store32", "store64", "gather", "nogrid", "nosigns", "unrolled",
];

/// The 8 sign masks of a block's groups from its 8 sign words, as `lattice::even_sign_masks`
/// computes them (7-bit indices, the eighth sign their parity).
#[inline(always)]
unsafe fn sign_masks(packed: __m256i) -> [__m256i; 8] {
    let field = |l: u32| _mm256_set1_epi32(0x7f << (8 * l));
    let mut s = _mm256_and_si256(packed, field(0));
    s = _mm256_or_si256(
        s,
        _mm256_and_si256(_mm256_slli_epi32::<1>(packed), field(1)),
    );
    s = _mm256_or_si256(
        s,
        _mm256_and_si256(_mm256_slli_epi32::<2>(packed), field(2)),
    );
    s = _mm256_or_si256(
        s,
        _mm256_and_si256(_mm256_slli_epi32::<3>(packed), field(3)),
    );
    let o = i8::MIN;
    let parity = _mm256_setr_epi8(
        0, o, o, 0, o, 0, 0, o, o, 0, 0, o, 0, o, o, 0, //
        0, o, o, 0, o, 0, 0, o, o, 0, 0, o, 0, o, o, 0,
    );
    let nibble = _mm256_set1_epi8(0x0f);
    let low = _mm256_shuffle_epi8(parity, _mm256_and_si256(s, nibble));
    let high = _mm256_shuffle_epi8(parity, _mm256_and_si256(_mm256_srli_epi16::<4>(s), nibble));
    let s = _mm256_or_si256(s, _mm256_xor_si256(low, high));
    let halves = [
        _mm256_permute2x128_si256::<0x00>(s, s),
        _mm256_permute2x128_si256::<0x11>(s, s),
    ];
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let mut out = [_mm256_setzero_si256(); 8];
    for (g, out) in out.iter_mut().enumerate() {
        let first = _mm256_set1_epi64x(0x0101_0101_0101_0101 * (4 * (g % 4)) as i64);
        let step = _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        );
        let spread = _mm256_shuffle_epi8(halves[g / 4], _mm256_add_epi8(step, first));
        *out = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    }
    out
}

/// The 8 grid points of indices `q` in one register, by variant `V`.
#[inline(always)]
unsafe fn grid<const V: u8>(table: &[u32; 256], q: &[u8]) -> __m256i {
    let p = |k: usize| table[q[k] as usize];
    match V {
        BLEND | NOSIGNS => {
            let b = |k: usize| _mm256_set1_epi32(p(k) as i32);
            let p01 = _mm256_blend_epi32::<0b0000_0010>(b(0), b(1));
            let p23 = _mm256_blend_epi32::<0b0000_1000>(b(2), b(3));
            let p45 = _mm256_blend_epi32::<0b0010_0000>(b(4), b(5));
            let p67 = _mm256_blend_epi32::<0b1000_0000>(b(6), b(7));
            let low = _mm256_blend_epi32::<0b0000_1100>(p01, p23);
            let high = _mm256_blend_epi32::<0b1100_0000>(p45, p67);
            _mm256_blend_epi32::<0b1111_0000>(low, high)
        }
        PINSRD => {
            let half = |k: usize| {
                let v = _mm_cvtsi32_si128(p(k) as i32);
                let v = _mm_insert_epi32::<1>(v, p(k + 1) as i32);
                let v = _mm_insert_epi32::<2>(v, p(k + 2) as i32);
                _mm_insert_epi32::<3>(v, p(k + 3) as i32)
            };
            _mm256_set_m128i(half(4), half(0))
        }
        PAIRS64 => {
            let pair = |k: usize| (p(k) as u64 | (p(k + 1) as u64) << 32) as i64;
            _mm256_set_epi64x(pair(6), pair(4), pair(2), pair(0))
        }
        STORE32 => {
            let mut buf = [0u32; 8];
            for (k, b) in buf.iter_mut().enumerate() {
                // Volatile, so the compiler keeps the stores and the reload.
                std::ptr::write_volatile(b, p(k));
            }
            _mm256_loadu_si256(buf.as_ptr().cast())
        }
        STORE64 => {
            let mut buf = [0u64; 4];
            for (k, b) in buf.iter_mut().enumerate() {
                std::ptr::write_volatile(b, p(2 * k) as u64 | (p(2 * k + 1) as u64) << 32);
            }
            _mm256_loadu_si256(buf.as_ptr().cast())
        }
        GATHER => {
            let index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(q.as_ptr().cast()));
            _mm256_i32gather_epi32::<4>(table.as_ptr().cast(), index)
        }
        NOGRID => _mm256_and_si256(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(q.as_ptr().cast())),
            _mm256_set1_epi8(62),
        ),
        _ => unreachable!(),
    }
}

/// Group `g` (32 weights) of block `x` against `y`, its sign mask `neg`, added to `sum`.
#[inline(always)]
unsafe fn group<const V: u8>(
    table: &[u32; 256],
    x: &BlockIq3Xxs,
    y: &BlockQ8K,
    g: usize,
    neg: __m256i,
    sum: __m256i,
) -> __m256i {
    let points = grid::<V>(table, &x.qs[8 * g..8 * g + 8]);
    let aux = u32::from_le_bytes(x.qs[64 + 4 * g..68 + 4 * g].try_into().unwrap());
    let yv = _mm256_loadu_si256(y.qs.as_ptr().add(32 * g).cast());
    let ys = if V == NOSIGNS {
        yv
    } else {
        _mm256_sub_epi8(_mm256_xor_si256(yv, neg), neg)
    };
    let ls = _mm256_set1_epi16(2 * (aux >> 28) as i16 + 1);
    _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(points, ys), ls))
}

/// One row's `vec_dot` against `y`, the kernel's loop with variant `V`'s grid.
///
/// # Safety
/// AVX2, FMA and F16C are available.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn row<const V: u8>(table: &[u32; 256], x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let masks = if V == NOSIGNS {
            [_mm256_setzero_si256(); 8]
        } else {
            sign_masks(_mm256_loadu_si256(x.qs.as_ptr().add(64).cast()))
        };
        // Even and odd groups in two named sums, two groups an iteration, as the kernel
        // (indexing an array of two sums by `g % 2` keeps them in memory).
        let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        if V == UNROLLED {
            // The same groups written out: no loop over the pairs.
            even = group::<BLEND>(table, x, y, 0, masks[0], even);
            odd = group::<BLEND>(table, x, y, 1, masks[1], odd);
            even = group::<BLEND>(table, x, y, 2, masks[2], even);
            odd = group::<BLEND>(table, x, y, 3, masks[3], odd);
            even = group::<BLEND>(table, x, y, 4, masks[4], even);
            odd = group::<BLEND>(table, x, y, 5, masks[5], odd);
            even = group::<BLEND>(table, x, y, 6, masks[6], even);
            odd = group::<BLEND>(table, x, y, 7, masks[7], odd);
        } else {
            for pair in 0..4 {
                even = group::<V>(table, x, y, 2 * pair, masks[2 * pair], even);
                odd = group::<V>(table, x, y, 2 * pair + 1, masks[2 * pair + 1], odd);
            }
        }
        let sum = _mm256_add_epi32(even, odd);
        let dx = _mm_cvtph_ps(_mm_cvtsi32_si128(u16::from_le_bytes(x.d) as i32));
        let d = _mm_mul_ss(dx, _mm_set_ss(y.d));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let s = _mm_hadd_ps(s, s);
    _mm_cvtss_f32(_mm_hadd_ps(s, s))
}

/// Nanoseconds per block of variant `V` over `reps` passes of every row.
fn time<const V: u8>(table: &[u32; 256], xs: &[BlockIq3Xxs], ys: &[BlockQ8K], reps: usize) -> f64 {
    let start = Instant::now();
    let mut sink = 0.0f32;
    for _ in 0..reps {
        for r in xs.chunks_exact(NB) {
            // SAFETY: main checked AVX2, FMA and F16C.
            sink += unsafe { row::<V>(table, r, ys) };
        }
    }
    std::hint::black_box(sink);
    start.elapsed().as_nanos() as f64 / (reps * xs.len()) as f64
}

fn main() {
    if !(is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c"))
    {
        eprintln!("needs AVX2, FMA and F16C");
        std::process::exit(1);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut table = [0u32; 256];
    for t in table.iter_mut() {
        *t = (0..4).fold(0, |v, k| v | ((4 + 2 * (rnd() % 30)) as u32) << (8 * k));
    }
    let xs: Vec<BlockIq3Xxs> = (0..ROWS * NB)
        .map(|_| BlockIq3Xxs {
            d: [0x00, 0x3c],
            qs: std::array::from_fn(|_| rnd() as u8),
        })
        .collect();
    let ys: Vec<BlockQ8K> = (0..NB)
        .map(|_| BlockQ8K {
            d: 0.01,
            qs: std::array::from_fn(|_| ((rnd() % 255) as i16 - 127) as i8),
            bsums: [0; 16],
        })
        .collect();
    let reps = 10_000;
    let mut samples = vec![Vec::new(); NAMES.len()];
    for _ in 0..7 {
        samples[0].push(time::<BLEND>(&table, &xs, &ys, reps));
        samples[1].push(time::<PINSRD>(&table, &xs, &ys, reps));
        samples[2].push(time::<PAIRS64>(&table, &xs, &ys, reps));
        samples[3].push(time::<STORE32>(&table, &xs, &ys, reps));
        samples[4].push(time::<STORE64>(&table, &xs, &ys, reps));
        samples[5].push(time::<GATHER>(&table, &xs, &ys, reps));
        samples[6].push(time::<NOGRID>(&table, &xs, &ys, reps));
        samples[7].push(time::<NOSIGNS>(&table, &xs, &ys, reps));
        samples[8].push(time::<UNROLLED>(&table, &xs, &ys, reps));
    }
    for (name, s) in NAMES.iter().zip(&mut samples) {
        s.sort_by(f64::total_cmp);
        println!(
            "{name:>8}: {:5.1} ns a block (range {:.1}-{:.1})",
            s[3], s[0], s[6]
        );
    }
}
