//! AVX2 and AVX-VNNI Q4_1 and Q5_1 against Q8_1, four blocks a step, for any number of tokens
//! (one row and four tokens a tile up to `FEW_MAX` tokens, four rows and one token from there).
//!
//! The `vec_dot` kernel (`affine` in `dot/x86/avx2/legacy.rs`) adds `d_x d_y · sum` of each
//! block into one of two FMA chains, even blocks into one accumulator and odd into the other,
//! and the `m_x s_y` terms likewise (lane 1). Here two blocks share each register in split
//! order ([`Affine::quants_pair_split`]: one load of both blocks' packed bytes, shifted or
//! not), the activations are prepared once per token in the same order, and the four blocks'
//! `d`/`m` products take one multiply. The accumulators are kept in the same split order:
//! `low` holds chain 0's lanes 0..4 and chain 1's lanes 0..4, `high` their lanes 4..8 (three
//! registers a (row, token) pair where one block a step needed four). Each lane then does the
//! same integer sum and the same FMAs in the same order as the kernel's lane it stands for, and
//! [`Tile::finish`] puts the lanes back before the kernel's reduction: the same bits
//! (tests/gemm.rs compares every path with its `vec_dot`).
//!
//! Two blocks left after the whole steps (SmolLM2's 576 columns are 18 blocks) take a part
//! step: the first half of a step, blocks 0 and 1 only, decoded once per row group and
//! prepared once per token like the steps, where [`Tile::finish`] would redo both for every
//! (row, token) pair. The activations are prepared once per token up front
//! ([`Tile::PREP_ONCE`]): a step's preparation (four loads, two inserts, a conversion) is
//! about as many instructions as its products with one row.

use std::arch::x86_64::*;
use std::marker::PhantomData;
use std::mem::size_of;

use super::super::tile::Tile;
use crate::dot::x86::avx2::legacy::{affine_block, halves_pairs4, Affine};
use crate::dot::x86::{hsum_ps, IntDot};
use crate::legacy::BlockQ8_1;

/// Q4_1 and Q5_1 against Q8_1, four blocks a step: blocks 0 and 2 of the step go to chain 0,
/// 1 and 3 to chain 1, as in the `vec_dot` kernel (one block at a time, two chains).
pub(super) struct AffineQuad<X, M>(PhantomData<(X, M)>);

impl<X: Affine + crate::Block, M: IntDot> Tile for AffineQuad<X, M> {
    type W = X;
    type A = BlockQ8_1;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    const ONE_TOKEN: bool = true;
    const PREP_ONCE: bool = true;
    const PART: usize = 2;
    /// Quants of blocks 0, 1 (low halves, high halves) and 2, 3; `[d0, m0, .., d3, m3]`.
    type Dec = ([__m256i; 4], __m256);
    /// Activations in the same order; `[d0, s0, .., d3, s3]`.
    type Prep = ([__m256i; 4], __m256);
    /// The split-order accumulators `low`, `high`; the minimum terms (lane 1: chain 0's,
    /// lane 3: chain 1's).
    type Acc = (__m256, __m256, __m128);

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let (l01, h01) = X::quants_pair_split(&*w, &*w.add(1));
        let (l23, h23) = X::quants_pair_split(&*w.add(2), &*w.add(3));
        (
            [l01, h01, l23, h23],
            halves_pairs4(w.cast(), size_of::<X>()),
        )
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_1) -> Self::Prep {
        let (l01, h01) = acts_pair_split(a);
        let (l23, h23) = acts_pair_split(a.add(2));
        (
            [l01, h01, l23, h23],
            halves_pairs4(a.cast(), size_of::<BlockQ8_1>()),
        )
    }
    #[inline(always)]
    unsafe fn decode_part(w: *const X) -> Self::Dec {
        let (l01, h01) = X::quants_pair_split(&*w, &*w.add(1));
        let zero = _mm256_setzero_si256();
        (
            [l01, h01, zero, zero],
            halves_pairs2(w.cast(), size_of::<X>()),
        )
    }
    #[inline(always)]
    unsafe fn prep_part(a: *const BlockQ8_1) -> Self::Prep {
        let (l01, h01) = acts_pair_split(a);
        let zero = _mm256_setzero_si256();
        (
            [l01, h01, zero, zero],
            halves_pairs2(a.cast(), size_of::<BlockQ8_1>()),
        )
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm_setzero_ps())
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let scales = _mm256_mul_ps(w.1, a.1);
        let acc = add_pair::<M, 0>(acc, w, a, scales);
        add_pair::<M, 1>(acc, w, a, scales)
    }
    /// [`Tile::step`] on blocks 0 and 1 only.
    #[inline(always)]
    unsafe fn step_part(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        add_pair::<M, 0>(acc, w, a, _mm256_mul_ps(w.1, a.1))
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], w: &[X], a: &[BlockQ8_1]) -> f32 {
        let (low, high, mins) = acc[0];
        // Back to the kernel's two chains: lanes 0..4 from `low`, 4..8 from `high`.
        let mut chains = [
            _mm256_permute2f128_ps::<0x20>(low, high),
            _mm256_permute2f128_ps::<0x31>(low, high),
        ];
        // Their minimum terms in lane 1 of each.
        let mut chain_mins = [mins, _mm_movehl_ps(mins, mins)];
        // Blocks after the whole steps alternate from chain 0, as in the kernel.
        for (k, (x, y)) in w.iter().zip(a).enumerate() {
            (chains[k % 2], chain_mins[k % 2]) =
                affine_block::<X, M>(x, y, chains[k % 2], chain_mins[k % 2]);
        }
        let mins = _mm_add_ps(chain_mins[0], chain_mins[1]);
        hsum_ps(_mm256_add_ps(chains[0], chains[1])) + _mm_cvtss_f32(_mm_movehdup_ps(mins))
    }
}

/// Blocks `2P` (chain 0) and `2P + 1` (chain 1) of a step into the split-order accumulators:
/// each block's FMA and its minimum term (lane 1: chain 0's, lane 3: chain 1's), as the kernel
/// adds them. `scales`: `[d0 d0', m0 s0, d1 d1', m1 s1, d2 d2', .., m3 s3]`, each block's lanes
/// 0, 1 in the kernel. A step is `P = 0` then `P = 1`, so chain 0 adds blocks 0 then 2 and chain
/// 1 blocks 1 then 3.
#[inline(always)]
unsafe fn add_pair<M: IntDot, const P: usize>(
    acc: (__m256, __m256, __m128),
    w: &([__m256i; 4], __m256),
    a: &([__m256i; 4], __m256),
    scales: __m256,
) -> (__m256, __m256, __m128) {
    let zero = _mm256_setzero_si256();
    let (pick, mins) = if P == 0 {
        (
            _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2),
            _mm256_castps256_ps128(scales),
        )
    } else {
        (
            _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6),
            _mm256_extractf128_ps::<1>(scales),
        )
    };
    let s = _mm256_permutevar8x32_ps(scales, pick);
    let low = _mm256_cvtepi32_ps(M::dot_u8i8(zero, w.0[2 * P], a.0[2 * P]));
    let high = _mm256_cvtepi32_ps(M::dot_u8i8(zero, w.0[2 * P + 1], a.0[2 * P + 1]));
    (
        _mm256_fmadd_ps(s, low, acc.0),
        _mm256_fmadd_ps(s, high, acc.1),
        _mm_add_ps(acc.2, mins),
    )
}

/// The f16 pairs at the starts of 2 blocks `size` bytes apart as f32 lanes 0..4 (`[d0, m0, d1,
/// m1]`, or `d`, `s` for activations), lanes 4..8 zero.
#[inline(always)]
unsafe fn halves_pairs2(p: *const u8, size: usize) -> __m256 {
    let h = |k: usize| p.add(k * size).cast::<i32>().read_unaligned();
    _mm256_cvtph_ps(_mm_setr_epi32(h(0), h(1), 0, 0))
}

/// The quants of activation blocks `a`, `a + 1` in [`Affine::quants_pair_split`]'s order:
/// (`[a 0..16, b 0..16]`, `[a 16..32, b 16..32]`).
#[inline(always)]
unsafe fn acts_pair_split(a: *const BlockQ8_1) -> (__m256i, __m256i) {
    let (x, y) = ((*a).qs.as_ptr(), (*a.add(1)).qs.as_ptr());
    let (x0, x1) = (_mm_loadu_si128(x.cast()), _mm_loadu_si128(x.add(16).cast()));
    let (y0, y1) = (_mm_loadu_si128(y.cast()), _mm_loadu_si128(y.add(16).cast()));
    (_mm256_set_m128i(y0, x0), _mm256_set_m128i(y1, x1))
}
