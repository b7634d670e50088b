//! AVX512-BF16 `vec_dot` of BF16 weights with BF16 activations: `vdpbf16ps` in the order
//! ggml-cpu/vec.cpp `ggml_vec_dot_bf16` uses where it is built with AVX512-BF16 (two 16-lane
//! accumulators over 64 elements a step, each reduced, then added with the scalar tail in f64),
//! so the result is ggml's bit for bit (tests/bf16.rs checks ggml's own results).
//!
//! `vdpbf16ps` adds two bf16 products into each f32 lane, the odd element's first, in two
//! roundings to nearest even that ignore MXCSR, with subnormal inputs read as zero and
//! subnormal results flushed to zero (Intel SDM, VDPBF16PS). Products of two bf16 values are
//! otherwise exact in f32, so the result differs from the scalar reference's only by f32 sum
//! order and those flushed subnormals (tests/bf16.rs bounds both).

use std::arch::x86_64::*;

/// Whether this CPU has AVX512-BF16 (the caller already holds the rest of AVX-512); the
/// standard library caches the probe, so this is a load and a test.
#[inline(always)]
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512bf16")
}

/// 32 bf16 values as the operand type of `vdpbf16ps`.
#[inline(always)]
fn bh(v: __m512i) -> __m512bh {
    // SAFETY: both are plain 512-bit vectors of the same size; every bit pattern is a valid
    // bf16 vector.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
}

/// `Σ row[i] · act[i]` over two BF16 rows.
///
/// # Safety
/// AVX-512 F, BW and BF16 are available; `row.len() == act.len()`, even.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn vec_dot(row: &[u8], act: &[u8]) -> f32 {
    assert_eq!(row.len(), act.len(), "BF16 vec_dot lengths");
    let n = row.len() / 2;
    let (wp, ap) = (row.as_ptr(), act.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    while i + 64 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = 2 * (i + 32 * k);
            let w = _mm512_loadu_si512(wp.add(at).cast());
            let a = _mm512_loadu_si512(ap.add(at).cast());
            *acc = _mm512_dpbf16_ps(*acc, bh(w), bh(a));
        }
        i += 64;
    }
    // As ggml: each accumulator reduced, the two and the rest (under 64, exact f32 products)
    // summed in f64.
    let mut sum = _mm512_reduce_add_ps(acc[0]) as f64 + _mm512_reduce_add_ps(acc[1]) as f64;
    for j in i..n {
        sum += (bf16_at(row, j) * bf16_at(act, j)) as f64;
    }
    sum as f32
}

/// Element `j` of a BF16 row, as f32 (exact).
#[inline(always)]
fn bf16_at(row: &[u8], j: usize) -> f32 {
    f32::from_bits((u16::from_le_bytes([row[2 * j], row[2 * j + 1]]) as u32) << 16)
}
