//! IQ3_XXS and IQ3_S against Q8_K on the 256-bit paths, two groups of 32 a multiply-add: the
//! lattice tile of `avx2.rs` ([`super::avx2::Lattice`]) with one i16 multiply-add where it had
//! two.
//!
//! That tile takes each group `g` of 32 weights as signed bytes `w` and each token's
//! activations offset to unsigned (`y + 128`), and makes the `vec_dot` kernel's i32 lane `k`
//! (`dot/x86/avx2/iq3.rs`: `Σ_g ls_g Σ_{e in 4k..4k+4} w_{g,e} y_{g,e}`) from one `vpmaddubsw`
//! and one `vpmaddwd` by the group's multiplier `ls_g` per (row, token, group). Here two groups
//! `g`, `h` share the second: their bytes are interleaved by halves of 4-byte pieces,
//!
//! ```text
//! W1 dword k = [g_{4k}, g_{4k+1}, h_{4k}, h_{4k+1}]    W2 dword k = [g_{4k+2}, g_{4k+3}, h_{4k+2}, h_{4k+3}]
//! ```
//!
//! and the activations alike (once per token), so `maddubs(Y1, W1) + maddubs(Y2, W2)` holds
//! `g`'s four products of piece `k` in i16 lane `2k` and `h`'s in lane `2k + 1`, and one
//! `vpmaddwd` by `[ls_g, ls_h, ..]` gives lane `k` its two groups' terms. The lanes are the same
//! integers as the kernel's, so the float part and the bits are too.
//!
//! The i16 sum of four products must not overflow: `4 · 255 · max|w| < 2^15`. IQ3_S's grid
//! bytes are at most 15 (15,300); IQ3_XXS's are even, up to 62, so its weights go in halved
//! (`w / 2`, at most 31: 31,620) against doubled multipliers (`2 ls`), which gives the same
//! products. As for that tile, the lanes equal the kernel's for activation quants in
//! −127..=127, the range Q8_K quantization writes (`avx2::OffsetLattice`). Per two groups and
//! (row, token) pair: two `vpmaddubsw`, an i16 add and one
//! i16 multiply-add, where the tile had two of each (plain AVX2: 3 multiplies instead of 4).
//! IQ2_S (grid bytes up to 43, odd) keeps the tile of `avx2.rs`.

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::super::tile::Tile;
use super::avx2::{offset_q8k, signed_groups, SignedLattice};
use crate::dot::x86::{block_ptr, f16x4, hsum_ps, IntDot};
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};
use crate::q8_k::BlockQ8_K;

/// A [`SignedLattice`] block whose groups can share a multiply-add two by two.
pub(super) trait Paired: SignedLattice {
    /// Whether the grid bytes go in halved (all even, and four full-size products of an
    /// offset activation would overflow i16); the multipliers are then doubled.
    const HALVED: bool;
}

impl Paired for BlockIQ3_XXS {
    // Grid bytes 4..=62, all even: 4 · 255 · 31 = 31,620.
    const HALVED: bool = true;
}

impl Paired for BlockIQ3_S {
    // Grid bytes 1..=15: 4 · 255 · 15 = 15,300.
    const HALVED: bool = false;
}

/// A decoded block: for each pair of groups `(2p, 2p + 1)` the interleaved signed weights
/// `w[2p]` (low halves of each 4-byte piece) and `w[2p + 1]` (high halves), the i16
/// multipliers `m[p]` (`[ls_2p, ls_2p+1, ..]`, doubled where [`Paired::HALVED`]), minus the
/// offset's part of the integer lanes `neg_c` (the lanes of the same products with every
/// activation 128, negated: the sums start there), and `d_x` in every lane.
#[derive(Clone, Copy)]
pub(super) struct PairedBlock {
    w: [__m256i; 8],
    m: [__m256i; 4],
    neg_c: __m256i,
    pub(super) d: __m256,
}

/// A Q8_K block prepared for [`PairedBlock`]s: its groups' `y + 128` bytes interleaved as the
/// weights are (`y[2p]`, `y[2p + 1]` for the pair `p`), `d_y` in every lane (so a (row,
/// token) pair's `d_x · d_y` is one multiply, the same product in every lane).
#[derive(Clone, Copy)]
pub(super) struct PairedQ8k {
    y: [__m256i; 8],
    pub(super) d: __m256,
}

/// Groups `g` and `h` (32 bytes each) interleaved by 16-bit halves of their 4-byte pieces:
/// (low halves of `g` and `h`, high halves of `g` and `h`).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn interleave(g: __m256i, h: __m256i) -> [__m256i; 2] {
    [
        _mm256_blend_epi16::<0xAA>(g, _mm256_slli_epi32::<16>(h)),
        _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(g), h),
    ]
}

/// The integer lanes of the products of `y` and `w` over pair `p`, added to `sum`.
///
/// # Safety
/// AVX2 and `M`'s instructions are available.
#[inline(always)]
unsafe fn add_pair<M: IntDot>(
    sum: __m256i,
    y: &[__m256i; 8],
    w: &[__m256i; 8],
    m: __m256i,
    p: usize,
) -> __m256i {
    let four = _mm256_add_epi16(
        _mm256_maddubs_epi16(y[2 * p], w[2 * p]),
        _mm256_maddubs_epi16(y[2 * p + 1], w[2 * p + 1]),
    );
    M::madd_i16(sum, four, m)
}

/// [`PairedBlock`] of `x`.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
unsafe fn decode<X: Paired, M: IntDot>(x: &X) -> PairedBlock {
    let [mut grid, mask, ls] = x.groups::<M>();
    if X::HALVED {
        for grid in grid.iter_mut() {
            // Even bytes halve exactly in wider lanes: no bit crosses into the byte below.
            *grid = _mm256_srli_epi32::<1>(*grid);
        }
    }
    let signed = signed_groups(&grid, &mask);
    let mut w = [_mm256_setzero_si256(); 8];
    let mut m = [_mm256_setzero_si256(); 4];
    for p in 0..4 {
        [w[2 * p], w[2 * p + 1]] = interleave(signed[2 * p], signed[2 * p + 1]);
        let pair = _mm256_blend_epi16::<0xAA>(ls[2 * p], ls[2 * p + 1]);
        m[p] = if X::HALVED {
            _mm256_add_epi16(pair, pair)
        } else {
            pair
        };
    }
    let offset = [_mm256_set1_epi8(-128); 8];
    let mut c = _mm256_setzero_si256();
    for (p, &m) in m.iter().enumerate() {
        c = add_pair::<M>(c, &offset, &w, m, p);
    }
    PairedBlock {
        w,
        m,
        neg_c: _mm256_sub_epi32(_mm256_setzero_si256(), c),
        d: _mm256_broadcastss_ps(f16x4(block_ptr(x))),
    }
}

/// [`PairedQ8k`] of the block at `a`.
///
/// # Safety
/// `a` points at a readable block; AVX2 is available.
#[inline(always)]
unsafe fn prep(a: *const BlockQ8_K) -> PairedQ8k {
    let (offset, d) = offset_q8k(a);
    let mut y = [_mm256_setzero_si256(); 8];
    for p in 0..4 {
        [y[2 * p], y[2 * p + 1]] = interleave(offset[2 * p], offset[2 * p + 1]);
    }
    PairedQ8k {
        y,
        d: _mm256_broadcastss_ps(d),
    }
}

/// The `vec_dot` kernel's 8 exact i32 lanes of every (row, token) pair of an `R × T` tile,
/// pair of groups by pair: one pair's registers of every row and token live at a time.
///
/// # Safety
/// AVX2 and `M`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn sums_tile<M: IntDot, const R: usize, const T: usize>(
    w: [&PairedBlock; R],
    a: [&PairedQ8k; T],
) -> [[__m256i; T]; R] {
    // No closures: they would not inherit the caller's target features.
    let mut sums = [[_mm256_setzero_si256(); T]; R];
    for (sums, w) in sums.iter_mut().zip(&w) {
        *sums = [w.neg_c; T];
    }
    for p in 0..4 {
        for i in 0..R {
            for j in 0..T {
                sums[i][j] = add_pair::<M>(sums[i][j], &a[j].y, &w[i].w, w[i].m[p], p);
            }
        }
    }
    sums
}

/// IQ3_XXS and IQ3_S against Q8_K, one block a step, one chain (the order of `avx2.rs`'s
/// `Lattice` and of the plain AVX2 `vec_dot`): the signs, grid points and multipliers decoded
/// once per row, each token's activations offset and interleaved once per product.
pub(super) struct PairedLattice<X, M>(PhantomData<(X, M)>);

impl<X: Paired, M: IntDot> Tile for PairedLattice<X, M> {
    type W = X;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    const PREP_ONCE: bool = true;
    /// One token keeps the `vec_dot` row loop (signs on the activations, no offset part).
    const ONE_TOKEN: bool = false;
    /// Four 1-row tiles a sweep: four tokens' prepared activations (a 4096-wide row: 17 KiB)
    /// stay in L1 for four rows (30 KiB decoded) instead of one. Criterion
    /// (`gemm/IQ3_XXS/gemm/avx2/4096`, Zen 5): 94.9, 95.6 G products/s → 100.9, 103.6.
    const ROW_TILES: usize = 4;
    type Dec = PairedBlock;
    type Prep = PairedQ8k;
    type Acc = __m256;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> PairedBlock {
        decode::<X, M>(&*w)
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> PairedQ8k {
        prep(a)
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m256, w: &PairedBlock, a: &PairedQ8k) -> __m256 {
        let mut tile = [[acc]];
        Self::step_tile::<1, 1>(&mut tile, [w], [a]);
        tile[0][0]
    }
    #[inline(always)]
    unsafe fn step_tile<const R: usize, const T: usize>(
        acc: &mut [[__m256; T]; R],
        w: [&PairedBlock; R],
        a: [&PairedQ8k; T],
    ) {
        let sums = sums_tile::<M, R, T>(w, a);
        for i in 0..R {
            for j in 0..T {
                // `add_scaled`'s `d_x · d_y` (one rounding), in every lane at once.
                let d = _mm256_mul_ps(w[i].d, a[j].d);
                acc[i][j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums[i][j]), acc[i][j]);
            }
        }
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m256; 2], _: &[X], _: &[BlockQ8_K]) -> f32 {
        X::FINAL * hsum_ps(acc[0])
    }
}
