//! AVX2 tiles (also AVX-VNNI): the kernels of `dot/x86/avx2`, generic over the integer dot
//! [`IntDot`], cut where the weight decode and the activation preparation end. Same integer sums
//! per lane, same f32 products, FMA chains and reductions, so each (row, token) result is
//! bit-identical to `vec_dot` on the same path.

use std::arch::x86_64::*;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::super::tile::{run, Job, Tile, FEW_MAX};
use super::affine_quad_avx2::AffineQuad;
use super::block_order_avx2;
use super::iq3_xxs_lanes::TileLattice;
use super::paired_lattice::PairedLattice;
use crate::dot::x86::avx2::iq2::nibble_scales;
use crate::dot::x86::avx2::iq3::{iq3_s_indices, iq3_s_points, Partials};
use crate::dot::x86::avx2::k_quants::{q6_k_quants, q6_k_scale_pair, AffineK};
use crate::dot::x86::avx2::lattice::{
    bits_at, even_sign_masks, pick_pair, points32, points64, u32_at,
};
use crate::dot::x86::avx2::legacy::iq4nl_table;
use crate::dot::x86::avx2::q4_k;
use crate::dot::x86::bytes_from_bits;
use crate::dot::x86::{block_ptr, f16, f16x4, hsum_ps, hsum_ps128, load32, nibbles32, IntDot};
use crate::iq2::BlockIQ2_S;
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};
use crate::iq4::BlockIQ4_XS;
use crate::iq_tables::{IQ2S_GRID, IQ3XXS_GRID};
use crate::k_quants::{scales_mins_k4, BlockQ4_K, BlockQ5_K, BlockQ6_K};
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};
use crate::q8_k::BlockQ8_K;
use crate::{Block, BlockIQ4_NL, GgmlType};

/// The tiled types on this path; `false` (nothing written) for the others and for one-token
/// jobs that `run` leaves to the decode row loop.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available; lengths checked by `gemm`.
#[inline(always)]
pub(super) unsafe fn gemm<M: IntDot>(ty: GgmlType, job: Job<'_>) -> bool {
    use GgmlType as T;
    match ty {
        T::Q4_0 => block_order_avx2::gemm::<BlockQ4_0, M>(job),
        T::Q5_0 => block_order_avx2::gemm::<BlockQ5_0, M>(job),
        T::Q8_0 => block_order_avx2::gemm::<BlockQ8_0, M>(job),
        T::IQ4_NL => block_order_avx2::gemm::<BlockIQ4_NL, M>(job),
        T::Q4_1 if job.n_tok <= FEW_MAX => run::<AffineQuad<BlockQ4_1, M>, 1, 4>(job),
        T::Q5_1 if job.n_tok <= FEW_MAX => run::<AffineQuad<BlockQ5_1, M>, 1, 4>(job),
        // Four rows a token: criterion (Zen 5, plain AVX2, G products/s) `gemm/Q4_1/…/4096`
        // 53–54 → 62, `expert/Q4_1/…/10` 51 → 56, `…/32` 53 → 60 against the former
        // one-block tile's 3 × 2 (four accumulators a pair, which spilled).
        T::Q4_1 => run::<AffineQuad<BlockQ4_1, M>, 4, 1>(job),
        T::Q5_1 => run::<AffineQuad<BlockQ5_1, M>, 4, 1>(job),
        // One or two tokens in the row form: no transpose per row (one token, criterion:
        // AVX-VNNI +30 %, AVX2 +15 %; two, +5 %). From three the transpose, paid once per
        // row, costs less than folding each pair's sums (four tokens: row form 3 % slower).
        T::Q4_K if job.n_tok <= 2 => run::<Q4K<M, true>, 4, 2>(job),
        T::Q4_K => run::<Q4K<M, false>, 4, 2>(job),
        T::Q5_K => run::<AffineKTile<BlockQ5_K, M>, 4, 4>(job),
        T::Q6_K => run::<Q6K<M>, 4, 4>(job),
        T::IQ4_XS => run::<IQ4XS<M>, 4, 4>(job),
        T::IQ3_XXS => run::<PairedLattice<BlockIQ3_XXS, M>, 1, 4>(job),
        T::IQ3_S => run::<PairedLattice<BlockIQ3_S, M>, 1, 4>(job),
        T::IQ2_S => run::<Lattice<BlockIQ2_S, M>, 1, 4>(job),
        _ => false,
    }
}

/// Q5_K against Q8_K.
pub(super) struct AffineKTile<X, M>(PhantomData<(X, M)>);

impl<X: AffineK + Block, M: IntDot> Tile for AffineKTile<X, M> {
    type W = X;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Quants of the 8 sub-blocks, their scales as i16 lanes, the mins as i16, `[d, dmin, ..]`.
    type Dec = ([__m256i; 8], [__m256i; 8], __m128i, __m128);
    /// Quants, pair sums of `bsums`, `d_y` in every lane.
    type Prep = (*const i8, __m128i, __m128);
    /// Products; minimum terms.
    type Acc = (__m256, __m128);

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let x = &*w;
        let (scales, mins) = scales_mins_k4(x.packed_scales());
        let scales8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64));
        let scales16 = _mm256_broadcastsi128_si256(scales8);
        let mut q = [_mm256_setzero_si256(); 8];
        let mut sc = [_mm256_setzero_si256(); 8];
        for c in 0..4 {
            (q[2 * c], q[2 * c + 1]) = x.quants(c);
        }
        for (g, sc) in sc.iter_mut().enumerate() {
            let pick = _mm256_set1_epi16(i16::from_le_bytes([2 * g as u8, 2 * g as u8 + 1]));
            *sc = _mm256_shuffle_epi8(scales16, pick);
        }
        let mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64));
        (q, sc, mins16, f16x4(block_ptr(x)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        let bsums = load32(y.bsums.as_ptr());
        let pairs = _mm_hadd_epi16(
            _mm256_castsi256_si128(bsums),
            _mm256_extracti128_si256::<1>(bsums),
        );
        (y.qs.as_ptr(), pairs, _mm_set1_ps(y.scale()))
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (_mm256_setzero_ps(), _mm_setzero_ps())
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let mut sum = _mm256_setzero_si256();
        for g in 0..8 {
            let p = _mm256_maddubs_epi16(w.0[g], load32(a.0.add(32 * g)));
            sum = M::madd_i16(sum, p, w.1[g]);
        }
        let d = _mm_mul_ps(w.3, a.2);
        let p = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc.0);
        let dmin = _mm_permute_ps::<0b01_01_01_01>(d);
        let min_terms = _mm_madd_epi16(w.2, a.1);
        (p, _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(min_terms), acc.1))
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], _: &[X], _: &[BlockQ8_K]) -> f32 {
        hsum_ps(acc[0].0) - hsum_ps128(acc[0].1)
    }
}

/// Q6_K against Q8_K.
pub(super) struct Q6K<M>(PhantomData<M>);

impl<M: IntDot> Tile for Q6K<M> {
    type W = BlockQ6_K;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Quants `q + 32` of each 32 elements, their scales as i16, the 16 scales as i16, `d`.
    type Dec = ([__m256i; 8], [__m256i; 8], __m256i, f32);
    /// Quants, `bsums`, `d_y`.
    type Prep = (*const i8, __m256i, f32);
    type Acc = __m256;

    #[inline(always)]
    unsafe fn decode(w: *const BlockQ6_K) -> Self::Dec {
        let x = &*w;
        let scales = _mm_loadu_si128(x.scales.as_ptr().cast());
        let mut q = [_mm256_setzero_si256(); 8];
        let mut sc = [_mm256_setzero_si256(); 8];
        for c in 0..2 {
            q[4 * c..4 * c + 4].copy_from_slice(&q6_k_quants(x, c));
            for t in 0..4 {
                sc[4 * c + t] = q6_k_scale_pair(scales, 4 * c + t);
            }
        }
        (q, sc, _mm256_cvtepi8_epi16(scales), f16(x.d))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        (y.qs.as_ptr(), load32(y.bsums.as_ptr()), y.scale())
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m256, w: &Self::Dec, a: &Self::Prep) -> __m256 {
        // The quants are stored as q + 32 (0..=63): Σ sc (q + 32) y - 32 Σ sc bsum.
        let offset = _mm256_madd_epi16(a.1, w.2);
        let mut sum = _mm256_setzero_si256();
        for i in 0..8 {
            let p = _mm256_maddubs_epi16(w.0[i], load32(a.0.add(32 * i)));
            sum = M::madd_i16(sum, p, w.1[i]);
        }
        let sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
        let d = _mm256_set1_ps(a.2 * w.3);
        _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc)
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m256; 2], _: &[BlockQ6_K], _: &[BlockQ8_K]) -> f32 {
        hsum_ps(acc[0])
    }
}

/// `acc + d_x·d_y · sum`, lane by lane: the float part of the 256-bit one-chain kernels
/// (`d_x`, `d_y` in lane 0; `sum` the block's exact integer sums).
///
/// # Safety
/// AVX2 and FMA are available.
#[inline(always)]
pub(super) unsafe fn add_scaled(acc: __m256, d_x: __m128, d_y: __m128, sum: __m256i) -> __m256 {
    let d = _mm_mul_ss(d_x, d_y);
    _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc)
}

/// IQ4_XS against Q8_K.
pub(super) struct IQ4XS<M>(PhantomData<M>);

impl<M: IntDot> Tile for IQ4XS<M> {
    type W = BlockIQ4_XS;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Table values `v` of the 8 sub-blocks, `|v|`, the sub-block scales as i16, `[d, ..]`.
    type Dec = ([__m256i; 8], [__m256i; 8], [i16; 8], __m128);
    /// Quants, `[d_y, ..]`.
    type Prep = (*const i8, __m128);
    type Acc = __m256;

    #[inline(always)]
    unsafe fn decode(w: *const BlockIQ4_XS) -> Self::Dec {
        let x = &*w;
        let table = iq4nl_table();
        let mut v = [_mm256_setzero_si256(); 8];
        let mut av = [_mm256_setzero_si256(); 8];
        let mut sc = [0i16; 8];
        for ib in 0..8 {
            let codes = nibbles32(x.qs[16 * ib..16 * ib + 16].try_into().unwrap());
            v[ib] = _mm256_shuffle_epi8(table, codes);
            av[ib] = _mm256_sign_epi8(v[ib], v[ib]);
            sc[ib] = x.scale(ib) as i16;
        }
        (v, av, sc, f16x4(block_ptr(x)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        (y.qs.as_ptr(), _mm_set_ss(y.scale()))
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m256, w: &Self::Dec, a: &Self::Prep) -> __m256 {
        let mut sum = _mm256_setzero_si256();
        for ib in 0..8 {
            let sy = _mm256_sign_epi8(load32(a.0.add(32 * ib)), w.0[ib]);
            let scale = _mm256_set1_epi16(w.2[ib]);
            sum = M::madd_i16(sum, _mm256_maddubs_epi16(w.1[ib], sy), scale);
        }
        add_scaled(acc, w.3, a.1, sum)
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m256; 2], _: &[BlockIQ4_XS], _: &[BlockQ8_K]) -> f32 {
        hsum_ps(acc[0])
    }
}

/// A lattice i-quant block whose `vec_dot` (`dot/x86/avx2/iq2.rs`, `iq3.rs`) negates
/// activation bytes by its sign bits (`negate_where`, or `vpsignb` by ±1 bytes for IQ3_XXS:
/// the same bytes, −128 included): per 32 elements, the grid bytes, the byte mask of the
/// negated ones and the i16 multipliers, and the kernel's final constant.
pub(super) trait SignedLattice: Partials {
    /// Grid bytes, sign byte masks (0xFF where negated) and multipliers of the 8 groups.
    ///
    /// # Safety
    /// AVX2, FMA, F16C and `M`'s instructions are available.
    unsafe fn groups<M: IntDot>(&self) -> [[__m256i; 8]; 3];
}

/// The three arrays of [`SignedLattice::groups`], not zeroed before they are filled (a
/// zeroed `[[__m256i; 8]; 3]` became a 768-byte `memset` call per decoded block).
type Groups = [[MaybeUninit<__m256i>; 8]; 3];

/// `out` once every entry was written.
///
/// # Safety
/// Every entry of `out` was written.
#[inline(always)]
unsafe fn written(out: Groups) -> [[__m256i; 8]; 3] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the caller wrote every entry.
    std::mem::transmute::<Groups, [[__m256i; 8]; 3]>(out)
}

impl SignedLattice for BlockIQ2_S {
    #[inline(always)]
    unsafe fn groups<M: IntDot>(&self) -> [[__m256i; 8]; 3] {
        let x = self;
        let scales = nibble_scales(&x.scales);
        let mut out: Groups = [[MaybeUninit::uninit(); 8]; 3];
        for ib in 0..8 {
            let qh = x.qh[ib] as usize;
            let g = |l: usize| IQ2S_GRID[x.qs[4 * ib + l] as usize | ((qh >> (2 * l)) & 3) << 8];
            out[0][ib].write(points64([g(0), g(1), g(2), g(3)]));
            out[1][ib].write(bytes_from_bits(bits_at(&x.qs, 32 + 4 * ib)));
            out[2][ib].write(pick_pair(scales[ib / 4], 2 * (ib % 4)));
        }
        written(out)
    }
}

/// The grid bytes of group `ib` of an IQ3_XXS block (its eight 4-byte lattice points), by
/// `vpgatherdd` where `M::GATHER`, else by loads.
///
/// # Safety
/// AVX2 and `M`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn iq3_xxs_grid<M: IntDot>(x: &BlockIQ3_XXS, ib: usize) -> __m256i {
    let q = &x.qs[8 * ib..8 * ib + 8];
    if M::GATHER {
        let index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(q.as_ptr().cast()));
        // SAFETY: every index is a byte, IQ3XXS_GRID has 256 entries.
        _mm256_i32gather_epi32::<4>(IQ3XXS_GRID.as_ptr().cast(), index)
    } else {
        points32(std::array::from_fn(|k| IQ3XXS_GRID[q[k] as usize]))
    }
}

impl SignedLattice for BlockIQ3_XXS {
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `ib` also addresses the block's bytes
    unsafe fn groups<M: IntDot>(&self) -> [[__m256i; 8]; 3] {
        let x = self;
        let mut out: Groups = [[MaybeUninit::uninit(); 8]; 3];
        // The 8 groups' sign and scale words follow the 64 grid indices.
        let masks = even_sign_masks(_mm256_loadu_si256(x.qs.as_ptr().add(64).cast()));
        for ib in 0..8 {
            out[0][ib].write(iq3_xxs_grid::<M>(x, ib));
            let aux = u32_at(&x.qs, 64 + 4 * ib);
            out[1][ib].write(masks[ib]);
            out[2][ib].write(_mm256_set1_epi16(2 * (aux >> 28) as i16 + 1));
        }
        written(out)
    }
}

impl SignedLattice for BlockIQ3_S {
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `ib` also addresses the block's bytes
    unsafe fn groups<M: IntDot>(&self) -> [[__m256i; 8]; 3] {
        let x = self;
        let index = iq3_s_indices(x);
        let mut out: Groups = [[MaybeUninit::uninit(); 8]; 3];
        for ib in 0..8 {
            out[0][ib].write(iq3_s_points::<M>(&index, ib));
            out[1][ib].write(bytes_from_bits(bits_at(&x.signs, 4 * ib)));
            let s = (x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
            out[2][ib].write(_mm256_set1_epi16(2 * s as i16 + 1));
        }
        written(out)
    }
}

/// A lattice block decoded for offset activations (`y + 128`, unsigned): the signed weight
/// bytes `w` of the 8 groups of 32 (grid byte with its sign, |w| <= 62), their i16
/// multipliers, and the offset's part of the kernel's integer lanes,
/// `C = Σ_g madd(maddubs(128, w_g), ls_g)`.
///
/// With `y' = y + 128` the pair sums `y'_0 w_0 + y'_1 w_1` stay within ±2 · 255 · 62 (no
/// `vpmaddubsw` saturation), so `Σ_g madd(maddubs(y'_g, w_g), ls_g) − C` is the kernel's
/// `Σ_g madd(maddubs(|w_g|, ±y_g), ls_g)` exactly, lane for lane: the signs are applied once
/// per row instead of once per (row, token) pair. This holds for activation quants in
/// −127..=127, the range Q8_K quantization writes (`q8_k.rs`); a −128, which the kernel's sign
/// flip wraps, would give another sum here.
pub(super) type OffsetLattice = ([__m256i; 8], [__m256i; 8], __m256i);

/// [`OffsetLattice`] of a block.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn offset_groups<X: SignedLattice, M: IntDot>(x: &X) -> OffsetLattice {
    let [grid, mask, ls] = x.groups::<M>();
    let offset = _mm256_set1_epi8(-128);
    let mut c = _mm256_setzero_si256();
    // No closures: they would not inherit the caller's target features.
    let w = signed_groups(&grid, &mask);
    for g in 0..8 {
        c = M::madd_i16(c, _mm256_maddubs_epi16(offset, w[g]), ls[g]);
    }
    (w, ls, c)
}

/// The signed weights of a lattice block's 8 groups: `grid` negated where `mask` is all ones,
/// `(grid ^ mask) − mask` (the groups [`SignedLattice::groups`] returns).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(super) unsafe fn signed_groups(grid: &[__m256i; 8], mask: &[__m256i; 8]) -> [__m256i; 8] {
    let mut w = [_mm256_setzero_si256(); 8];
    for g in 0..8 {
        w[g] = _mm256_sub_epi8(_mm256_xor_si256(grid[g], mask[g]), mask[g]);
    }
    w
}

/// Q8_K activations offset for [`OffsetLattice`] weights: the 8 groups' `y + 128` bytes,
/// `[d_y, ..]`.
pub(super) type OffsetQ8k = ([__m256i; 8], __m128);

/// [`OffsetQ8k`] of the block at `a`.
///
/// # Safety
/// `a` points at a readable block; AVX2 is available.
#[inline(always)]
pub(super) unsafe fn offset_q8k(a: *const BlockQ8_K) -> OffsetQ8k {
    let y = &*a;
    let offset = _mm256_set1_epi8(-128);
    let mut q = [_mm256_setzero_si256(); 8];
    for (g, q) in q.iter_mut().enumerate() {
        *q = _mm256_xor_si256(load32(y.qs.as_ptr().add(32 * g)), offset);
    }
    (q, _mm_set_ss(y.scale()))
}

/// A block's integer lanes in [`Lattice`]'s step: the `vec_dot` kernel's 8 i32 lanes (exact;
/// they add up to the block's sum).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(super) unsafe fn lattice_sums<M: IntDot>(
    w: &(OffsetLattice, __m128),
    a: &OffsetQ8k,
) -> __m256i {
    let (wq, ls, c) = &w.0;
    let mut sums = [_mm256_setzero_si256(); 2];
    for g in 0..8 {
        sums[g % 2] = M::madd_i16(sums[g % 2], _mm256_maddubs_epi16(a.0[g], wq[g]), ls[g]);
    }
    _mm256_sub_epi32(_mm256_add_epi32(sums[0], sums[1]), *c)
}

/// [`lattice_sums`] of every (row, token) pair of an `R × T` tile, group by group: one group's
/// registers of every row and token live at a time (a whole decoded row is 18 registers, more
/// than AVX2 has). Exact integers, so the same lanes.
///
/// # Safety
/// As for [`lattice_sums`].
#[inline(always)]
unsafe fn lattice_sums_tile<M: IntDot, const R: usize, const T: usize>(
    w: [&(OffsetLattice, __m128); R],
    a: [&OffsetQ8k; T],
) -> [[__m256i; T]; R] {
    let mut sums = [[_mm256_setzero_si256(); T]; R];
    for g in 0..8 {
        for i in 0..R {
            let (wq, ls, _) = &w[i].0;
            for j in 0..T {
                let pairs = _mm256_maddubs_epi16(a[j].0[g], wq[g]);
                sums[i][j] = M::madd_i16(sums[i][j], pairs, ls[g]);
            }
        }
    }
    for i in 0..R {
        for sum in sums[i].iter_mut() {
            *sum = _mm256_sub_epi32(*sum, w[i].0 .2);
        }
    }
    sums
}

/// A lattice i-quant against Q8_K: one block per step, one chain; the grid gather, signs and
/// scales decoded once per row ([`OffsetLattice`]), each token's activations offset once per
/// product, a (row, token) pair costing a `vpmaddubsw` and one i16 multiply-add per 32
/// products (no sign flips). Same integer lanes as the `vec_dot` kernel, then its float part:
/// the same bits. IQ2_S's tile; IQ3_XXS and IQ3_S, whose smaller grid bytes let two groups
/// share the multiply-add, run `paired_lattice.rs`.
pub(super) struct Lattice<X, M>(PhantomData<(X, M)>);

impl<X: SignedLattice, M: IntDot> Tile for Lattice<X, M> {
    type W = X;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    const PREP_ONCE: bool = true;
    /// One token keeps the `vec_dot` row loop (signs on the activations, no offset part).
    const ONE_TOKEN: bool = false;
    /// [`OffsetLattice`], `[d, ..]`.
    type Dec = (OffsetLattice, __m128);
    type Prep = OffsetQ8k;
    type Acc = __m256;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        (offset_groups::<X, M>(&*w), f16x4(block_ptr(&*w)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        offset_q8k(a)
    }
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m256, w: &Self::Dec, a: &Self::Prep) -> __m256 {
        add_scaled(acc, w.1, a.1, lattice_sums::<M>(w, a))
    }
    #[inline(always)]
    unsafe fn step_tile<const R: usize, const T: usize>(
        acc: &mut [[__m256; T]; R],
        w: [&Self::Dec; R],
        a: [&Self::Prep; T],
    ) {
        let sums = lattice_sums_tile::<M, R, T>(w, a);
        for i in 0..R {
            for j in 0..T {
                acc[i][j] = add_scaled(acc[i][j], w[i].1, a[j].1, sums[i][j]);
            }
        }
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m256; 2], _: &[X], _: &[BlockQ8_K]) -> f32 {
        X::FINAL * hsum_ps(acc[0])
    }
}

impl<X: SignedLattice, M: IntDot> TileLattice for Lattice<X, M> {
    type Int = M;
    #[inline(always)]
    unsafe fn block_lanes(w: &Self::Dec, a: &Self::Prep) -> __m256i {
        lattice_sums::<M>(w, a)
    }
    #[inline(always)]
    unsafe fn block_d_x(w: &Self::Dec) -> __m128 {
        w.1
    }
    #[inline(always)]
    unsafe fn block_d_y(a: &Self::Prep) -> __m128 {
        a.1
    }
}

/// Q4_K against Q8_K (`dot/x86/avx2/q4_k.rs`): over sub-block-transposed quants, or in the
/// row form with `ROW` (one or two tokens: no transpose per row, the sums folded per pair
/// instead).
/// Both forms give the same bits.
pub(super) struct Q4K<M, const ROW: bool>(PhantomData<M>);

impl<M: IntDot, const ROW: bool> Tile for Q4K<M, ROW> {
    type W = BlockQ4_K;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    const PREP_ONCE: bool = true;
    type Dec = q4_k::Dec;
    type Prep = q4_k::Prep;
    type Acc = __m256;

    #[inline(always)]
    unsafe fn decode(w: *const BlockQ4_K) -> Self::Dec {
        if ROW {
            q4_k::decode_row(&*w)
        } else {
            q4_k::decode(&*w)
        }
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        if ROW {
            q4_k::prep_row(&*a)
        } else {
            q4_k::prep(&*a)
        }
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let mut tile = [[acc]];
        Self::step_tile::<1, 1>(&mut tile, [w], [a]);
        tile[0][0]
    }
    #[inline(always)]
    unsafe fn step_tile<const R: usize, const T: usize>(
        acc: &mut [[__m256; T]; R],
        w: [&Self::Dec; R],
        a: [&Self::Prep; T],
    ) {
        if ROW {
            q4_k::step_row_tile::<M, R, T>(acc, w, a)
        } else {
            q4_k::step_tile::<M, R, T>(acc, w, a)
        }
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], _: &[BlockQ4_K], _: &[BlockQ8_K]) -> f32 {
        q4_k::finish(acc[0])
    }
}
