//! Nanoseconds per 32 products of a block-order GEMM tile on Intel AMX (`tdpbssd`) against the
//! AVX-512 VNNI form of Strata's tokens-in-lanes tiles (`gemm/x86/block_order.rs`), operands
//! in L1/L2: what AMX would give the routed experts' prefill on a CPU that has it. Standalone,
//! not part of the workspace; x86-64 with AVX-512 F/VNNI and AMX-INT8, Linux ≥ 5.16 (the
//! tile state is asked for with `arch_prctl(ARCH_REQ_XCOMP_PERM)`):
//!
//! ```text
//! rustc --edition 2021 -O -C target-cpu=native scripts/microbench/amx_block_tile.rs -o /tmp/amx_block_tile
//! taskset -c 1 /tmp/amx_block_tile
//! ```
//!
//! The tile is 16 weight rows × `n` tokens (16, or 10: about what a routed expert meets in a
//! 512-token chunk of a 512-expert model) over 16 blocks of 32 int8 products (a 512-wide
//! row, as Qwen3-Next's expert downs). Per block both forms convert the block's exact int32
//! sums to f32, multiply them by `d_w[row] · d_a[token]` and add them to the accumulator in
//! block order (`dot/legacy.rs`'s order, which `Lanes16` keeps), so the f32 operations are
//! the same and the results must agree bit for bit (checked, with a scalar loop in that order
//! as the third opinion).
//!
//! - `amx`: per block one `tdpbssd` (signed × signed) of a 16 × 32-byte weight tile and an
//!   8 × 4n-byte activation tile into a 16 × n int32 tile, stored, then per row a load, a
//!   convert, two multiplies and an add.
//! - `vnni`: `Lanes16`'s form, tokens in the 16 lanes: per row and block 8 `vpdpbusd` of the
//!   row's biased weight dword broadcast against the repacked activations, in two chains of
//!   four (one started from the block's `-OFFSET Σ y`) joined by an add, then a convert, two
//!   multiplies and an add; a 10-token tile still fills 16 lanes.
//!
//! Weight decoding (IQ4_NL's table, IQ3_XXS's grid) is not included: both forms would read
//! the same decoded rows once per tile. The output is the median of 7 rounds per form.
//! BENCHMARKS.md (39th session) has the readings.

use std::arch::asm;
use std::arch::x86_64::*;
use std::time::Instant;

/// Blocks of 32 products along a row.
const NB: usize = 16;

/// The tile configuration `ldtilecfg` reads (palette 1): bytes per row and rows of each tile.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// 64-byte aligned storage.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Aligned<T>(T);

/// Operands of one tile: per block the weights (16 rows × 32 k), the AMX activation tile
/// (k/4 rows × 16 tokens × 4), the VNNI lanes (k/4 × 16 tokens × 4, signed bytes as the
/// `vpdpbusd` signed side), the weights biased by 128 for `vpdpbusd`'s unsigned side with
/// each token's `-128 Σ y`, and the f32 scales.
struct Operands {
    w: Vec<Aligned<[[i8; 32]; 16]>>,
    a_amx: Vec<Aligned<[[i8; 64]; 8]>>,
    a_lanes: Vec<Aligned<[[u8; 64]; 8]>>,
    w_biased: Vec<Aligned<[[u8; 32]; 16]>>,
    neg_offset_sum: Vec<Aligned<[i32; 16]>>,
    d_w: Vec<[f32; 16]>,
    d_a: Vec<[f32; 16]>,
}

fn operands(n_tok: usize) -> Operands {
    let mut seed = 0x2545_f491_u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    let mut o = Operands {
        w: vec![Aligned([[0; 32]; 16]); NB],
        a_amx: vec![Aligned([[0; 64]; 8]); NB],
        a_lanes: vec![Aligned([[0; 64]; 8]); NB],
        w_biased: vec![Aligned([[0; 32]; 16]); NB],
        neg_offset_sum: vec![Aligned([0; 16]); NB],
        d_w: vec![[0.0; 16]; NB],
        d_a: vec![[0.0; 16]; NB],
    };
    for b in 0..NB {
        for m in 0..16 {
            o.d_w[b][m] = (next() % 1000) as f32 * 1e-5;
            o.d_a[b][m] = (next() % 1000) as f32 * 1e-5;
            for k in 0..32 {
                let x = (next() % 256) as u8 as i8;
                o.w[b].0[m][k] = x;
                o.w_biased[b].0[m][k] = (x as i16 + 128) as u8;
            }
        }
        for t in 0..n_tok {
            for k in 0..32 {
                let y = (next() % 256) as u8 as i8;
                o.a_amx[b].0[k / 4][t * 4 + k % 4] = y;
                o.a_lanes[b].0[k / 4][t * 4 + k % 4] = y as u8;
                o.neg_offset_sum[b].0[t] -= 128 * y as i32;
            }
        }
    }
    o
}

/// Asks Linux for the AMX tile data state (`ARCH_REQ_XCOMP_PERM`, `XFEATURE_XTILEDATA`).
fn request_tile_state() -> bool {
    let ret: i64;
    // SAFETY: arch_prctl(0x1023, 18) only changes this process's permitted xstate.
    unsafe {
        asm!("syscall", inlateout("rax") 158_i64 => ret, in("rdi") 0x1023_i64, in("rsi") 18_i64,
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret == 0
}

/// Tiles 0 (16 × n int32 sums), 1 (16 × 32 weight bytes), 2 (8 × 4n activation bytes).
unsafe fn configure(n_tok: usize) {
    let mut c = TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        colsb: [0; 16],
        rows: [0; 16],
    };
    (c.rows[0], c.colsb[0]) = (16, (4 * n_tok) as u16);
    (c.rows[1], c.colsb[1]) = (16, 32);
    (c.rows[2], c.colsb[2]) = (8, (4 * n_tok) as u16);
    asm!("ldtilecfg [{}]", in(reg) &c, options(nostack));
}

#[target_feature(enable = "avx512f")]
unsafe fn amx(o: &Operands, out: &mut [[f32; 16]; 16]) {
    let mut acc = [_mm512_setzero_ps(); 16];
    let mut c = Aligned([[0_i32; 16]; 16]);
    for b in 0..NB {
        asm!(
            "tilezero tmm0",
            "tileloadd tmm1, [{w} + {ws}*1]",
            "tileloadd tmm2, [{a} + {as_}*1]",
            "tdpbssd tmm0, tmm1, tmm2",
            "tilestored [{c} + {cs}*1], tmm0",
            w = in(reg) o.w[b].0.as_ptr(), ws = in(reg) 32_usize,
            a = in(reg) o.a_amx[b].0.as_ptr(), as_ = in(reg) 64_usize,
            c = in(reg) c.0.as_mut_ptr(), cs = in(reg) 64_usize,
            options(nostack),
        );
        let d_a = _mm512_loadu_ps(o.d_a[b].as_ptr());
        for m in 0..16 {
            let d = _mm512_mul_ps(_mm512_set1_ps(o.d_w[b][m]), d_a);
            let s = _mm512_cvtepi32_ps(_mm512_load_si512(c.0[m].as_ptr().cast()));
            acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(d, s));
        }
    }
    for m in 0..16 {
        _mm512_storeu_ps(out[m].as_mut_ptr(), acc[m]);
    }
}

#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vnni(o: &Operands, out: &mut [[f32; 16]; 16]) {
    let mut acc = [_mm512_setzero_ps(); 16];
    for b in 0..NB {
        let d_a = _mm512_loadu_ps(o.d_a[b].as_ptr());
        let neg = _mm512_load_si512(o.neg_offset_sum[b].0.as_ptr().cast());
        for m in 0..16 {
            let w = o.w_biased[b].0[m].as_ptr().cast::<i32>();
            let (mut s0, mut s1) = (neg, _mm512_setzero_si512());
            for j in 0..4 {
                let a0 = _mm512_load_si512(o.a_lanes[b].0[j].as_ptr().cast());
                let a1 = _mm512_load_si512(o.a_lanes[b].0[j + 4].as_ptr().cast());
                s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(w.add(j).read_unaligned()), a0);
                s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(w.add(j + 4).read_unaligned()), a1);
            }
            let s = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            let d = _mm512_mul_ps(_mm512_set1_ps(o.d_w[b][m]), d_a);
            acc[m] = _mm512_add_ps(acc[m], _mm512_mul_ps(d, s));
        }
    }
    for m in 0..16 {
        _mm512_storeu_ps(out[m].as_mut_ptr(), acc[m]);
    }
}

/// The same sums and the same f32 order, one value at a time.
fn scalar(o: &Operands, n_tok: usize) -> [[f32; 16]; 16] {
    let mut out = [[0.0_f32; 16]; 16];
    for (m, row) in out.iter_mut().enumerate() {
        for (t, v) in row.iter_mut().enumerate().take(n_tok) {
            for b in 0..NB {
                let s: i32 = (0..32)
                    .map(|k| o.w[b].0[m][k] as i32 * o.a_amx[b].0[k / 4][t * 4 + k % 4] as i32)
                    .sum();
                *v += o.d_w[b][m] * o.d_a[b][t] * s as f32;
            }
        }
    }
    out
}

fn median_ns(mut f: impl FnMut(), products: f64) -> f64 {
    let iters = 100_000;
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / (iters as f64 * products / 32.0)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[3]
}

fn main() {
    let amx_cpu = __cpuid_count(7, 0).edx & (1 << 25) != 0;
    if !amx_cpu || !is_x86_feature_detected!("avx512vnni") {
        eprintln!("needs AMX-INT8 and AVX-512 VNNI");
        std::process::exit(1);
    }
    if !request_tile_state() {
        eprintln!("the kernel did not grant the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)");
        std::process::exit(1);
    }
    println!("ns per 32 products (16 rows × n tokens × {NB} blocks of 32; medians of 7)");
    for n_tok in [16, 10] {
        let o = operands(n_tok);
        let (mut out_amx, mut out_vnni) = ([[0.0; 16]; 16], [[0.0; 16]; 16]);
        // SAFETY: the features were checked above; the tiles are configured before use.
        unsafe { configure(n_tok) };
        let products = (16 * n_tok * NB * 32) as f64;
        let t_amx = median_ns(
            || unsafe { amx(&o, std::hint::black_box(&mut out_amx)) },
            products,
        );
        let t_vnni = median_ns(
            || unsafe { vnni(&o, std::hint::black_box(&mut out_vnni)) },
            products,
        );
        let want = scalar(&o, n_tok);
        let same = (0..16).all(|m| {
            (0..n_tok).all(|t| {
                want[m][t].to_bits() == out_amx[m][t].to_bits()
                    && want[m][t].to_bits() == out_vnni[m][t].to_bits()
            })
        });
        println!(
            "n = {n_tok:2}: amx {t_amx:.3}  vnni {t_vnni:.3}  vnni/amx {:.2}  bits equal: {same}",
            t_vnni / t_amx
        );
        assert!(
            same,
            "AMX, VNNI and the scalar order must agree bit for bit"
        );
    }
    // SAFETY: releases this thread's tile state.
    unsafe { asm!("tilerelease", options(nostack)) };
}
