//! GEMM of IQ3_XXS against Q8_K on the paths with VNNI (AVX-512, and AVX-VNNI with 8 lanes:
//! [`gemm256`]) in block order, the scalar reference's (`dot/iq.rs`):
//! for each (row, token), block after block, the block's exact i32 sum
//! `Σ_g (2 s_g + 1) Σ w y` is converted, multiplied by `d_x · d_y` and added to one f32 sum,
//! which ends times 1/4. This path's `vec_dot` runs in that order too
//! (`dot/x86/avx2/iq3.rs::block_order`), so every entry is `vec_dot` bit for bit:
//!
//! - **Tokens in lanes** ([`Lanes16`], from [`TOKEN_LANES_MIN`] tokens: prefill, the dense
//!   matrices and the larger experts). Each row's lattice points are decoded once per pass to
//!   signed bytes and biased to unsigned (`w + 64`, 2..=126); the activations are repacked so
//!   one register holds 4 bytes of each of 16 tokens. A broadcast weight dword meets them in one
//!   `vpdpbusd` (64 products); eight give a group of 32's sums for 16 tokens, started from
//!   `-64 Σ y` (made with the repacking), and the group's odd multiplier, split in two i16
//!   words as the sum is, adds them to the block sum in one `vpdpwssd`. 64 `vpdpbusd` and 8
//!   `vpdpwssd` a block against the per-pair kernel's 8 `vpmaddubsw` + `vpdpwssd` pairs for
//!   16 × fewer products: the shape of llama.cpp's VNNI micro-kernels (weights unpacked to
//!   int8, tokens in lanes).
//! - **One (row, token) chain** ([`PairChain`]; 2 to 5 tokens: decoding
//!   sequences, small experts): the per-pair lattice tile's decode and step (`avx512.rs`,
//!   `avx2.rs`), four blocks a step, their lanes reduced together to the four block sums, whose
//!   terms are added in block order.
//!
//! - **Byte permutes** (`iq3_xxs_vbmi.rs`, where the CPU has AVX512-VBMI and BITALG): a
//!   block's 64 points looked up at once, both in a tile of its own for a few tokens (in place
//!   of [`PairChain`]) and as the lanes' decode ([`BlockDecode`]).
//!
//! The tile is generic over the block's decode ([`BlockDecode`]): on AVX-512 and AVX-VNNI it
//! also takes IQ3_S and IQ2_S (`lattice_lanes.rs`), with [`PairChain`] for their few-token
//! jobs.
//!
//! Without VBMI one token is left to the `vec_dot` row loop. Plain AVX2 keeps its lane order
//! and per-pair tile: without `vpdpbusd`, 32 products for 8 tokens cost a `vpmaddubsw`, a
//! `vpmaddwd` and an add, as they do for one (row, token) pair, so tokens in lanes would gain
//! nothing there.

use std::arch::x86_64::*;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};

use super::super::tile::{run, Job, Tile};
use super::avx2;
use super::avx512::Lattice;
use super::block_order_lanes_avx2::transpose8;
use super::paired_lattice::{self, Paired, PairedLattice};
use super::token_lanes::{self, lane_tokens, TokenLanes};
use crate::dot::x86::avx2::iq3::{block_d, Partials};
use crate::dot::x86::avx2::lattice::even_sign_masks;
use crate::dot::x86::avx2::legacy::{add4_in_order, block_sums4, block_term, hsum_epi32, terms4};
use crate::dot::x86::{f16x4, Avx512Vnni, IntDot};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

/// Tokens from which a job runs with tokens in the lanes.
pub(super) const TOKEN_LANES_MIN: usize = 6;

/// `job` in block order: where the CPU has VBMI and BITALG, `iq3_xxs_vbmi::gemm` (its tile
/// for a few tokens, the lanes with its decode from there); elsewhere [`PairChain`] on the
/// 512-bit lattice tile for 2 to `TOKEN_LANES_MIN - 1` tokens (`false`, nothing written, for
/// one: the `vec_dot` row loop takes it); [`Lanes16`] from there, the tokens after its last
/// whole group of 16 on [`PairChain`] where that is cheaper ([`token_lanes::split_tail`]).
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm(job: Job<'_>) -> bool {
    if super::iq3_xxs_vbmi::available() {
        // SAFETY: the rest of the features are this function's; VBMI and BITALG were probed.
        return unsafe { super::iq3_xxs_vbmi::gemm(job) };
    }
    lanes_or_chain::<Lookup<Avx512Vnni>, LatticeXxs, 8>(job)
}

/// `job` on AVX-512: [`PairChain`] on the per-pair lattice tile `L` for 2 to
/// `TOKEN_LANES_MIN - 1` tokens (`false`, nothing written, for one: the `vec_dot` row loop
/// takes it); [`Lanes16`] with `D`'s decode from there, the tokens after its last whole group
/// of 16 on [`PairChain`] where that is cheaper ([`token_lanes::split_tail`]). Both keep
/// `vec_dot`'s block order, so every route gives its bits.
///
/// # Safety
/// As for [`gemm`], and `D`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn lanes_or_chain<D, L, const NG: usize>(job: Job<'_>) -> bool
where
    D: BlockDecode<NG>,
    L: LatticeTile<W = D::W>,
{
    if job.n_tok < TOKEN_LANES_MIN {
        return run::<PairChain<L>, 2, 4>(job);
    }
    // `PairChain` leaves one token alone to the caller, so tails from two.
    if let Some(tail) = lanes16::<D, NG>(job, 2..TOKEN_LANES_MIN) {
        let written = run::<PairChain<L>, 2, 4>(tail);
        assert!(written, "a tail of more than one token");
    }
    true
}

/// `job` through [`Lanes16`] with `D`'s decode, except the tokens after its last whole group
/// of 16 when `tails` holds their number: those are returned for a few-token path, which
/// costs less than a group of mostly empty lanes. Rows go [`LANES16_R`] at a time.
///
/// # Safety
/// As for [`gemm`], and `D`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn lanes16<D: BlockDecode<NG>, const NG: usize>(
    job: Job<'_>,
    tails: std::ops::Range<usize>,
) -> Option<Job<'_>> {
    let (lanes, tail) = token_lanes::split_tail(job, 16, tails);
    token_lanes::run::<Lanes16<D, NG>, LANES16_R>(lanes);
    tail
}

/// Rows a [`Lanes16`] tile meets each loaded activation register with (`R` of
/// `token_lanes::run`). With a row's odd dwords in a second chain (thirty-second session) a
/// row holds four registers (two group sums, block sum, float accumulator), 32 in all, so a
/// few spill; 4 rows against 8 was measured before that change, not since. The tile is bound
/// by the activation bytes it streams from L2 (a group's repacked block is 4.7 KiB, a row's
/// decoded block 292 bytes), which twice the rows halve.
/// Criterion (`expert/IQ3_XXS/gemm/avx512`, 512 × 2048, one core, G products/s), 4 rows
/// against 8: Zen 5 (twenty-ninth session, two rounds) 10 tokens 159–169 against 176–179,
/// 16 tokens 244–261 against 269–277, 64 tokens 285–307 against 327–331; Intel Xeon family 6
/// model 207 (thirty-first session, one round a build, 3 builds) 16 tokens 104
/// against 124–125, 32 tokens 117 against 142–145, 64 tokens 124 against 158–161.
const LANES16_R: usize = 8;

/// A per-pair lattice tile's decode, preparation and integer sums (`avx512.rs`; on the
/// 256-bit paths `paired_lattice.rs` and `avx2.rs`, through [`TileLattice`]) as [`PairChain`]
/// uses them.
pub(super) trait LatticeTile {
    /// The weight block.
    type W: Partials;
    /// The integer dot of the tile's `vec_dot` (for the tail blocks).
    type Int: IntDot;
    /// One decoded weight block.
    type Dec: Copy;
    /// One prepared activation block.
    type Prep: Copy;
    /// [`Tile::FEW_GROUP`] of the chain.
    const CHAIN_FEW_GROUP: usize;
    /// Decodes the block at `w`.
    ///
    /// # Safety
    /// The tile's CPU features are available; `w` points at a block.
    unsafe fn decode(w: *const Self::W) -> Self::Dec;
    /// Prepares the activation block at `a`.
    ///
    /// # Safety
    /// As for [`LatticeTile::decode`].
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep;
    /// A block's 8 exact i32 lanes, which add up to its sum.
    unsafe fn sums(w: &Self::Dec, a: &Self::Prep) -> __m256i;
    /// `d_x` in lane 0.
    unsafe fn d_x(w: &Self::Dec) -> __m128;
    /// `d_y` in lane 0.
    unsafe fn d_y(a: &Self::Prep) -> __m128;
}

type LatticeXxs = Lattice<BlockIQ3_XXS>;

type Lattice256<M> = PairedLattice<BlockIQ3_XXS, M>;

/// A per-pair [`Tile`] whose decode and preparation [`PairChain`] takes as they are (the
/// 256-bit tiles), with its block's integer lanes and scales read out: a [`LatticeTile`].
pub(super) trait TileLattice: Tile<A = BlockQ8_K, W: Partials> {
    /// The integer dot of the tile's `vec_dot`.
    type Int: IntDot;
    /// A block's 8 exact i32 lanes, which add up to its sum.
    unsafe fn block_lanes(w: &Self::Dec, a: &Self::Prep) -> __m256i;
    /// `d_x` in lane 0.
    unsafe fn block_d_x(w: &Self::Dec) -> __m128;
    /// `d_y` in lane 0.
    unsafe fn block_d_y(a: &Self::Prep) -> __m128;
}

impl<T: TileLattice> LatticeTile for T {
    type W = T::W;
    type Int = T::Int;
    type Dec = T::Dec;
    type Prep = T::Prep;
    const CHAIN_FEW_GROUP: usize = 4;
    #[inline(always)]
    unsafe fn decode(w: *const T::W) -> T::Dec {
        <T as Tile>::decode(w)
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> T::Prep {
        <T as Tile>::prep(a)
    }
    #[inline(always)]
    unsafe fn sums(w: &T::Dec, a: &T::Prep) -> __m256i {
        T::block_lanes(w, a)
    }
    #[inline(always)]
    unsafe fn d_x(w: &T::Dec) -> __m128 {
        T::block_d_x(w)
    }
    #[inline(always)]
    unsafe fn d_y(a: &T::Prep) -> __m128 {
        T::block_d_y(a)
    }
}

impl<X: Paired, M: IntDot> TileLattice for PairedLattice<X, M> {
    type Int = M;
    #[inline(always)]
    unsafe fn block_lanes(w: &Self::Dec, a: &Self::Prep) -> __m256i {
        paired_lattice::sums_tile::<M, 1, 1>([w], [a])[0][0]
    }
    #[inline(always)]
    unsafe fn block_d_x(w: &Self::Dec) -> __m128 {
        _mm256_castps256_ps128(w.d)
    }
    #[inline(always)]
    unsafe fn block_d_y(a: &Self::Prep) -> __m128 {
        _mm256_castps256_ps128(a.d)
    }
}

/// A per-pair lattice tile `L`, four blocks a step: their integer lanes reduced together to
/// the four block sums, whose terms are added to one f32 chain in block order.
pub(super) struct PairChain<L>(PhantomData<L>);

impl<L: LatticeTile> Tile for PairChain<L> {
    type W = L::W;
    type A = BlockQ8_K;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    const PREP_ONCE: bool = true;
    const ONE_TOKEN: bool = false;
    const FEW_GROUP: usize = L::CHAIN_FEW_GROUP;
    type Dec = [L::Dec; 4];
    type Prep = [L::Prep; 4];
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const L::W) -> Self::Dec {
        [
            L::decode(w),
            L::decode(w.add(1)),
            L::decode(w.add(2)),
            L::decode(w.add(3)),
        ]
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        [
            L::prep(a),
            L::prep(a.add(1)),
            L::prep(a.add(2)),
            L::prep(a.add(3)),
        ]
    }
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Self::Dec, a: &Self::Prep) -> f32 {
        let v = [
            L::sums(&w[0], &a[0]),
            L::sums(&w[1], &a[1]),
            L::sums(&w[2], &a[2]),
            L::sums(&w[3], &a[3]),
        ];
        let dx = lane0s([L::d_x(&w[0]), L::d_x(&w[1]), L::d_x(&w[2]), L::d_x(&w[3])]);
        let dy = lane0s([L::d_y(&a[0]), L::d_y(&a[1]), L::d_y(&a[2]), L::d_y(&a[3])]);
        add4_in_order(acc, terms4(block_sums4(v), dx, dy))
    }
    /// The blocks after the last whole step as `vec_dot` takes them.
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], w: &[L::W], a: &[BlockQ8_K]) -> f32 {
        let mut sum = acc[0];
        for (x, y) in w.iter().zip(a) {
            let block = hsum_epi32(x.partials::<L::Int>(y));
            sum = block_term(sum, block, block_d(x), y.scale());
        }
        <L::W as Partials>::FINAL * sum
    }
}

/// One decoded block of one row: the 256 weights biased to unsigned (`w + 64`) as 64 dwords
/// (4 bytes each, in the decoder's slot order: [`BlockDecode::slot`]), the `NG` groups' odd
/// multipliers `2 s + 1` as [`word_pair`]s (8 groups of 32, or IQ2_S's 16 of 16), and `d_x`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct RowBlock<const NG: usize = 8> {
    q: [i32; 64],
    ls: [i32; NG],
    d: f32,
}

/// One activation block of a token group (16 tokens in [`Zmm`], 8 in [`Ymm`]): register `k`
/// holds the 4 bytes of each token (lane = token) that meet the weights of slot `k` (bytes
/// `4k..4k + 4` in element order; [`BlockDecode::slot`]), `neg[g]` holds `-64 Σ y` over group
/// `g` of `NG` (the start that cancels the weights' bias) and `d` the tokens' `d_y`. Lanes
/// past the last token hold `y = 0`, `d_y = 0`.
#[repr(C, align(64))]
pub(super) struct ActBlock<V: LaneOps, const NG: usize = 8> {
    q: [V::I; 64],
    neg: [V::I; NG],
    d: V::F,
}

impl<V: LaneOps, const NG: usize> Clone for ActBlock<V, NG> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V: LaneOps, const NG: usize> Copy for ActBlock<V, NG> {}

/// The register operations of the tokens-in-lanes tile ([`lanes_tile`]), on the 16 lanes of
/// a 512-bit register ([`Zmm`]) or the 8 of a 256-bit one ([`Ymm`]).
pub(super) trait LaneOps {
    /// i32 lanes.
    type I: Copy;
    /// f32 lanes.
    type F: Copy;
    unsafe fn splat_i(v: i32) -> Self::I;
    unsafe fn splat_f(v: f32) -> Self::F;
    /// `acc + Σ_{k<4} a[4i+k] · b[4i+k]` per i32 lane, `a` unsigned, `b` signed (`vpdpbusd`).
    unsafe fn dot_u8i8(acc: Self::I, a: Self::I, b: Self::I) -> Self::I;
    unsafe fn add_i(a: Self::I, b: Self::I) -> Self::I;
    /// `acc + t · m` per i32 lane, exact for `|t| < 2²³` and `m` a [`word_pair`]: `t`'s low
    /// byte and the 16 bits above it ([`SPLIT`]) meet the pair's two words in one `vpdpwssd`.
    /// On Intel Sapphire Rapids (uops.info) `vpmulld` zmm is two micro-ops with 10 cycles'
    /// latency; a shuffle and a `vpdpwssd` are two with 6, and the add comes with them.
    unsafe fn add_multiple(acc: Self::I, t: Self::I, m: Self::I) -> Self::I;
    unsafe fn to_f(a: Self::I) -> Self::F;
    unsafe fn add_f(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn mul_f(a: Self::F, b: Self::F) -> Self::F;
}

/// 16 token lanes, AVX-512 VNNI.
#[derive(Clone, Copy)]
pub(super) struct Zmm;

impl LaneOps for Zmm {
    type I = __m512i;
    type F = __m512;
    #[inline(always)]
    unsafe fn splat_i(v: i32) -> __m512i {
        _mm512_set1_epi32(v)
    }
    #[inline(always)]
    unsafe fn splat_f(v: f32) -> __m512 {
        _mm512_set1_ps(v)
    }
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        _mm512_dpbusd_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn add_i(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn add_multiple(acc: __m512i, t: __m512i, m: __m512i) -> __m512i {
        let split = _mm512_broadcast_i32x4(_mm_loadu_si128(SPLIT.as_ptr().cast()));
        _mm512_dpwssd_epi32(acc, _mm512_shuffle_epi8(t, split), m)
    }
    #[inline(always)]
    unsafe fn to_f(a: __m512i) -> __m512 {
        _mm512_cvtepi32_ps(a)
    }
    #[inline(always)]
    unsafe fn add_f(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul_f(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
}

/// 8 token lanes with `M`'s `vpdpbusd` (AVX-VNNI, or its EVEX twin).
pub(super) struct Ymm<M>(PhantomData<M>);

impl<M: IntDot> LaneOps for Ymm<M> {
    type I = __m256i;
    type F = __m256;
    #[inline(always)]
    unsafe fn splat_i(v: i32) -> __m256i {
        _mm256_set1_epi32(v)
    }
    #[inline(always)]
    unsafe fn splat_f(v: f32) -> __m256 {
        _mm256_set1_ps(v)
    }
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        M::dot_u8i8(acc, a, b)
    }
    #[inline(always)]
    unsafe fn add_i(a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(a, b)
    }
    #[inline(always)]
    unsafe fn add_multiple(acc: __m256i, t: __m256i, m: __m256i) -> __m256i {
        let split = _mm256_broadcastsi128_si256(_mm_loadu_si128(SPLIT.as_ptr().cast()));
        M::madd_i16(acc, _mm256_shuffle_epi8(t, split), m)
    }
    #[inline(always)]
    unsafe fn to_f(a: __m256i) -> __m256 {
        _mm256_cvtepi32_ps(a)
    }
    #[inline(always)]
    unsafe fn add_f(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline(always)]
    unsafe fn mul_f(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
}

/// A decoded weight block as the tile's registers take it: each value spread over its row's
/// lanes (every lane for a [`RowBlock`], every `S`-th lane for each row
/// of a [`super::iq3_xxs_pairs::SideBlock`]).
pub(super) trait Spread<V: LaneOps> {
    /// Dword `k` of the biased weights.
    unsafe fn q(&self, k: usize) -> V::I;
    /// Group `g`'s odd multiplier as a [`word_pair`].
    unsafe fn ls(&self, g: usize) -> V::I;
    /// `d_x`.
    unsafe fn d(&self) -> V::F;
}

impl<V: LaneOps, const NG: usize> Spread<V> for RowBlock<NG> {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> V::I {
        V::splat_i(self.q[k])
    }
    #[inline(always)]
    unsafe fn ls(&self, g: usize) -> V::I {
        V::splat_i(self.ls[g])
    }
    #[inline(always)]
    unsafe fn d(&self) -> V::F {
        V::splat_f(self.d)
    }
}

/// `R` decoded row blocks × one token group over `nb` blocks (the [`TokenLanes::tile`] of
/// [`Lanes16`], [`Lanes8`] and the row pairs'), decoded by `D`. Per block: for each of the
/// `NG` groups, `64 / NG` `vpdpbusd` per row (eight for groups of 32), half from `neg` and
/// half from zero in two chains added at the end (its slots in `D`'s order: exact i32 sums,
/// so any order gives the same bits), each activation register loaded once for the `R` rows;
/// the group's multiplier ([`LaneOps::add_multiple`]); then the block's term
/// `(d_x · d_y) · block`, added in block order; at the end times [`BlockDecode::FINAL`].
///
/// Criterion on Intel Xeon family 6 model 207 (`expert/IQ3_XXS/gemm`, 512 × 2048, one core,
/// G products/s, two rounds), `vpmulld` and one chain a row against [`LaneOps::add_multiple`]
/// and two: AVX-512 10 tokens 80 → 87–88, 16 tokens 126 → 135–136, 32 tokens 149 → 166–167,
/// 64 tokens 165 → 177–187; AVX-VNNI 16 tokens 64–66 → 71, 64 tokens 93–94 → 107–109.
///
/// # Safety
/// `V`'s instructions are available; `rows` holds `R · nb` blocks, `acts` `nb`.
#[inline(always)]
pub(super) unsafe fn lanes_tile<V, B, D, const R: usize, const NG: usize>(
    rows: *const B,
    acts: *const ActBlock<V, NG>,
    nb: usize,
) -> [V::F; R]
where
    V: LaneOps,
    B: Spread<V>,
    D: BlockDecode<NG>,
{
    let mut acc = [V::splat_f(0.0); R];
    for b in 0..nb {
        let act = &*acts.add(b);
        let row = rows.add(b * R);
        let mut sum = [V::splat_i(0); R];
        for g in 0..NG {
            // Even and odd dwords in two chains: with `vpdpbusd`'s 5 cycles of latency
            // (Intel, uops.info), `R` chains of eight would leave the ports idle.
            let mut t = [act.neg[g]; R];
            let mut odd = [V::splat_i(0); R];
            for j in (0..64 / NG).step_by(2) {
                let (k, k_odd) = (D::slot(g, j), D::slot(g, j + 1));
                let (y, y_odd) = (act.q[k], act.q[k_odd]);
                for (i, t) in t.iter_mut().enumerate() {
                    *t = V::dot_u8i8(*t, (*row.add(i)).q(k), y);
                }
                for (i, odd) in odd.iter_mut().enumerate() {
                    *odd = V::dot_u8i8(*odd, (*row.add(i)).q(k_odd), y_odd);
                }
            }
            for (i, sum) in sum.iter_mut().enumerate() {
                let t = V::add_i(t[i], odd[i]);
                *sum = V::add_multiple(*sum, t, (*row.add(i)).ls(g));
            }
        }
        for (i, (acc, sum)) in acc.iter_mut().zip(sum).enumerate() {
            // (d_x · d_y) · block, added: the reference's order.
            let d = V::mul_f((*row.add(i)).d(), act.d);
            *acc = V::add_f(*acc, V::mul_f(V::to_f(sum), d));
        }
    }
    // No closures: they would not inherit the caller's target features.
    for acc in acc.iter_mut() {
        *acc = V::mul_f(*acc, V::splat_f(D::FINAL));
    }
    acc
}

/// The bias that makes a signed lattice weight (|w| <= 62) an unsigned byte.
pub(super) const BIAS: i8 = 64;

/// [`LaneOps::add_multiple`]'s shuffle of each 128 bits: i32 lane `t` (bytes `b0..b4`) to the
/// i16 pair `[b0 as u8, (b1, b2)]`, its low byte (0..=255) and `t >> 8` (bits 8..24, exact as
/// i16 for `|t| < 2²³`), so that `t = 256 · high + low`. A group's sum is at most
/// 32 · 62 · 127 < 2¹⁸ in magnitude.
const SPLIT: [i8; 16] = [
    0, -128, 1, 2, 4, -128, 5, 6, 8, -128, 9, 10, 12, -128, 13, 14,
];

/// A group's odd multiplier `m` (1..=31) as the i16 pair `[m, 256 m]` that
/// [`LaneOps::add_multiple`] meets [`SPLIT`]'s pair with: `low · m + high · 256 m = t · m`.
#[inline(always)]
pub(super) fn word_pair(m: i32) -> i32 {
    m | (m << 24)
}

/// The 8 i32 lanes of `v` as an array, by one 32-byte store: the caller's 32-byte load of
/// them forwards from it, where eight 4-byte stores would stall that load until they retired
/// (a `perf annotate` of the AVX-VNNI IQ3_XXS decode had 5 % of a prefill's samples there).
///
/// # Safety
/// AVX is available.
#[inline(always)]
pub(super) unsafe fn multipliers(v: __m256i) -> [i32; 8] {
    let mut out = [0i32; 8];
    _mm256_storeu_si256(out.as_mut_ptr().cast(), v);
    out
}

/// How the tokens-in-lanes kernels decode a weight block of `NG` groups (each with its odd
/// multiplier: 8 groups of 32 for IQ3_XXS and IQ3_S, 16 of 16 for IQ2_S), and in which order
/// its dwords lie.
pub(super) trait BlockDecode<const NG: usize = 8> {
    /// The weight block (256 lattice weights).
    type W: Partials;
    /// The constant the sums end multiplied by (the scale formula's: IQ3_XXS 1/4).
    const FINAL: f32 = <Self::W as Partials>::FINAL;
    /// Whether the decoded dwords are in another order than the elements' (then the
    /// activations go through [`BlockDecode::reorder`] before the repacking reads them).
    const REORDERED: bool = false;

    /// The block's 256 lattice weights with their signs, biased to unsigned (`w + 64`), into
    /// `q` (4 bytes a dword, in [`BlockDecode::slot`] order); returns the groups' odd
    /// multipliers `2 s + 1` and `d_x`.
    ///
    /// # Safety
    /// The decoder's CPU features are available.
    unsafe fn decode(x: &Self::W, q: &mut [i32; 64]) -> ([i32; NG], f32);

    /// The slot (0..64) of group `g`'s dword `j` (0..64 / NG): `(64 / NG) g + j` in element
    /// order.
    #[inline(always)]
    fn slot(g: usize, j: usize) -> usize {
        64 / NG * g + j
    }

    /// A token's 256 activations (`y`) as 64 dwords in slot order into `dst`: dword `k` holds
    /// the activations that meet the weight bytes of slot `k`. By default element order, a
    /// plain copy, which the repacking skips (it reads the activations in place unless
    /// [`BlockDecode::REORDERED`]).
    ///
    /// # Safety
    /// The decoder's CPU features are available.
    #[inline(always)]
    unsafe fn reorder(y: &[i8; 256], dst: &mut [i32; 64]) {
        std::ptr::copy_nonoverlapping(y.as_ptr(), dst.as_mut_ptr().cast::<i8>(), 256);
    }
}

/// The decode without VBMI (AVX-VNNI's lanes, and AVX-512's without VBMI): each group's
/// eight points fetched from the grid table (`avx2::iq3_xxs_grid`, by `M`'s rule), the
/// block's signs made in registers ([`even_sign_masks`]).
///
/// Criterion on an Intel Xeon (`expert/IQ3_XXS/gemm/avxvnni`, 512 × 2048, one core, G
/// products/s), with the signs from the table and the groups through
/// `SignedLattice::groups`' arrays: 10 tokens 47.8 → 52.1, 16 tokens 75.7 → 80.7.
pub(super) struct Lookup<M>(PhantomData<M>);

impl<M: IntDot> BlockDecode for Lookup<M> {
    type W = BlockIQ3_XXS;
    #[inline(always)]
    unsafe fn decode(x: &BlockIQ3_XXS, q: &mut [i32; 64]) -> ([i32; 8], f32) {
        let bias = _mm256_set1_epi8(BIAS);
        // Group by group, each register stored once made (the three arrays of
        // `SignedLattice::groups` went through the stack).
        let words = _mm256_loadu_si256(x.qs.as_ptr().add(64).cast());
        let negated = even_sign_masks(words);
        for (g, negated) in negated.iter().enumerate() {
            let grid = avx2::iq3_xxs_grid::<M>(x, g);
            // w + 64, w the grid byte with its sign.
            let w = _mm256_sub_epi8(_mm256_xor_si256(grid, *negated), *negated);
            _mm256_storeu_si256(q.as_mut_ptr().add(8 * g).cast(), _mm256_add_epi8(w, bias));
        }
        // 2 s + 1, s the top 4 bits of each group's word.
        let ls = _mm256_or_si256(
            _mm256_slli_epi32::<1>(_mm256_srli_epi32::<28>(words)),
            _mm256_set1_epi32(1),
        );
        // `d` is the block's first field and 98 bytes follow it.
        (multipliers(ls), _mm_cvtss_f32(f16x4(x.d.as_ptr())))
    }
}

/// The blocks of `row` decoded by `D` into `dst[b · stride]` for each block `b`.
///
/// # Safety
/// `D`'s CPU features are available; `dst` has room.
#[inline(always)]
unsafe fn decode_row<D: BlockDecode<NG>, const NG: usize>(
    row: &[D::W],
    dst: *mut RowBlock<NG>,
    stride: usize,
) {
    for (b, x) in row.iter().enumerate() {
        let out = &mut *dst.add(b * stride);
        let ls;
        (ls, out.d) = D::decode(x, &mut out.q);
        out.ls = ls.map(word_pair);
    }
}

/// Token groups `g0..g1` of `a` (`nb` blocks a token, `n_tok` tokens) into `dst` for 512-bit
/// lanes, each token in `side` adjacent lanes (1: 16 tokens a group; 2: 8, one lane for each
/// row of a pair; 4: 4, one for each row of a quad): 4 bytes of each token a register, in
/// `D`'s slot order, gathered; `neg` from the same registers. Lanes past the last token hold
/// zeros.
///
/// # Safety
/// AVX-512 F, BW and VNNI are available; `dst` has room for `(g1 - g0) · nb` blocks.
#[inline(always)]
pub(super) unsafe fn repack_zmm<D: BlockDecode<NG>, const NG: usize>(
    a: &[BlockQ8_K],
    nb: usize,
    n_tok: usize,
    g0: usize,
    g1: usize,
    dst: *mut ActBlock<Zmm, NG>,
    side: usize,
) {
    let per_group = 16 / side;
    let tok_bytes = (nb * size_of::<BlockQ8_K>()) as i32;
    let offsets = _mm512_mullo_epi32(lane_tokens(side), _mm512_set1_epi32(tok_bytes));
    // A reordering decoder's activations come from a copy in slot order, 256 bytes a token.
    let mut reordered = [[0i32; 64]; 16];
    let reordered_offsets = _mm512_mullo_epi32(lane_tokens(side), _mm512_set1_epi32(256));
    let bias = _mm512_set1_epi8(BIAS);
    let zero = _mm512_setzero_si512();
    for g in g0..g1 {
        let tokens = (n_tok - g * per_group).min(per_group);
        let live = tokens * side;
        let mask: __mmask16 = ((1u32 << live) - 1) as u16;
        let first = a.as_ptr().add(g * per_group * nb);
        for b in 0..nb {
            let block = first.add(b).cast::<u8>();
            let out = &mut *dst.add((g - g0) * nb + b);
            let (qs, q_offsets) = if D::REORDERED {
                for (t, dst) in reordered.iter_mut().enumerate().take(tokens) {
                    D::reorder(&(*first.add(t * nb + b)).qs, dst);
                }
                (reordered.as_ptr().cast::<u8>(), reordered_offsets)
            } else {
                (block.add(offset_of!(BlockQ8_K, qs)), offsets)
            };
            for group in 0..NG {
                let mut sum = zero;
                for j in 0..64 / NG {
                    let k = D::slot(group, j);
                    let src = qs.add(4 * k).cast();
                    let q = _mm512_mask_i32gather_epi32::<1>(zero, mask, q_offsets, src);
                    out.q[k] = q;
                    sum = _mm512_dpbusd_epi32(sum, bias, q);
                }
                out.neg[group] = _mm512_sub_epi32(zero, sum);
            }
            let d = block.add(offset_of!(BlockQ8_K, d)).cast();
            out.d = _mm512_mask_i32gather_ps::<1>(_mm512_setzero_ps(), mask, offsets, d);
        }
    }
}

/// A lattice format with 16 tokens in the lanes (run by `token_lanes.rs`), blocks decoded by
/// `D` into `NG` groups.
pub(super) struct Lanes16<D, const NG: usize = 8>(PhantomData<D>);

impl<D: BlockDecode<NG>, const NG: usize> TokenLanes for Lanes16<D, NG> {
    type W = D::W;
    type A = BlockQ8_K;
    type RowBlock = RowBlock<NG>;
    type ActBlock = ActBlock<Zmm, NG>;
    type Sums = __m512;
    const LANES: usize = 16;
    const ACT_BYTES: usize = 512 << 10;

    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_K],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock<Zmm, NG>,
    ) {
        repack_zmm::<D, NG>(a, nb, n_tok, g0, g1, dst, 1)
    }

    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[D::W]], dst: *mut RowBlock<NG>, stride: usize) {
        decode_row::<D, NG>(rows[0], dst, stride)
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const RowBlock<NG>,
        acts: *const ActBlock<Zmm, NG>,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<Zmm, RowBlock<NG>, D, R, NG>(rows, acts, nb)
    }
}

// ---- 256-bit VNNI (AVX-VNNI) ----

/// Tokens from which a job on a 256-bit VNNI path runs with tokens in the lanes.
///
/// A row's decoded blocks meet every group of 8 tokens (`token_lanes::run`), so a partial
/// group costs only its products, not the lattice lookups: criterion on an Intel Xeon
/// (AVX-VNNI, one core, `expert/IQ3_XXS/gemm/avxvnni`, 512 × 2048, G products/s), 10 tokens
/// 33.9, 33.2 with the 2-token tail through [`PairChain`], 48.0, 48.7 in the lanes (seventeenth
/// session, BENCHMARKS.md); [`PairChain`] for 4 tokens 21.6 against 26.8 from 8 tokens' cost.
const LANES256_MIN: usize = 3;

/// `job` of IQ3_XXS on a 256-bit path with VNNI (see [`lanes256_or_chain`]).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn gemm256<M: IntDot>(job: Job<'_>) -> bool {
    lanes256_or_chain::<Lookup<M>, Lattice256<M>, M, 8>(job)
}

/// `job` on a 256-bit path with VNNI (`M::SATURATES` false): [`PairChain`] on the 256-bit
/// lattice tile `L` below [`LANES256_MIN`] tokens, [`Lanes8`] with `D`'s decode from there (a
/// last group of fewer than 8 tokens included); `false` for one token. Both keep `vec_dot`'s
/// block order.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; `gemm` checked the lengths.
#[inline(always)]
pub(super) unsafe fn lanes256_or_chain<D, L, M, const NG: usize>(job: Job<'_>) -> bool
where
    D: BlockDecode<NG>,
    L: LatticeTile<W = D::W>,
    M: IntDot,
{
    if job.n_tok < LANES256_MIN {
        return run::<PairChain<L>, 2, 4>(job);
    }
    token_lanes::run::<Lanes8<D, M, NG>, 4>(job);
    true
}

/// Lane 0 of each of four registers, in one.
#[inline(always)]
unsafe fn lane0s(v: [__m128; 4]) -> __m128 {
    _mm_castpd_ps(_mm_unpacklo_pd(
        _mm_castps_pd(_mm_unpacklo_ps(v[0], v[1])),
        _mm_castps_pd(_mm_unpacklo_ps(v[2], v[3])),
    ))
}

/// A lattice format with 8 tokens in the lanes on a 256-bit VNNI path (`M`'s `vpdpbusd`; run
/// by `token_lanes.rs`), blocks decoded by `D` into `NG` groups, in element order.
pub(super) struct Lanes8<D, M, const NG: usize = 8>(PhantomData<(D, M)>);

impl<D: BlockDecode<NG>, M: IntDot, const NG: usize> TokenLanes for Lanes8<D, M, NG> {
    type W = D::W;
    type A = BlockQ8_K;
    type RowBlock = RowBlock<NG>;
    type ActBlock = ActBlock<Ymm<M>, NG>;
    type Sums = __m256;
    const LANES: usize = 8;
    /// Within L2 (1 MiB and more on the CPUs with AVX-VNNI).
    const ACT_BYTES: usize = 256 << 10;

    /// Loads and transposes 8 tokens' groups of 32 bytes (no gathers); `neg` per group of `NG`
    /// from the transposed registers.
    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_K],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock<Ymm<M>, NG>,
    ) {
        const {
            assert!(
                !D::REORDERED,
                "the transposes read the activations in element order"
            )
        };
        let bias = _mm256_set1_epi8(BIAS);
        let zero = _mm256_setzero_si256();
        for g in g0..g1 {
            let live = (n_tok - g * 8).min(8);
            for b in 0..nb {
                let out = &mut *dst.add((g - g0) * nb + b);
                let mut d = [0.0f32; 8];
                for (t, d) in d.iter_mut().enumerate().take(live) {
                    *d = a[(g * 8 + t) * nb + b].scale();
                }
                out.d = _mm256_loadu_ps(d.as_ptr());
                for piece in 0..8 {
                    let mut rows = [zero; 8];
                    for (t, row) in rows.iter_mut().enumerate().take(live) {
                        let qs = a[(g * 8 + t) * nb + b].qs.as_ptr().add(32 * piece);
                        *row = _mm256_loadu_si256(qs.cast());
                    }
                    let q = transpose8(&rows);
                    out.q[8 * piece..8 * piece + 8].copy_from_slice(&q);
                }
                for group in 0..NG {
                    let mut sum = zero;
                    for j in 0..64 / NG {
                        sum = M::dot_u8i8(sum, bias, out.q[D::slot(group, j)]);
                    }
                    out.neg[group] = _mm256_sub_epi32(zero, sum);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[D::W]], dst: *mut RowBlock<NG>, stride: usize) {
        decode_row::<D, NG>(rows[0], dst, stride)
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const RowBlock<NG>,
        acts: *const ActBlock<Ymm<M>, NG>,
        nb: usize,
    ) -> [__m256; R] {
        lanes_tile::<Ymm<M>, RowBlock<NG>, D, R, NG>(rows, acts, nb)
    }
}
