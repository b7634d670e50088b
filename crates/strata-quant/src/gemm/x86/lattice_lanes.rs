//! IQ3_S and IQ2_S against Q8_K with tokens in the lanes, 16 on AVX-512 and 8 on AVX-VNNI:
//! the IQ3_XXS tokens-in-lanes tiles ([`Lanes16`], [`Lanes8`]) with a decode of their own. A
//! row's blocks are decoded once per pass through [`SignedLattice::groups`] (the grid points
//! with their signs, the odd multipliers `2 s + 1`), biased to unsigned bytes (`w + 64`:
//! |w| <= 15 for IQ3_S, 43 for IQ2_S), and met by 16 (or 8) tokens a `vpdpbusd`, where the
//! per-pair tiles (AVX-512 [`Lattice`]; `paired_lattice.rs` and `avx2.rs` on 256 bits) make 32
//! products per `vpmaddubsw` for one (row, token) pair. IQ3_S has 8 groups of 32 weights, each
//! with its multiplier; IQ2_S has 16 groups of 16 ([`BlockDecode`]'s `NG`).
//!
//! The tile sums in the scalar reference's block order (`dot/iq.rs`), which this path's
//! `vec_dot` and its few-token tile ([`PairChain`]) keep too, so every route gives the same
//! bits (`tests/gemm.rs`). These are the dense projections of the IQ3_XXS mixes (qwen4exp's
//! attention `q`, `k` and output): 512 rows × 64 tokens ran at 93 (IQ3_S) and 97 (IQ2_S)
//! G products/s through the per-pair tile, against IQ3_XXS's 251 in the lanes (criterion
//! `gemm/*/gemm/avx512/4096`, Intel Xeon family 6 model 207, BENCHMARKS.md).
//!
//! [`Lanes16`]: super::iq3_xxs_lanes::Lanes16
//! [`Lanes8`]: super::iq3_xxs_lanes::Lanes8
//! [`PairChain`]: super::iq3_xxs_lanes::PairChain

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::super::tile::Job;
use super::avx2::{self, signed_groups, SignedLattice};
use super::avx512::Lattice;
use super::iq3_xxs_lanes::{lanes256_or_chain, lanes_or_chain, multipliers, BlockDecode, BIAS};
use super::paired_lattice::PairedLattice;
use crate::dot::x86::avx2::iq3::block_d;
use crate::dot::x86::avx2::lattice::dwords8;
use crate::dot::x86::{Avx512Vnni, IntDot};
use crate::iq2::BlockIQ2_S;
use crate::iq3::BlockIQ3_S;

/// `job` of IQ3_S rows (see [`lanes_or_chain`]).
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm_iq3_s(job: Job<'_>) -> bool {
    lanes_or_chain::<Signed<BlockIQ3_S, Avx512Vnni>, Lattice<BlockIQ3_S>, 8>(job)
}

/// `job` of IQ2_S rows (see [`lanes_or_chain`]).
///
/// # Safety
/// As for [`gemm_iq3_s`].
#[inline(always)]
pub(super) unsafe fn gemm_iq2_s(job: Job<'_>) -> bool {
    lanes_or_chain::<Signed<BlockIQ2_S, Avx512Vnni>, Lattice<BlockIQ2_S>, 16>(job)
}

/// `job` of IQ3_S rows on a 256-bit path with VNNI (see [`lanes256_or_chain`]).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm256_iq3_s<M: IntDot>(job: Job<'_>) -> bool {
    lanes256_or_chain::<Signed<BlockIQ3_S, M>, PairedLattice<BlockIQ3_S, M>, M, 8>(job)
}

/// `job` of IQ2_S rows on a 256-bit path with VNNI (see [`lanes256_or_chain`]).
///
/// # Safety
/// As for [`gemm256_iq3_s`].
#[inline(always)]
pub(super) unsafe fn gemm256_iq2_s<M: IntDot>(job: Job<'_>) -> bool {
    lanes256_or_chain::<Signed<BlockIQ2_S, M>, avx2::Lattice<BlockIQ2_S, M>, M, 16>(job)
}

/// The decode of a [`SignedLattice`] block `X` for the lanes, in element order, its grid
/// points fetched by `M`'s rule (`SignedLattice::groups`).
pub(super) struct Signed<X, M>(PhantomData<(X, M)>);

/// The 8 groups' signed weights of `x`, biased, into `q` (8 dwords a group); the groups' i16
/// multiplier registers.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
unsafe fn biased_groups<X: SignedLattice, M: IntDot>(x: &X, q: &mut [i32; 64]) -> [__m256i; 8] {
    let [grid, mask, ls] = x.groups::<M>();
    let w = signed_groups(&grid, &mask);
    let bias = _mm256_set1_epi8(BIAS);
    for (g, w) in w.iter().enumerate() {
        _mm256_storeu_si256(q.as_mut_ptr().add(8 * g).cast(), _mm256_add_epi8(*w, bias));
    }
    ls
}

/// The low i16 word of each dword, zero-extended.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn low_words(v: __m256i) -> __m256i {
    _mm256_and_si256(v, _mm256_set1_epi32(0xffff))
}

impl<M: IntDot> BlockDecode<8> for Signed<BlockIQ3_S, M> {
    type W = BlockIQ3_S;
    #[inline(always)]
    unsafe fn decode(x: &BlockIQ3_S, q: &mut [i32; 64]) -> ([i32; 8], f32) {
        let ls = biased_groups::<_, M>(x, q);
        // Every i16 lane of a group's register holds its multiplier: dword `g` from group
        // `g`'s register, its low word kept.
        (multipliers(low_words(dwords8(&ls))), block_d(x))
    }
}

impl<M: IntDot> BlockDecode<16> for Signed<BlockIQ2_S, M> {
    type W = BlockIQ2_S;
    #[inline(always)]
    unsafe fn decode(x: &BlockIQ2_S, q: &mut [i32; 64]) -> ([i32; 16], f32) {
        let ls = biased_groups::<_, M>(x, q);
        // A group's register holds the multiplier of its first 16 weights in the low 128 bits
        // (i16 lanes 0..8, the `vpmaddubsw` pairs of bytes 0..16), of the next 16 in the high:
        // each register's dwords as `[low, high, low, high, ..]`, and those of group `g` put
        // at dwords `2g`, `2g + 1` (mod 8) of one of two registers.
        let low_high = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
        let mut pairs = [_mm256_setzero_si256(); 8];
        for (pairs, ls) in pairs.iter_mut().zip(&ls) {
            *pairs = _mm256_permutevar8x32_epi32(*ls, low_high);
        }
        let mut m = [0i32; 16];
        // No closures: they would not inherit the caller's target features.
        for (h, m) in m.chunks_exact_mut(8).enumerate() {
            let p = &pairs[4 * h..4 * h + 4];
            let ab = _mm256_blend_epi32::<0b0000_1100>(p[0], p[1]);
            let cd = _mm256_blend_epi32::<0b1100_0000>(p[2], p[3]);
            let v = low_words(_mm256_blend_epi32::<0b1111_0000>(ab, cd));
            _mm256_storeu_si256(m.as_mut_ptr().cast(), v);
        }
        (m, block_d(x))
    }
}
