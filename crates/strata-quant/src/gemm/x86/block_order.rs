//! AVX-512 GEMM of the symmetric 32-element formats (Q4_0, Q5_0, Q8_0, IQ4_NL against Q8_0)
//! in their block order: for each (row, token), block after block, the block's exact i32 sum
//! `Σ x y` is converted, multiplied by `d_x · d_y` and added to one f32 sum (the scalar
//! reference's order, `dot/legacy.rs`, which this path's `vec_dot` also follows). Because that
//! order has one f32 chain per (row, token), 16 of them fit the lanes of one register, either
//! way round, and one token streams one row at a time:
//!
//! - **Tokens in lanes** ([`Lanes16`], from 9 tokens: prefill). The
//!   activations are repacked so one register holds 4 bytes of each of 16 tokens; a dword of 4
//!   weight bytes biased to unsigned (`x + OFFSET`, as `vec_dot` takes them), broadcast, meets
//!   them in one `vpdpbusd`, 64 products. Eight of those, in two chains of four (one started
//!   from `-OFFSET Σ y`, made with the repacking) joined by one add, give a block's 16 sums,
//!   and one convert, two multiplies and one add scale them for all 16 tokens: 13
//!   instructions per 512 products, where a per-pair kernel
//!   spends 16 (`vpdpbusd`, multiply, convert, FMA per 64). The same layout as llama.cpp's
//!   `tinyBLAS` VNNI micro-kernels.
//! - **A row pair in lanes** (`block_order_pairs.rs`, 6 to 8 tokens: a routed expert's
//!   tokens in a prefill chunk): lane `2t + s` is row `s` against token `t`, so 8 tokens fill
//!   the register as 16 do above. A **row quad** (lane `4t + s`, 4 tokens a register) takes
//!   9 to 12 tokens and the like, where the last group of 16 would be at most three quarters
//!   full.
//! - **Rows in lanes** ([`row_lanes`], 2 to 5 tokens: several sequences decoding, small
//!   experts). Sixteen rows' two blocks go through one `vpdpbusd` each, as in `vec_dot`, and
//!   their partial sums are transposed and added into one register per block (lane = row),
//!   then scaled as above; each decoded pair serves every token.
//! - **One row at a time** ([`RowChain`], one token: decode). Four blocks a step through the
//!   shared tile loop, so the rows stream from DRAM in the decode row loop's order: 16 rows
//!   side by side lost 10–18 % of Qwen2.5-0.5B's decode speed to the memory system.
//!
//! Integer sums are exact in any order, and each lane does the reference's float operations in
//! the reference's order, so every entry equals `vec_dot` on this path bit for bit
//! (tests/gemm.rs) and, for these formats, the scalar reference too (tests/simd.rs).

use std::arch::x86_64::*;
use std::marker::PhantomData;
use std::mem::size_of;

use super::super::tile::{run, Job, Tile};
use super::block_order_pairs::{Pairs8, Quads4};
use super::row_quad::Quad;
use super::token_lanes::{self, lane_tokens, TokenLanes};
use crate::block::cast_blocks;
use crate::dot::x86::avx2::legacy::{add4_in_order, halves4};
use crate::dot::x86::avx512::legacy::{act_pair, block_d, neg_offset, symmetric_from, Offset};
use crate::dot::x86::prefetch_l2;
use crate::legacy::BlockQ8_0;

/// Tokens from which a job runs with tokens in the lanes: below it the lanes a token group
/// leaves empty cost more than the rows-in-lanes form, which does 16 rows per token.
pub(super) const TOKEN_LANES_MIN: usize = 6;

/// `job` in block order: one row at a time for one token, rows in lanes below
/// [`TOKEN_LANES_MIN`] tokens, a row pair and 8 tokens in the lanes ([`Pairs8`]) to 8 tokens,
/// a row quad and 4 tokens in the lanes ([`Quads4`]) where [`token_lanes::quads_win`], else
/// 16 tokens in the lanes (the tokens after the last whole group of 16 as a few-token job when
/// they are fewer than [`TOKEN_LANES_MIN`]: [`token_lanes::split_tail`]). Always `true` (every
/// entry written).
///
/// Criterion on an Intel Xeon (`expert/…/gemm/avx512`, 512 × 2048, one core, G products/s,
/// eighteenth session), [`Pairs8`] against 16 tokens in the lanes: IQ4_NL 6 tokens 68–71
/// against 52, 8 tokens 89–92 against 69; Q5_0 67–70 against 49, 88–96 against 65. At 4
/// tokens rows in lanes stay ahead (IQ4_NL 59 against 46–48). [`Quads4`] against 16 tokens in
/// the lanes (nineteenth session, two alternating rounds): Q5_0 10 tokens 86–87 against 78,
/// 12 tokens 97–109 against 89–99; IQ4_NL 10 tokens 87–92 against 83–84, 12 tokens
/// 104–110 against 94–101; 20 tokens (against 16 in the lanes and a few-token tail) Q5_0 122–127
/// against 87–92, IQ4_NL 119–123 against 97.
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm<X: Quad + crate::Block>(job: Job<'_>) -> bool {
    if job.n_tok < TOKEN_LANES_MIN {
        few_tokens::<X>(job);
        return true;
    }
    if job.n_tok <= Pairs8::<X>::LANES {
        token_lanes::run::<Pairs8<X>, 8>(job);
        return true;
    }
    if token_lanes::quads_win(job.n_tok) {
        token_lanes::run::<Quads4<X>, QUADS_R>(job);
        return true;
    }
    let (lanes, tail) = token_lanes::split_tail(job, 16, 1..TOKEN_LANES_MIN);
    token_lanes::run::<Lanes16<X>, 8>(lanes);
    if let Some(tail) = tail {
        few_tokens::<X>(tail);
    }
    true
}

/// 1 to [`TOKEN_LANES_MIN`]` - 1` tokens: one row at a time for one token, rows in lanes for
/// more. Every entry written.
///
/// # Safety
/// As for [`gemm`].
#[inline(always)]
unsafe fn few_tokens<X: Quad + crate::Block>(job: Job<'_>) {
    if job.n_tok == 1 {
        let written = run::<RowChain<X>, 4, 1>(job);
        assert!(written, "RowChain takes one token");
    } else {
        row_lanes::<X>(job);
    }
}

/// Row quads per decoded group ([`Quads4`]): 16 rows' blocks of a 2560-wide row stay in L1
/// (8 quads measured no faster).
const QUADS_R: usize = 4;

const CHECKED: &str = "gemm checked the lengths";

/// The 16 f16 scales found `offsets` bytes past `base` (4 readable bytes at each), as f32.
#[inline(always)]
unsafe fn gather_d(base: *const u8, offsets: __m512i) -> __m512 {
    let halves = _mm512_i32gather_epi32::<1>(offsets, base.cast());
    _mm512_cvtph_ps(_mm512_cvtepi32_epi16(halves))
}

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

// ---- Rows in lanes ----

/// Block sums of 16 rows from their pair partial sums (`v[i]`: row `i`, lanes 0..8 block `a`,
/// 8..16 block `b`): (block `a`, block `b`), lane `i` = row `i`. Exact (i32 adds).
#[inline(always)]
unsafe fn transpose_sums(v: &[__m512i; 16]) -> (__m512i, __m512i) {
    // Row pairs: each 128-bit chunk [r0 d0+d2, r1 d0+d2, r0 d1+d3, r1 d1+d3].
    let mut u = [_mm512_setzero_si512(); 8];
    for p in 0..8 {
        let (x, y) = (v[2 * p], v[2 * p + 1]);
        u[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
    }
    // Row quads: each 128-bit chunk holds the chunk sums of 4 rows.
    let mut w = [_mm512_setzero_si512(); 4];
    for q in 0..4 {
        let (x, y) = (u[2 * q], u[2 * q + 1]);
        w[q] = _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y));
    }
    // Chunks 0, 1 are block a's halves, 2, 3 block b's: [a 0-3, b 0-3, a 4-7, b 4-7], ...
    let (s01, s23) = (halves(w[0], w[1]), halves(w[2], w[3]));
    (
        _mm512_shuffle_i32x4::<0b10_00_10_00>(s01, s23),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(s01, s23),
    )
}

/// Chunks `[x0 + x1, x2 + x3, y0 + y1, y2 + y3]` of 128-bit chunks `x0..x3`, `y0..y3`.
#[inline(always)]
unsafe fn halves(x: __m512i, y: __m512i) -> __m512i {
    _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(x, y),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(x, y),
    )
}

/// Rows in lanes: 16 rows at a time (the last group repeats its last row in the unused
/// lanes), up to [`ROW_LANES_TOKENS`] tokens at a time: each pair of blocks of the 16 rows is
/// decoded once, with their scales, and meets every token of the group.
///
/// # Safety
/// As for [`gemm`].
#[inline(always)]
unsafe fn row_lanes<X: Offset + crate::Block>(mut job: Job<'_>) {
    let mut t = 0;
    while t < job.n_tok {
        // No closures: they would not inherit the caller's target features.
        match job.n_tok - t {
            1 => row_lanes_tokens::<X, 1>(&mut job, t),
            2 => row_lanes_tokens::<X, 2>(&mut job, t),
            3 => row_lanes_tokens::<X, 3>(&mut job, t),
            _ => row_lanes_tokens::<X, 4>(&mut job, t),
        }
        t += ROW_LANES_TOKENS;
    }
}

/// Most tokens [`row_lanes`] applies one decoded pair of blocks to.
const ROW_LANES_TOKENS: usize = 4;

/// [`row_lanes`] for tokens `t0..t0 + T`, writing through `job.out`.
///
/// # Safety
/// As for [`gemm`]; `t0 + T <= job.n_tok`.
#[inline(always)]
unsafe fn row_lanes_tokens<X: Offset + crate::Block, const T: usize>(job: &mut Job<'_>, t0: usize) {
    let (w_bytes, a) = (job.w, job.acts);
    let w: &[X] = cast_blocks(w_bytes).expect(CHECKED);
    let a: &[BlockQ8_0] = cast_blocks(a).expect(CHECKED);
    let (n_rows, stride) = (job.n_rows, job.out_stride);
    let nb = w.len() / n_rows;
    let row_bytes = nb * size_of::<X>();
    for r0 in (0..n_rows).step_by(16) {
        let live = (n_rows - r0).min(16);
        let mut rows = [w.as_ptr(); 16];
        let mut offsets = [0i32; 16];
        for i in 0..16 {
            let r = (r0 + i).min(n_rows - 1);
            rows[i] = w.as_ptr().add(r * nb);
            offsets[i] = ((r - r0) * row_bytes) as i32;
        }
        let offsets = _mm512_loadu_si512(offsets.as_ptr().cast());
        let base = w.as_ptr().add(r0 * nb).cast::<u8>();
        let mut acc = [_mm512_setzero_ps(); T];
        // The next group's bytes, a share at each pair step, into L2: a few tokens read every
        // weight from DRAM once, and 16 rows read side by side defeat the hardware prefetchers'
        // streams. (Measured with this form serving one token, Qwen2.5-0.5B decode: 34.9 tok/s
        // into L2, 31.9 into L1, where the requests queue behind the few fill buffers; 25.4
        // without.)
        let (next, next_end) = (
            (r0 + 16) * row_bytes,
            ((r0 + 32) * row_bytes).min(w_bytes.len()),
        );
        let share = (next_end.saturating_sub(next))
            .div_ceil(nb.div_ceil(2))
            .next_multiple_of(64);
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            let from = next + b / 2 * share;
            prefetch_l2(w_bytes, from, (from + share).min(next_end));
            let mut x = [_mm512_setzero_si512(); 16];
            for i in 0..16 {
                x[i] = X::biased_pair(&*rows[i].add(b), &*rows[i].add(b1));
            }
            let da = gather_d(base.add(b * size_of::<X>()), offsets);
            let db = gather_d(base.add(b1 * size_of::<X>()), offsets);
            for (j, acc) in acc.iter_mut().enumerate() {
                let y = &a[(t0 + j) * nb..(t0 + j + 1) * nb];
                let yv = act_pair(&y[b], &y[b1]);
                let neg = neg_offset::<X>(yv);
                let mut v = [_mm512_setzero_si512(); 16];
                for i in 0..16 {
                    v[i] = _mm512_dpbusd_epi32(neg, x[i], yv);
                }
                let (sa, sb) = transpose_sums(&v);
                *acc = add_block(*acc, sa, _mm512_mul_ps(da, _mm512_set1_ps(block_d(&y[b]))));
                if b1 != b {
                    let dy = _mm512_set1_ps(block_d(&y[b1]));
                    *acc = add_block(*acc, sb, _mm512_mul_ps(db, dy));
                }
            }
            b += 2;
        }
        for (j, acc) in acc.into_iter().enumerate() {
            store_lanes(acc, live, job.out, (t0 + j) * stride + r0, 1);
        }
    }
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

/// The symmetric formats one row at a time, 4 blocks a step, through the shared tile loop
/// (`tile.rs`): for one token (decode), whose rows then stream by in the order the decode row
/// loop reads them. A step takes the 4 blocks' exact sums (two `vpdpbusd` on the blocks in
/// [`Quad`]'s order, then their reduction), scales them in the lanes and adds the 4 products
/// to the (row, token) sum in block order.
pub(super) struct RowChain<X>(PhantomData<X>);

impl<X: Quad + crate::Block> Tile for RowChain<X> {
    type W = X;
    type A = BlockQ8_0;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    /// The preparation (two `vpdpbusd` and a reduction for `OFFSET Σ y`) costs about a step.
    const PREP_ONCE: bool = true;
    /// The biased quants (`x + OFFSET`) of the 4 blocks in [`Quad`]'s order; the 4 `d_x`.
    type Dec = (__m512i, __m512i, __m128);
    /// The activations in the same order; the 4 `OFFSET Σ y`; the 4 `d_y`.
    type Prep = (__m512i, __m512i, __m128i, __m128);
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        X::biased_quad(w)
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_0) -> Self::Prep {
        // OFFSET as a u8 (128 for -128).
        let off = _mm512_set1_epi8(X::OFFSET);
        let zero = _mm512_setzero_si512();
        let dy = halves4(a.cast(), size_of::<BlockQ8_0>());
        if X::CHUNK_ORDER {
            let (lo, hi) = acts_chunk_order(a);
            let o = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, off, lo), off, hi);
            return (lo, hi, chunk_sums4(o), dy);
        }
        let y0 = act_pair(&*a, &*a.add(1));
        let y1 = act_pair(&*a.add(2), &*a.add(3));
        let offsets = block_sums4(
            _mm512_dpbusd_epi32(zero, off, y0),
            _mm512_dpbusd_epi32(zero, off, y1),
        );
        (y0, y1, offsets, dy)
    }
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Self::Dec, a: &Self::Prep) -> f32 {
        let zero = _mm512_setzero_si512();
        let sums = if X::CHUNK_ORDER {
            let v = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, w.0, a.0), w.1, a.1);
            chunk_sums4(v)
        } else {
            let v0 = _mm512_dpbusd_epi32(zero, w.0, a.0);
            let v1 = _mm512_dpbusd_epi32(zero, w.1, a.1);
            block_sums4(v0, v1)
        };
        // Σ (x + OFFSET) y - OFFSET Σ y per block: exact in i32.
        let sums = _mm_sub_epi32(sums, a.2);
        let t = _mm_mul_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(w.2, a.3));
        // The reference's order: block 0, 1, 2, 3.
        add4_in_order(acc, t)
    }
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], w: &[X], a: &[BlockQ8_0]) -> f32 {
        symmetric_from(acc[0], w, a)
    }
}

/// The activations of 4 blocks at `a` in chunk order ([`Quad`]): chunk k of the first
/// register holds bytes 0..16 of block k, of the second bytes 16..32.
#[inline(always)]
unsafe fn acts_chunk_order(a: *const BlockQ8_0) -> (__m512i, __m512i) {
    let mut lo = _mm512_castsi128_si512(half(a, 0, 0));
    let mut hi = _mm512_castsi128_si512(half(a, 0, 16));
    lo = _mm512_inserti32x4::<1>(lo, half(a, 1, 0));
    hi = _mm512_inserti32x4::<1>(hi, half(a, 1, 16));
    lo = _mm512_inserti32x4::<2>(lo, half(a, 2, 0));
    hi = _mm512_inserti32x4::<2>(hi, half(a, 2, 16));
    lo = _mm512_inserti32x4::<3>(lo, half(a, 3, 0));
    hi = _mm512_inserti32x4::<3>(hi, half(a, 3, 16));
    (lo, hi)
}

/// Bytes `at..at + 16` of the quants of block `k` at `a`.
#[inline(always)]
unsafe fn half(a: *const BlockQ8_0, k: usize, at: usize) -> __m128i {
    _mm_loadu_si128((*a.add(k)).qs.as_ptr().add(at).cast())
}

/// The sums of the four 128-bit chunks of `v` (exact), chunk k in lane k.
#[inline(always)]
unsafe fn chunk_sums4(v: __m512i) -> __m128i {
    let v = _mm512_add_epi32(v, _mm512_shuffle_epi32::<0b01_00_11_10>(v));
    let v = _mm512_add_epi32(v, _mm512_shuffle_epi32::<0b10_11_00_01>(v));
    let lane0 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_castsi512_si128(_mm512_permutexvar_epi32(lane0, v))
}

// ---- Tokens in lanes ----

/// One decoded weight block of one row: the quants biased to unsigned (`x + OFFSET`) as 8
/// dwords (4 bytes each, in element order), and `d_x`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct RowBlock {
    q: [i32; 8],
    d: f32,
}

/// One activation block of 16 tokens: register `k` holds bytes `4k..4k + 4` of each token
/// (lane = token), `neg` holds `-OFFSET Σ y` (the start that cancels the weights' bias) and
/// `d` the tokens' `d_y`. Lanes past the last token hold `y = 0`, `d_y = 0`.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct ActBlock {
    q: [__m512i; 8],
    neg: __m512i,
    d: __m512,
}

/// The symmetric formats with 16 tokens in the lanes (run by `token_lanes.rs`).
pub(super) struct Lanes16<X>(PhantomData<X>);

impl<X: Offset + crate::Block> TokenLanes for Lanes16<X> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = RowBlock;
    type ActBlock = ActBlock;
    type Sums = __m512;
    const LANES: usize = 16;
    const ACT_BYTES: usize = 512 << 10;

    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_0],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock,
    ) {
        repack16::<X>(a, nb, n_tok, g0, g1, dst, 1)
    }

    /// Two blocks at a time, as `vec_dot` decodes them.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut RowBlock, stride: usize) {
        let row = rows[0];
        let nb = row.len();
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            let mut q = [0i32; 16];
            let biased = X::biased_pair(&row[b], &row[b1]);
            _mm512_storeu_si512(q.as_mut_ptr().cast(), biased);
            let first = dst.add(b * stride);
            (*first).q.copy_from_slice(&q[..8]);
            (*first).d = block_d(&row[b]);
            if b1 != b {
                let second = dst.add(b1 * stride);
                (*second).q.copy_from_slice(&q[8..]);
                (*second).d = block_d(&row[b1]);
            }
            b += 2;
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const RowBlock,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<RowBlock, R>(rows, acts, nb)
    }
}

/// A decoded weight block as the tile's registers take it: each value spread over its row's
/// lanes (every lane for a [`RowBlock`], every `S`-th lane for each row
/// of a [`super::block_order_pairs::SideBlock`]).
pub(super) trait Spread {
    /// Dword `k` of the biased quants.
    unsafe fn q(&self, k: usize) -> __m512i;
    /// `d_x`.
    unsafe fn d(&self) -> __m512;
}

impl Spread for RowBlock {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        _mm512_set1_epi32(self.q[k])
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        _mm512_set1_ps(self.d)
    }
}

/// `R` decoded row blocks × one group of tokens over `nb` blocks: per (row, block) eight
/// `vpdpbusd`, four from `neg` and four from zero, then the block's term for the lanes. Each
/// activation register is loaded once for the `R` rows, and a row's even and odd dwords go in
/// two chains (the sums are exact in i32, so in any order): with `vpdpbusd`'s 5 cycles of
/// latency and two issued a cycle (Intel Sapphire Rapids, uops.info), `R` chains of eight
/// would leave the ports idle. Criterion on Intel Xeon family 6 model 207
/// (`expert/*/gemm/avx512`, 512 × 2048, one core, G products/s, two rounds), a row's eight
/// in one chain → this: IQ4_NL 6 tokens 63–64 → 68–70, 10 tokens 72–73 → 73–76, 64 tokens
/// 167–171 → 186–190; Q5_0 16 tokens 147–148 → 158, 64 tokens 194–201 → 218; Q8_0 64 tokens
/// 197 → 214–216.
///
/// # Safety
/// As for [`gemm`]; `rows` holds `R · nb` blocks, `acts` `nb`.
#[inline(always)]
pub(super) unsafe fn lanes_tile<B: Spread, const R: usize>(
    rows: *const B,
    acts: *const ActBlock,
    nb: usize,
) -> [__m512; R] {
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..nb {
        let act = &*acts.add(b);
        let row = rows.add(b * R);
        // Σ (x + OFFSET) y - OFFSET Σ y: exact in i32.
        let mut s = [act.neg; R];
        let mut odd = [_mm512_setzero_si512(); R];
        for k in (0..8).step_by(2) {
            let (y, y_odd) = (act.q[k], act.q[k + 1]);
            for (i, s) in s.iter_mut().enumerate() {
                *s = _mm512_dpbusd_epi32(*s, (*row.add(i)).q(k), y);
            }
            for (i, odd) in odd.iter_mut().enumerate() {
                *odd = _mm512_dpbusd_epi32(*odd, (*row.add(i)).q(k + 1), y_odd);
            }
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            let d = _mm512_mul_ps((*row.add(i)).d(), act.d);
            *acc = add_block(*acc, _mm512_add_epi32(s[i], odd[i]), d);
        }
    }
    acc
}

/// Token groups `g0..g1` of `a` (`nb` blocks a token, `n_tok` tokens) into `dst`, each token
/// in `side` adjacent lanes (1: 16 tokens a group; 2: 8, one lane for each row of a pair; 4: 4,
/// one lane for each row of a quad):
/// 4 bytes of each token a register, gathered; `neg` from the same registers. Lanes past the
/// last token hold zeros.
///
/// # Safety
/// As for [`gemm`]; `dst` has room for `(g1 - g0) · nb` blocks.
#[inline(always)]
pub(super) unsafe fn repack16<X: Offset>(
    a: &[BlockQ8_0],
    nb: usize,
    n_tok: usize,
    g0: usize,
    g1: usize,
    dst: *mut ActBlock,
    side: usize,
) {
    let per_group = 16 / side;
    let tok_bytes = (nb * size_of::<BlockQ8_0>()) as i32;
    let offsets = _mm512_mullo_epi32(lane_tokens(side), _mm512_set1_epi32(tok_bytes));
    // OFFSET as a u8 (128 for -128).
    let offset = _mm512_set1_epi8(X::OFFSET);
    for g in g0..g1 {
        let live = (n_tok - g * per_group).min(per_group) * side;
        let mask: __mmask16 = ((1u32 << live) - 1) as u16;
        let first = a.as_ptr().add(g * per_group * nb).cast::<u8>();
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
