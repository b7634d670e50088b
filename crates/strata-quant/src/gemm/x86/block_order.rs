//! AVX-512 GEMM of the symmetric 32-element formats (Q4_0, Q5_0, Q8_0, IQ4_NL against Q8_0)
//! in their block order: for each (row, token), block after block, the block's exact i32 sum
//! `Σ x y` is converted, multiplied by `d_x · d_y` and added to one f32 sum (the scalar
//! reference's order, `dot/legacy.rs`, which this path's `vec_dot` also follows). Because that
//! order has one f32 chain per (row, token), 16 of them fit the lanes of one register, either
//! way round:
//!
//! - **Tokens in lanes** ([`token_lanes`], many tokens). The activations are repacked so one
//!   register holds 4 bytes of each of 16 tokens; a dword of 4 weight bytes biased to unsigned
//!   (`x + OFFSET`, as `vec_dot` takes them), broadcast, meets them in one `vpdpbusd`, 64
//!   products. Eight of those give a block's 16 sums, started from `-OFFSET Σ y` (made with
//!   the repacking), and one convert, two multiplies and one add scale them for all 16
//!   tokens: 12 instructions per
//!   512 products, where a per-pair kernel spends 16 (`vpdpbusd`, multiply, convert, FMA per
//!   64). The same layout as llama.cpp's `tinyBLAS` VNNI micro-kernels.
//! - **Rows in lanes** ([`row_lanes`], one to a few tokens: decode). Sixteen rows' two blocks
//!   go through one `vpdpbusd` each, as in `vec_dot`, and their partial sums are transposed and
//!   added into one register per block (lane = row), which is then scaled as above. The
//!   transposition runs on the shuffle port beside the products.
//!
//! Integer sums are exact in any order, and each lane does the reference's float operations in
//! the reference's order, so every entry equals `vec_dot` on this path bit for bit
//! (tests/gemm.rs) and, for these formats, the scalar reference too (tests/simd.rs).

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::size_of;

use super::super::tile::{run, scratch, Job, Line, Tile};
use crate::block::cast_blocks;
use crate::dot::x86::avx512::legacy::block_d;
use crate::dot::x86::avx512::legacy::{act_pair, symmetric_from, Offset};
use crate::legacy::BlockQ8_0;

/// Tokens from which a job runs with tokens in the lanes: below it the lanes a token group
/// leaves empty cost more than the rows-in-lanes form, which does 16 rows per token.
pub(super) const TOKEN_LANES_MIN: usize = 6;

/// `job` in block order: tokens in lanes from [`TOKEN_LANES_MIN`] tokens, else rows in lanes.
/// Always `true` (every entry written).
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm<X: Offset + crate::Block>(job: Job<'_>) -> bool {
    if job.n_tok >= TOKEN_LANES_MIN {
        token_lanes::<X, 8>(job);
        true
    } else {
        run::<RowChain<X>, 4, 1>(job)
    }
}

const CHECKED: &str = "gemm checked the lengths";

/// The lanes of `acc` that hold entries: `n` of them, to `out[at + k·step]`.
#[inline(always)]
unsafe fn store_lanes(acc: __m512, n: usize, out: &mut [f32], at: usize, step: usize) {
    let mut lanes = [0.0f32; 16];
    _mm512_storeu_ps(lanes.as_mut_ptr(), acc);
    for (k, v) in lanes.into_iter().take(n).enumerate() {
        out[at + k * step] = v;
    }
}

/// `acc + cvt(sums) · d`, lane by lane: a block's term in the reference's order.
#[inline(always)]
unsafe fn add_block(acc: __m512, sums: __m512i, d: __m512) -> __m512 {
    _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(sums), d))
}

// ---- One row at a time ----

/// The sums of 4 blocks from two pairs' partial sums (`v0`: lanes 0..8 add up to block 0,
/// 8..16 to block 1; `v1` blocks 2 and 3, as `vec_dot`'s `vpdpbusd` leaves them), block `b`
/// in lane `b`. Exact (i32 adds).
#[inline(always)]
unsafe fn block_sums4(v0: __m512i, v1: __m512i) -> __m128i {
    // Each 128-bit chunk c: [v0 d0+d2, v1 d0+d2, v0 d1+d3, v1 d1+d3].
    let u = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    // Dwords 0, 1 of chunk c: chunk c's sums of v0, v1.
    let t = _mm512_add_epi32(u, _mm512_shuffle_epi32::<0b01_00_11_10>(u));
    // Chunks 0, 1 are the halves of blocks 0 (v0) and 2 (v1); chunks 2, 3 of blocks 1 and 3.
    let even = _mm_add_epi32(_mm512_castsi512_si128(t), _mm512_extracti32x4_epi32::<1>(t));
    let odd = _mm_add_epi32(
        _mm512_extracti32x4_epi32::<2>(t),
        _mm512_extracti32x4_epi32::<3>(t),
    );
    _mm_unpacklo_epi32(even, odd)
}

/// The f16 fields at the starts of 4 blocks `size` bytes apart, as f32 (exact).
#[inline(always)]
unsafe fn halves4(p: *const u8, size: usize) -> __m128 {
    let h = |k: usize| p.add(k * size).cast::<u16>().read_unaligned() as i32;
    let v = _mm_setr_epi32(h(0) | h(1) << 16, h(2) | h(3) << 16, 0, 0);
    _mm_cvtph_ps(v)
}

/// The symmetric formats one row at a time, 4 blocks a step, through the shared tile loop
/// (`tile.rs`): for one to a few tokens (decode), whose rows then stream by in the order the
/// decode row loop reads them. A step takes the 4 blocks' exact sums (two `vpdpbusd` as in
/// `vec_dot`, then [`block_sums4`]), scales them in the lanes and adds the 4 products to the
/// (row, token) sum in block order.
pub(super) struct RowChain<X>(PhantomData<X>);

impl<X: Offset + crate::Block> Tile for RowChain<X> {
    type W = X;
    type A = BlockQ8_0;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    /// The preparation (two `vpdpbusd` and a reduction for `OFFSET Σ y`) costs about a step.
    const PREP_ONCE: bool = true;
    /// The two biased pairs (`x + OFFSET`); the 4 `d_x`.
    type Dec = (__m512i, __m512i, __m128);
    /// The two activation pairs; the 4 `OFFSET Σ y`; the 4 `d_y`.
    type Prep = (__m512i, __m512i, __m128i, __m128);
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let q0 = X::biased_pair(&*w, &*w.add(1));
        let q1 = X::biased_pair(&*w.add(2), &*w.add(3));
        (q0, q1, halves4(w.cast(), size_of::<X>()))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_0) -> Self::Prep {
        let y0 = act_pair(&*a, &*a.add(1));
        let y1 = act_pair(&*a.add(2), &*a.add(3));
        // OFFSET as a u8 (128 for -128).
        let off = _mm512_set1_epi8(X::OFFSET);
        let zero = _mm512_setzero_si512();
        let offsets = block_sums4(
            _mm512_dpbusd_epi32(zero, off, y0),
            _mm512_dpbusd_epi32(zero, off, y1),
        );
        (y0, y1, offsets, halves4(a.cast(), size_of::<BlockQ8_0>()))
    }
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Self::Dec, a: &Self::Prep) -> f32 {
        let zero = _mm512_setzero_si512();
        let v0 = _mm512_dpbusd_epi32(zero, w.0, a.0);
        let v1 = _mm512_dpbusd_epi32(zero, w.1, a.1);
        // Σ (x + OFFSET) y - OFFSET Σ y per block: exact in i32.
        let sums = _mm_sub_epi32(block_sums4(v0, v1), a.2);
        let t = _mm_mul_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(w.2, a.3));
        // The reference's order: block 0, 1, 2, 3.
        let acc = _mm_add_ss(_mm_set_ss(acc), t);
        let acc = _mm_add_ss(acc, _mm_movehdup_ps(t));
        let acc = _mm_add_ss(acc, _mm_movehl_ps(t, t));
        let acc = _mm_add_ss(acc, _mm_shuffle_ps::<0b11_11_11_11>(t, t));
        _mm_cvtss_f32(acc)
    }
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], w: &[X], a: &[BlockQ8_0]) -> f32 {
        symmetric_from(acc[0], w, a)
    }
}

// ---- Tokens in lanes ----

/// One decoded weight block of one row: the quants biased to unsigned (`x + OFFSET`) as 8
/// dwords (4 bytes each, in element order), and `d_x`.
#[derive(Clone, Copy)]
#[repr(C)]
struct RowBlock {
    q: [i32; 8],
    d: f32,
}

/// One activation block of 16 tokens: register `k` holds bytes `4k..4k + 4` of each token
/// (lane = token), `neg` holds `-OFFSET Σ y` (the start that cancels the weights' bias) and
/// `d` the tokens' `d_y`. Lanes past the last token hold `y = 0`, `d_y = 0`.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct ActBlock {
    q: [__m512i; 8],
    neg: __m512i,
    d: __m512,
}

/// Bytes of repacked activations one pass over the rows reads (per thread): each pass
/// decodes the rows again, so the larger the pass the less decoding, while it stays in L2.
const ACT_BYTES: usize = 512 << 10;

thread_local! {
    /// Per-thread scratch for repacked activations.
    static ACTS: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
    /// Per-thread scratch for the decoded blocks of a group of rows.
    static ROWS: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// Repacks token groups `g0..g1` (16 tokens each) of `a` (`nb` blocks per token, `n_tok`
/// tokens) into `dst`, group-major then block order, for weights of type `X`.
///
/// # Safety
/// As for [`gemm`]; `dst` has room for `(g1 - g0) · nb` blocks.
#[inline(always)]
unsafe fn repack<X: Offset>(
    a: &[BlockQ8_0],
    nb: usize,
    n_tok: usize,
    g0: usize,
    g1: usize,
    dst: *mut ActBlock,
) {
    let tok_bytes = (nb * size_of::<BlockQ8_0>()) as i32;
    let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let offsets = _mm512_mullo_epi32(lane, _mm512_set1_epi32(tok_bytes));
    // OFFSET as a u8 (128 for -128).
    let offset = _mm512_set1_epi8(X::OFFSET);
    for g in g0..g1 {
        let live = (n_tok - g * 16).min(16);
        let mask: __mmask16 = ((1u32 << live) - 1) as u16;
        let first = a.as_ptr().add(g * 16 * nb).cast::<u8>();
        for b in 0..nb {
            let block = first.add(b * size_of::<BlockQ8_0>());
            let zero = _mm512_setzero_si512();
            let mut q = [zero; 8];
            let mut sum = zero;
            for (k, q) in q.iter_mut().enumerate() {
                let src = block.add(2 + 4 * k).cast();
                *q = _mm512_mask_i32gather_epi32::<1>(zero, mask, offsets, src);
                sum = _mm512_dpbusd_epi32(sum, offset, *q);
            }
            let halves = _mm512_mask_i32gather_epi32::<1>(zero, mask, offsets, block.cast());
            let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(halves));
            let neg = _mm512_sub_epi32(zero, sum);
            dst.add((g - g0) * nb + b).write(ActBlock { q, neg, d });
        }
    }
}

/// Decodes rows `r0..r0 + R` (a row past `n_rows` repeats the last) of `w` into `dst`,
/// block-major: `dst[b·R + i]` is block `b` of row `r0 + i`.
///
/// # Safety
/// As for [`gemm`]; `dst` has room for `R · nb` blocks.
#[inline(always)]
unsafe fn decode_rows<X: Offset, const R: usize>(
    w: &[X],
    nb: usize,
    n_rows: usize,
    r0: usize,
    dst: *mut RowBlock,
) {
    for i in 0..R {
        let row = w.as_ptr().add((r0 + i).min(n_rows - 1) * nb);
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            let mut q = [0i32; 16];
            let biased = X::biased_pair(&*row.add(b), &*row.add(b1));
            _mm512_storeu_si512(q.as_mut_ptr().cast(), biased);
            let first = dst.add(b * R + i);
            (*first).q.copy_from_slice(&q[..8]);
            (*first).d = block_d(&*row.add(b));
            if b1 != b {
                let second = dst.add(b1 * R + i);
                (*second).q.copy_from_slice(&q[8..]);
                (*second).d = block_d(&*row.add(b1));
            }
            b += 2;
        }
    }
}

/// `R` rows × 16 tokens over every block: the f32 sums, register `i` = row `i`, lane = token.
///
/// # Safety
/// As for [`gemm`]; `rows` holds `R · nb` blocks as [`decode_rows`] writes them, `acts` `nb`.
#[inline(always)]
unsafe fn tile<const R: usize>(
    rows: *const RowBlock,
    acts: *const ActBlock,
    nb: usize,
) -> [__m512; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..nb {
        let act = &*acts.add(b);
        for (i, acc) in acc.iter_mut().enumerate() {
            let row = &*rows.add(b * R + i);
            // Σ (x + OFFSET) y - OFFSET Σ y: exact in i32.
            let mut s = act.neg;
            for k in 0..8 {
                s = _mm512_dpbusd_epi32(s, _mm512_set1_epi32(row.q[k]), act.q[k]);
            }
            let d = _mm512_mul_ps(_mm512_set1_ps(row.d), act.d);
            *acc = add_block(*acc, s, d);
        }
    }
    acc
}

/// Tokens in lanes: passes of at most [`ACT_BYTES`] of repacked token groups; in each pass,
/// groups of `R` rows are decoded once and meet every token group of the pass.
///
/// # Safety
/// As for [`gemm`].
#[inline(always)]
unsafe fn token_lanes<X: Offset + crate::Block, const R: usize>(job: Job<'_>) {
    let w: &[X] = cast_blocks(job.w).expect(CHECKED);
    let a: &[BlockQ8_0] = cast_blocks(job.acts).expect(CHECKED);
    let (n_rows, n_tok, stride) = (job.n_rows, job.n_tok, job.out_stride);
    let nb = w.len() / n_rows;
    let groups = n_tok.div_ceil(16);
    let group_bytes = nb * size_of::<ActBlock>();
    let pass = (ACT_BYTES / group_bytes).clamp(1, groups);
    let line = size_of::<Line>();
    // SAFETY (of using the scratch past the borrow): per thread, touched only here, and this
    // neither recurses nor yields.
    let acts = scratch::<ActBlock>(&ACTS, (pass * group_bytes).div_ceil(line));
    let rows = scratch::<RowBlock>(&ROWS, (R * nb * size_of::<RowBlock>()).div_ceil(line));
    for g0 in (0..groups).step_by(pass) {
        let g1 = (g0 + pass).min(groups);
        repack::<X>(a, nb, n_tok, g0, g1, acts);
        for r0 in (0..n_rows).step_by(R) {
            decode_rows::<X, R>(w, nb, n_rows, r0, rows);
            for g in g0..g1 {
                let sums = tile::<R>(rows, acts.add((g - g0) * nb), nb);
                let live = (n_tok - g * 16).min(16);
                for (i, sum) in sums.into_iter().enumerate().take(n_rows - r0) {
                    store_lanes(sum, live, job.out, g * 16 * stride + r0 + i, stride);
                }
            }
        }
    }
}
