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
use super::block_order_lanes_avx2::{Lanes8, Pairs4};
use super::token_lanes;
use crate::dot::x86::avx2::legacy::{
    add4_in_order, block_sums4, halves4, symmetric_from, terms4, Signed,
};
use crate::dot::x86::IntDot;
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

// ---- Tokens in lanes (`block_order_lanes_avx2.rs`) ----

/// Whether `X` runs the biased form on `M` (else the sign trick): always with VNNI; on plain
/// AVX2 while biased pair sums fit 16 bits.
pub(super) const fn biased_form<X: Signed, M: IntDot>() -> bool {
    !M::SATURATES || X::BIASED_MAX <= 31
}

/// Whether [`RowChain`] runs the biased form: where it is exact and its weights cost no more
/// than the sign form's (Q4_0, Q5_0; IQ4_NL with VNNI). Q8_0's bias would be one more add
/// per register for one fewer sign flip, which criterion (Zen 5, `decode_cached/Q8_0`) found
/// no faster.
const fn row_biased<X: Signed, M: IntDot>() -> bool {
    biased_form::<X, M>() && X::BIASED_AS_CHEAP
}
