//! AVX2 and AVX-VNNI GEMM of the symmetric 32-element formats (Q4_0, Q5_0, Q8_0, IQ4_NL
//! against Q8_0) in their block order: for each (row, token), block after block, the block's
//! exact i32 sum `Σ x y` is converted, multiplied by `d_x · d_y` and added to one f32 sum (the
//! scalar reference's order, `dot/legacy.rs`, which this path's `vec_dot` also follows). The
//! 256-bit form of `block_order.rs` (AVX-512), with 8 lanes:
//!
//! - **Tokens in lanes** ([`Lanes8`], from 4 or 6 tokens ([`token_lanes_min`]): prefill). The
//!   activations are repacked (an 8 × 8 transpose of dwords) so one register holds 4 bytes of
//!   each of 8 tokens; a row's block is decoded once to 8 dwords of 4 weight bytes, each
//!   broadcast against one such register. Per (row, block), 256 products for 8 tokens:
//!   - biased weights (`x + OFFSET`, unsigned), from `-OFFSET Σ y` (made with the repacking):
//!     with VNNI 8 `vpdpbusd` in two chains of four joined by one add; on plain AVX2 8
//!     `vpmaddubsw` whose 16-bit pair sums are added
//!     in 16 bits while exact (8 registers for Q4_0, 4 for Q5_0) before one `vpmaddwd`;
//!   - on plain AVX2, Q8_0 and IQ4_NL (whose biased pairs would saturate 16 bits): the sign
//!     trick, `|x|` against `y` with `x`'s sign, `vpsignb` + `vpmaddubsw` + `vpmaddwd` + add
//!     per register;
//!
//!   then one convert, two multiplies and one add for the 8 tokens' terms. A per-pair kernel
//!   converts, scales and adds for every (row, token) block.
//! - **Row pairs in the lanes** ([`Pairs4`], plain AVX2, where the last group of 8 tokens
//!   would hold 2 to 4: [`pairs_win`]). Lane `2t + s` holds row `s` of a pair against token
//!   `t`, so 4 tokens fill a register: dword `k` of a decoded block is stored as the two
//!   rows' dwords side by side (one qword, one broadcast load) and each token fills two
//!   adjacent lanes. A routed expert in a prefill chunk meets about 10 tokens (512 tokens,
//!   10 of 512 experts): as pairs, 12 `vpmaddubsw` per row and block where the biased form's
//!   two groups of 8 took 16 (the sign form ran its 2 last tokens one row at a time).
//!   Everything else is the tokens-in-lanes form's, lane for lane.
//! - **One row at a time** ([`RowChain`], fewer tokens: decode, small experts). Four blocks a
//!   step, through the shared tile loop: the blocks' exact sums as `vec_dot` makes them, reduced
//!   into one register (block `k` in lane `k`), scaled in the lanes and added in block order.
//!
//! Integer sums are exact in any order, and each lane does the reference's float operations in
//! the reference's order, so every entry equals `vec_dot` on this path bit for bit
//! (tests/gemm.rs) and the scalar reference too (tests/simd.rs).

use std::arch::x86_64::*;
use std::marker::PhantomData;
use std::mem::size_of;

use super::super::tile::{run, Job, Tile};
use super::token_lanes::{self, TokenLanes};
use crate::dot::x86::avx2::legacy::{
    add4_in_order, block_d, block_sums4, halves4, symmetric_from, terms4, Signed,
};
use crate::dot::x86::{block_ptr, IntDot};
use crate::legacy::BlockQ8_0;

/// Tokens from which a job runs with tokens in the lanes; below it one row at a time. The
/// sign form's tile costs more per (row, block) than the biased form's, so it waits for more
/// of its 8 lanes to be used.
const fn token_lanes_min<X: Signed, M: IntDot>() -> usize {
    if biased_form::<X, M>() {
        4
    } else {
        6
    }
}

/// Tokens after the last whole group of 8 that run one row at a time rather than as a last,
/// partial group in the lanes. A row's decoded blocks meet every group (`token_lanes::run`),
/// so a partial group costs only its products: in the biased form that beats one row at a
/// time from 2 tokens, in the costlier sign form only from [`token_lanes_min`]. Criterion on
/// an Intel Xeon (one core, `expert/*/gemm/*/10`, 512 × 2048, G products/s; seventeenth
/// session, BENCHMARKS.md), the 2-token tail one row at a time → in the lanes: AVX-VNNI Q5_0
/// 55.9, 54.4 → 66.0, 66.9, Q8_0 67.6, 58.7 → 72.7, 71.6, IQ4_NL 62.4, 62.6 → 73.4, 72.0;
/// plain AVX2 Q5_0 49.2, 49.1 → 54.7, 56.3, but the sign form's Q8_0 45.4, 44.2 → 37.8, 37.2.
const fn tails_max<X: Signed, M: IntDot>() -> usize {
    if biased_form::<X, M>() {
        1
    } else {
        token_lanes_min::<X, M>() - 1
    }
}

/// `job` in block order: on plain AVX2 row pairs where [`pairs_win`]; else one row at a time
/// below [`token_lanes_min`] tokens, tokens in lanes from there (the tokens after the last
/// whole group of 8 one row at a time too when they are at most [`tails_max`]:
/// [`token_lanes::split_tail`]). `true`: every entry written (one token included).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm<X: Signed + crate::Block, M: IntDot>(job: Job<'_>) -> bool {
    if M::SATURATES && pairs_win(job.n_tok) {
        token_lanes::run::<Pairs4<X, M>, 4>(job);
        return true;
    }
    let min = token_lanes_min::<X, M>();
    if job.n_tok < min {
        return run::<RowChain<X, M>, 1, 4>(job);
    }
    let (lanes, tail) = token_lanes::split_tail(job, 8, 1..tails_max::<X, M>() + 1);
    token_lanes::run::<Lanes8<X, M>, 4>(lanes);
    if let Some(tail) = tail {
        let written = run::<RowChain<X, M>, 1, 4>(tail);
        assert!(written, "RowChain takes one token too");
    }
    true
}

/// Whether a job of `n_tok` tokens runs wholly as row pairs ([`Pairs4`], 4 tokens a register)
/// on plain AVX2: from 3 tokens, where the last group of 8 tokens in the lanes would hold 2 to
/// 4 of them.
///
/// For the biased form (Q4_0, Q5_0): a register of the tile costs about the same in either
/// form, and a row pair's decoding a little more than one row's (criterion, Zen 3,
/// `expert/Q5_0/gemm/avx2`, 512 × 2048: about 1.3 ns a row and block for 8 tokens in the
/// lanes, 1.65 for row pairs, against 3.3 for a register of the tile). So for `n` tokens the
/// lanes cost about 0.4 + ⌈n/8⌉ registers a row and block, the pairs 0.5 + ⌈n/4⌉ / 2: the
/// pairs win where the last group of 8 holds 2 to 4 tokens (10 tokens: 2.0 against 2.4), the
/// lanes where it holds 5 to 8; a tail of one token stays one row at a time. The sign form
/// (Q8_0, IQ4_NL), which ran tails of up to 5 tokens one row at a time, rests on its
/// measured rows instead (4, 10, 12 and 20 tokens: BENCHMARKS.md, thirty-fifth session).
/// Jobs of 3 tokens (no benchmark row) follow the 4-token rows. Jobs of 2 tokens stay one
/// row at a time (criterion: row quads there, 2 tokens a register, were 18 % faster for
/// Q5_0 and 13 % slower for IQ4_NL; quads were not kept). Not measured with VNNI, which
/// keeps the lanes.
const fn pairs_win(n_tok: usize) -> bool {
    n_tok >= 3 && matches!(n_tok % 8, 2..=4)
}

// ---- One row at a time ----

/// The symmetric formats one row at a time, 4 blocks a step (`vec_dot`'s step, cut for the
/// shared tile loop of `tile.rs`). Where [`row_biased`] holds, the weights go in biased
/// (`x + OFFSET`, unsigned, straight into `vpdpbusd` or `vpmaddubsw`) and the token's
/// `-OFFSET Σ y` per block, made once with the activations, is added to the 4 blocks' sums: no
/// sign flips per (row, block). Otherwise the sign trick, `|x|` against `y` with `x`'s signs.
/// Either way each block's i32 sum is exact, so the bits are `vec_dot`'s.
pub(super) struct RowChain<X, M>(PhantomData<(X, M)>);

impl<X: Signed + crate::Block, M: IntDot> Tile for RowChain<X, M> {
    type W = X;
    type A = BlockQ8_0;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    /// One token runs through the tile loop too, its activations read once for all rows.
    const PREP_ONCE: bool = true;
    /// Biased quants, or `|x|` and `x` (for its signs), of the 4 blocks; the 4 `d_x`.
    type Dec = ([__m256i; 4], [__m256i; 4], __m128);
    /// The 4 blocks' quants; where biased, each block's `-OFFSET Σ y` (block `k` in lane `k`,
    /// as [`block_sums4`] leaves the sums), else zeros; the 4 `d_y`.
    type Prep = ([__m256i; 4], __m128i, __m128);
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let mut q = [_mm256_setzero_si256(); 4];
        let mut signs = [_mm256_setzero_si256(); 4];
        for k in 0..4 {
            if row_biased::<X, M>() {
                q[k] = (*w.add(k)).biased();
            } else {
                signs[k] = (*w.add(k)).quants();
                q[k] = _mm256_sign_epi8(signs[k], signs[k]);
            }
        }
        (q, signs, halves4(w.cast(), size_of::<X>()))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_0) -> Self::Prep {
        let zero = _mm256_setzero_si256();
        let mut y = [zero; 4];
        for (k, y) in y.iter_mut().enumerate() {
            *y = _mm256_loadu_si256((*a.add(k)).qs.as_ptr().cast());
        }
        let neg = if row_biased::<X, M>() {
            // OFFSET as a u8 (128 for -128) against each block of y: OFFSET Σ y. A loop, not
            // `map`: a closure would not inherit the caller's target features.
            let mut offset = [zero; 4];
            for k in 0..4 {
                offset[k] = M::dot_u8i8(zero, _mm256_set1_epi8(X::OFFSET), y[k]);
            }
            _mm_sub_epi32(_mm_setzero_si128(), block_sums4(offset))
        } else {
            _mm_setzero_si128()
        };
        (y, neg, halves4(a.cast(), size_of::<BlockQ8_0>()))
    }
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Self::Dec, a: &Self::Prep) -> f32 {
        let zero = _mm256_setzero_si256();
        let mut v = [zero; 4];
        for (k, v) in v.iter_mut().enumerate() {
            let y = if row_biased::<X, M>() {
                a.0[k]
            } else {
                _mm256_sign_epi8(a.0[k], w.1[k])
            };
            *v = M::dot_u8i8(zero, w.0[k], y);
        }
        let sums = if row_biased::<X, M>() {
            _mm_add_epi32(block_sums4(v), a.1)
        } else {
            block_sums4(v)
        };
        // The reference's order: block 0, 1, 2, 3.
        add4_in_order(acc, terms4(sums, w.2, a.2))
    }
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], w: &[X], a: &[BlockQ8_0]) -> f32 {
        symmetric_from::<X, M>(acc[0], w, a)
    }
}

// ---- Tokens in lanes ----

/// Whether `X` runs the biased form on `M` (else the sign trick): always with VNNI; on plain
/// AVX2 while biased pair sums fit 16 bits.
const fn biased_form<X: Signed, M: IntDot>() -> bool {
    !M::SATURATES || X::BIASED_MAX <= 31
}

/// Whether [`RowChain`] runs the biased form: where it is exact and its weights cost no more
/// than the sign form's (Q4_0, Q5_0; IQ4_NL with VNNI). Q8_0's bias would be one more add
/// per register for one fewer sign flip, which criterion (Zen 5, `decode_cached/Q8_0`) found
/// no faster.
const fn row_biased<X: Signed, M: IntDot>() -> bool {
    biased_form::<X, M>() && X::BIASED_AS_CHEAP
}

/// Registers of `vpmaddubsw` pair sums of biased weights that plain AVX2 adds in 16 bits
/// before widening: `n · 2 · BIASED_MAX · 128 ≤ 32767`.
const fn i16_group(biased_max: u8) -> usize {
    if biased_max <= 15 {
        8
    } else {
        4
    }
}

/// One decoded weight block of `S` rows side by side (1: one row; 2: a pair): the
/// 8 dwords of 4 weight bytes each (in element order), biased (`x + OFFSET`) or, for the sign
/// form, `|x|` with `x` in `signs`; and `d_x`. Each field holds its value for the `S` rows
/// next to each other, so one broadcast load ([`spread`]) gives lanes `[row 0, …, row S-1,
/// row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct SideBlock<const S: usize> {
    q: [[i32; S]; 8],
    signs: [[i32; S]; 8],
    d: [f32; S],
}

// Safety of the three: AVX2 is available (`S` is 1 or 2, as for [`spread`]).
impl<const S: usize> SideBlock<S> {
    /// Dword `k` of the `S` rows in every group of `S` lanes.
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m256i {
        spread::<S>(self.q[k].as_ptr())
    }
    /// The sign form's `x` of dword `k`, as [`SideBlock::q`].
    #[inline(always)]
    unsafe fn signs(&self, k: usize) -> __m256i {
        spread::<S>(self.signs[k].as_ptr())
    }
    /// `d_x` of the `S` rows, as [`SideBlock::q`].
    #[inline(always)]
    unsafe fn d(&self) -> __m256 {
        _mm256_castsi256_ps(spread::<S>(self.d.as_ptr().cast()))
    }
}

/// The `S` dwords at `v` in every group of `S` lanes (lane `l` = `v[l mod S]`): one broadcast
/// load.
///
/// # Safety
/// AVX2 is available; `v` points at `S` readable dwords; `S` is 1 or 2.
#[inline(always)]
unsafe fn spread<const S: usize>(v: *const i32) -> __m256i {
    match S {
        1 => _mm256_set1_epi32(v.read()),
        2 => _mm256_set1_epi64x(v.cast::<i64>().read_unaligned()),
        _ => unreachable!("one row or a pair"),
    }
}

/// Stores the 8 dwords of each of `S` rows' registers (`x[s]`: row `s`) at `dst` with the `S`
/// rows' dword `k` side by side (`dst[k][s]`), as [`SideBlock`] holds them.
///
/// # Safety
/// AVX2 is available; `dst` has room for `8 · S` dwords; `S` is 1 or 2.
#[inline(always)]
unsafe fn store_sides<const S: usize>(x: &[__m256i; S], dst: *mut [i32; S]) {
    let out = dst.cast::<__m256i>();
    match S {
        1 => _mm256_storeu_si256(out, x[0]),
        2 => {
            // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | a6 b6 a7 b7].
            let lo = _mm256_unpacklo_epi32(x[0], x[1]);
            let hi = _mm256_unpackhi_epi32(x[0], x[1]);
            _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(lo, hi));
            _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(lo, hi));
        }
        _ => unreachable!("one row or a pair"),
    }
}

/// One activation block of 8 lanes: register `k` holds bytes `4k..4k + 4` of each token
/// (lane `t · S + s` = token `t` for [`Sides`] of `S` rows), `neg` holds `-OFFSET Σ y`
/// (the start that cancels the weights' bias) and `d` the tokens' `d_y`. Lanes past the last
/// token hold `y = 0`, `d_y = 0`.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct ActBlock {
    q: [__m256i; 8],
    neg: __m256i,
    d: __m256,
}

/// `[r0[k], .., r7[k]]` for each dword `k` of the 8 registers `r` (an 8 × 8 transpose).
#[inline(always)]
pub(super) unsafe fn transpose8(r: &[__m256i; 8]) -> [__m256i; 8] {
    let mut s = [_mm256_setzero_si256(); 8];
    for p in 0..4 {
        // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | a6 b6 a7 b7] of rows a, b.
        s[2 * p] = _mm256_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
        s[2 * p + 1] = _mm256_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
    }
    let mut u = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        // Rows 4h..4h + 4: dwords (0 | 4), (1 | 5), (2 | 6), (3 | 7).
        let (s0, s1, s2, s3) = (s[4 * h], s[4 * h + 1], s[4 * h + 2], s[4 * h + 3]);
        u[4 * h] = _mm256_unpacklo_epi64(s0, s2);
        u[4 * h + 1] = _mm256_unpackhi_epi64(s0, s2);
        u[4 * h + 2] = _mm256_unpacklo_epi64(s1, s3);
        u[4 * h + 3] = _mm256_unpackhi_epi64(s1, s3);
    }
    let mut out = [_mm256_setzero_si256(); 8];
    for k in 0..4 {
        out[k] = _mm256_permute2x128_si256::<0x20>(u[k], u[4 + k]);
        out[k + 4] = _mm256_permute2x128_si256::<0x31>(u[k], u[4 + k]);
    }
    out
}

/// The symmetric formats with `S` rows side by side and `8 / S` tokens in the lanes (lane
/// `t · S + s`: row `s` against token `t`; run by `token_lanes.rs`).
pub(super) struct Sides<X, M, const S: usize>(PhantomData<(X, M)>);

/// 8 tokens in the lanes, one row a register: prefill.
pub(super) type Lanes8<X, M> = Sides<X, M, 1>;

/// A row pair and 4 tokens a register ([`pairs_win`]).
pub(super) type Pairs4<X, M> = Sides<X, M, 2>;

impl<X: Signed + crate::Block, M: IntDot, const S: usize> TokenLanes for Sides<X, M, S> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = SideBlock<S>;
    type ActBlock = ActBlock;
    type Sums = __m256;
    const LANES: usize = 8 / S;
    const ROWS: usize = S;
    /// Within L2 (512 KiB on Zen 3, more on Intel client cores).
    const ACT_BYTES: usize = 256 << 10;

    /// Loads and transposes 8 / `S` tokens' blocks, each in `S` adjacent lanes (no gathers:
    /// they are slow on AVX2-only CPUs).
    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_0],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock,
    ) {
        // OFFSET as a u8 (128 for -128).
        let offset = _mm256_set1_epi8(X::OFFSET);
        let zero = _mm256_setzero_si256();
        let lanes = Self::LANES;
        for g in g0..g1 {
            let live = (n_tok - g * lanes).min(lanes);
            for b in 0..nb {
                let mut rows = [zero; 8];
                let mut halves = [0u16; 8];
                for t in 0..live {
                    let block = &a[(g * lanes + t) * nb + b];
                    let q = _mm256_loadu_si256(block.qs.as_ptr().cast());
                    let half = block_ptr(block).cast::<u16>().read_unaligned();
                    for s in 0..S {
                        rows[t * S + s] = q;
                        halves[t * S + s] = half;
                    }
                }
                let q = transpose8(&rows);
                let mut sum = zero;
                for q in &q {
                    sum = M::dot_u8i8(sum, offset, *q);
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(halves.as_ptr().cast()));
                let neg = _mm256_sub_epi32(zero, sum);
                dst.add((g - g0) * nb + b).write(ActBlock { q, neg, d });
            }
        }
    }

    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `b` indexes every row of the group
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut SideBlock<S>, stride: usize) {
        let zero = _mm256_setzero_si256();
        for b in 0..rows[0].len() {
            let out = &mut *dst.add(b * stride);
            let mut q = [zero; S];
            let mut signs = [zero; S];
            for s in 0..S {
                let x = &rows[s][b];
                if biased_form::<X, M>() {
                    q[s] = x.biased();
                } else {
                    signs[s] = x.quants();
                    q[s] = _mm256_sign_epi8(signs[s], signs[s]);
                }
                out.d[s] = block_d(x);
            }
            store_sides::<S>(&q, out.q.as_mut_ptr());
            if !biased_form::<X, M>() {
                store_sides::<S>(&signs, out.signs.as_mut_ptr());
            }
        }
    }

    /// With VNNI [`vnni_tile`]; on plain AVX2 per (row block, block) [`block_sums`], then the
    /// block's term for the register's 8 (row, token) pairs.
    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const SideBlock<S>,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m256; R] {
        if !M::SATURATES {
            return vnni_tile::<M, S, R>(rows, acts, nb);
        }
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..nb {
            let act = &*acts.add(b);
            for (i, acc) in acc.iter_mut().enumerate() {
                let row = &*rows.add(b * R + i);
                let sums = block_sums::<X, M, S>(row, act);
                let d = _mm256_mul_ps(row.d(), act.d);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
            }
        }
        acc
    }
}

/// [`Lanes8`]'s tile with VNNI (always the biased form there): the rows' sums from `neg` as
/// [`block_sums`] makes them, but each activation register loaded once for the `R` rows and a
/// row's even and odd dwords in two chains (exact i32 sums, so the same in any order): with
/// `vpdpbusd`'s 5 cycles of latency (Intel, uops.info), `R` chains of eight would leave the
/// ports idle. Criterion on Intel Xeon family 6 model 207 (`expert/*/gemm/avxvnni`, 512 ×
/// 2048, one core, G products/s, two rounds), a
/// row's eight in one chain → this: IQ4_NL 6 tokens 71 → 77–78, 16 tokens 108 → 119–120, 64
/// tokens 124 → 139; Q5_0 16 tokens 101–103 → 113, 64 tokens 122 → 136–137.
///
/// # Safety
/// As for [`gemm`]; `rows` holds `R · nb` row blocks (block-major), `acts` `nb` blocks.
#[inline(always)]
unsafe fn vnni_tile<M: IntDot, const S: usize, const R: usize>(
    rows: *const SideBlock<S>,
    acts: *const ActBlock,
    nb: usize,
) -> [__m256; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let act = &*acts.add(b);
        let row = rows.add(b * R);
        let mut s = [act.neg; R];
        let mut odd = [_mm256_setzero_si256(); R];
        for k in (0..8).step_by(2) {
            let (y, y_odd) = (act.q[k], act.q[k + 1]);
            for (i, s) in s.iter_mut().enumerate() {
                *s = M::dot_u8i8(*s, (*row.add(i)).q(k), y);
            }
            for (i, odd) in odd.iter_mut().enumerate() {
                *odd = M::dot_u8i8(*odd, (*row.add(i)).q(k + 1), y_odd);
            }
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            let sums = _mm256_add_epi32(s[i], odd[i]);
            let d = _mm256_mul_ps((*row.add(i)).d(), act.d);
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
        }
    }
    acc
}

/// The exact `Σ x y` of one block of the `S` rows of `row` against the `8 / S` tokens of
/// `act` (lane `t · S + s`: row `s`, token `t`) on plain AVX2 (with VNNI [`vnni_tile`] makes
/// them).
#[inline(always)]
unsafe fn block_sums<X: Signed, M: IntDot, const S: usize>(
    row: &SideBlock<S>,
    act: &ActBlock,
) -> __m256i {
    if !biased_form::<X, M>() {
        // Sign trick: |x| · (y with x's sign); pair sums ≤ 2 · 128 · 127.
        let mut s = _mm256_setzero_si256();
        for k in 0..8 {
            let y = _mm256_sign_epi8(act.q[k], row.signs(k));
            s = M::dot_u8i8(s, row.q(k), y);
        }
        return s;
    }
    // Σ (x + OFFSET) y - OFFSET Σ y, in `vpmaddubsw` pair sums: plain AVX2 only (the biased
    // form with VNNI is `vnni_tile`'s).
    debug_assert!(M::SATURATES);
    let mut s = act.neg;
    let group = i16_group(X::BIASED_MAX);
    let mut k = 0;
    while k < 8 {
        let mut pairs = _mm256_maddubs_epi16(row.q(k), act.q[k]);
        for j in k + 1..k + group {
            let p = _mm256_maddubs_epi16(row.q(j), act.q[j]);
            pairs = _mm256_add_epi16(pairs, p);
        }
        s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        k += group;
    }
    s
}
