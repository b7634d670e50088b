//! AVX-512 tiles: the kernels of `dot/x86/avx512`, cut at the point where the weight decode and
//! the activation preparation end. Same integer sums per lane, same f32 products, FMA chains and
//! reductions, so each (row, token) result is bit-identical to `vec_dot` on this path. The
//! symmetric 32-element formats run in block order instead (`block_order.rs`).

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::super::tile::{run, Job, Tile, FEW_MAX};
use super::avx2::{offset_groups, SignedLattice};
use super::iq3_xxs_lanes::LatticeTile;
use super::reduce::{hsum4_ps128, lanes, reduce4};
use super::{block_order, iq3_xxs_lanes, lattice_lanes};
use crate::dot::x86::avx2::legacy as avx2;
use crate::dot::x86::avx512::k_quants::{load_pair, scale_pick, AffineK};
use crate::dot::x86::avx512::legacy::{affine_pair, Affine};
use crate::dot::x86::avx512::q4_k;
use crate::dot::x86::{block_ptr, f16, f16x4, hsum_ps128, Avx512Vnni};
use crate::iq4::BlockIQ4_XS;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::k_quants::scales_mins_k4;
use crate::k_quants::{BlockQ4_K, BlockQ5_K, BlockQ6_K};
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::q8_k::BlockQ8_K;
use crate::{BlockIQ4_NL, GgmlType};

/// The tiled types on this path; `false` (nothing written) for the others and for one-token
/// jobs that `run` leaves to the decode row loop.
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available; lengths checked by `gemm`.
#[inline(always)]
pub(super) unsafe fn gemm(ty: GgmlType, job: Job<'_>) -> bool {
    use GgmlType as T;
    match ty {
        T::Q4_0 => block_order::gemm::<BlockQ4_0>(job),
        T::Q5_0 => block_order::gemm::<BlockQ5_0>(job),
        T::Q8_0 => block_order::gemm::<BlockQ8_0>(job),
        T::IQ4_NL => block_order::gemm::<BlockIQ4_NL>(job),
        T::Q4_1 if job.n_tok <= FEW_MAX => run::<AffineQuad<BlockQ4_1>, 1, 4>(job),
        T::Q5_1 if job.n_tok <= FEW_MAX => run::<AffineQuad<BlockQ5_1>, 1, 4>(job),
        T::Q4_1 => run::<AffinePair<BlockQ4_1>, 2, 4>(job),
        T::Q5_1 => run::<AffinePair<BlockQ5_1>, 2, 4>(job),
        T::Q4_K => run::<Q4K, 4, 2>(job),
        T::Q5_K => run::<AffineKTile<BlockQ5_K>, 4, 4>(job),
        T::Q6_K => run::<Q6K, 4, 4>(job),
        T::IQ4_XS => run::<IQ4XS, 4, 4>(job),
        T::IQ3_XXS => iq3_xxs_lanes::gemm(job),
        T::IQ3_S => lattice_lanes::gemm_iq3_s(job),
        T::IQ2_S => lattice_lanes::gemm_iq2_s(job),
        _ => false,
    }
}

/// The f16 fields at the starts of two blocks: lanes `[a0, b0, a1, b1]` (`d` then `m` or `s`).
#[inline(always)]
unsafe fn halves_pair<X>(a: *const X, b: *const X) -> __m128 {
    let (a, b) = (_mm_loadl_epi64(a.cast()), _mm_loadl_epi64(b.cast()));
    _mm_cvtph_ps(_mm_unpacklo_epi16(a, b))
}

/// Lanes 0..8 = lane 0 of `s`, lanes 8..16 = lane 1 (the kernels' `spread_pair`).
#[inline(always)]
unsafe fn spread_pair(s: __m128) -> __m512 {
    let idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s))
}

/// An affine legacy format with its 256-bit kernel for an odd last block.
pub(super) trait AffineTail: Affine + crate::Block {
    unsafe fn tail(x: &[Self], y: &[BlockQ8_1]) -> f32;
}

impl AffineTail for BlockQ4_1 {
    #[inline(always)]
    unsafe fn tail(x: &[Self], y: &[BlockQ8_1]) -> f32 {
        avx2::q4_1::<Avx512Vnni>(x, y)
    }
}

impl AffineTail for BlockQ5_1 {
    #[inline(always)]
    unsafe fn tail(x: &[Self], y: &[BlockQ8_1]) -> f32 {
        avx2::q5_1::<Avx512Vnni>(x, y)
    }
}

/// Q4_1 and Q5_1 against Q8_1: two blocks per step.
pub(super) struct AffinePair<X>(PhantomData<X>);

impl<X: AffineTail> Tile for AffinePair<X> {
    type W = X;
    type A = BlockQ8_1;
    const STEP: usize = 2;
    const CHAINS: usize = 2;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Quants; `[d_a, d_b, m_a, m_b]`.
    type Dec = (__m512i, __m128);
    /// Quants; `[d_a, d_b, s_a, s_b]`.
    type Prep = (__m512i, __m128);
    /// Products; the kernel's minimum terms (lanes 2, 3).
    type Acc = (__m512, __m128);

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        (X::quants_pair(&*w, &*w.add(1)), halves_pair(w, w.add(1)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_1) -> Self::Prep {
        let y = load_pair((*a).qs.as_ptr(), (*a.add(1)).qs.as_ptr());
        (y, halves_pair(a, a.add(1)))
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (_mm512_setzero_ps(), _mm_setzero_ps())
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.0, a.0);
        let scales = _mm_mul_ps(w.1, a.1);
        let p = _mm512_fmadd_ps(spread_pair(scales), _mm512_cvtepi32_ps(sum), acc.0);
        (p, _mm_add_ps(acc.1, scales))
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], w: &[X], a: &[BlockQ8_1]) -> f32 {
        let mins = _mm_add_ps(acc[0].1, acc[1].1);
        let mins = _mm_add_ss(
            _mm_movehl_ps(mins, mins),
            _mm_movehdup_ps(_mm_movehl_ps(mins, mins)),
        );
        _mm512_reduce_add_ps(_mm512_add_ps(acc[0].0, acc[1].0))
            + _mm_cvtss_f32(mins)
            + X::tail(w, a)
    }
}

/// The quants of activation blocks `a`, `a + 1` in [`Affine::quants_pair_split`]'s order:
/// qwords `[a 0, a 1, b 0, b 1, a 2, a 3, b 2, b 3]` (each block's first 16 bytes, then their
/// last 16). A function, not a closure: a closure would not inherit the target features.
#[inline(always)]
unsafe fn acts_pair_split(a: *const BlockQ8_1) -> __m512i {
    let y = load_pair((*a).qs.as_ptr(), (*a.add(1)).qs.as_ptr());
    _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7), y)
}

/// Q4_1 and Q5_1 against Q8_1 for a few tokens (decode): [`AffinePair`]'s two chains as one
/// step of four blocks (a pair for each chain), each pair's quants in the cheaper order of
/// [`Affine::quants_pair_split`] and the four blocks' scales multiplied in one register. The
/// activations are put in the same order, so every lane computes what the same lane of
/// `AffinePair` computes up to a fixed swap of 128-bit chunks 1 and 2, which `finish` undoes
/// before the kernel's reduction: the same bits, from about half the instructions a block.
pub(super) struct AffineQuad<X>(PhantomData<X>);

impl<X: AffineTail> Tile for AffineQuad<X> {
    type W = X;
    type A = BlockQ8_1;
    const STEP: usize = 4;
    const CHAINS: usize = 1;
    const ONE_TOKEN: bool = true;
    /// Quants of blocks 0, 1 and 2, 3 (split order); `[d0, m0, d1, m1, .., d3, m3]`.
    type Dec = (__m512i, __m512i, __m256);
    /// Activations of blocks 0, 1 and 2, 3 (split order); `[d0, s0, .., d3, s3]`.
    type Prep = (__m512i, __m512i, __m256);
    /// `AffinePair`'s two chains (lanes in split order) and their minimum terms: lanes 1, 3
    /// are chain 0's lanes 2, 3, lanes 5, 7 chain 1's.
    type Acc = (__m512, __m512, __m256);

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        (
            X::quants_pair_split(&*w, &*w.add(1)),
            X::quants_pair_split(&*w.add(2), &*w.add(3)),
            avx2::halves_pairs4(w.cast(), size_of::<X>()),
        )
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_1) -> Self::Prep {
        (
            acts_pair_split(a),
            acts_pair_split(a.add(2)),
            avx2::halves_pairs4(a.cast(), size_of::<BlockQ8_1>()),
        )
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm256_setzero_ps(),
        )
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let zero = _mm512_setzero_si512();
        let scales = _mm256_mul_ps(w.2, a.2);
        let wide = _mm512_castps256_ps512(scales);
        // Split order: chunks 0, 2 take the pair's first block, chunks 1, 3 its second.
        let first = _mm512_set_epi32(2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0);
        let second = _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 6, 6, 6, 6, 4, 4, 4, 4);
        let s0 = _mm512_dpbusd_epi32(zero, w.0, a.0);
        let s1 = _mm512_dpbusd_epi32(zero, w.1, a.1);
        let acc0 = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(first, wide),
            _mm512_cvtepi32_ps(s0),
            acc.0,
        );
        let acc1 = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(second, wide),
            _mm512_cvtepi32_ps(s1),
            acc.1,
        );
        (acc0, acc1, _mm256_add_ps(acc.2, scales))
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], w: &[X], a: &[BlockQ8_1]) -> f32 {
        let (acc0, acc1, mins) = acc[0];
        // Back to `AffinePair`'s lanes (chunks 1 and 2 swapped back).
        let mut acc0 = _mm512_shuffle_f32x4::<0b11_01_10_00>(acc0, acc0);
        let acc1 = _mm512_shuffle_f32x4::<0b11_01_10_00>(acc1, acc1);
        // Its minimum terms: chain 0's in lanes 2, 3 of the low half, chain 1's of the high.
        let m = _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(0, 0, 1, 3, 0, 0, 5, 7));
        let (mut mins0, mins1) = (_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        // A last pair after the whole steps goes to chain 0, as in `AffinePair`.
        let pair = w.len() / 2 * 2;
        if pair == 2 {
            (acc0, mins0) = affine_pair(&w[0], &w[1], &a[0], &a[1], acc0, mins0);
        }
        AffinePair::<X>::finish([(acc0, mins0), (acc1, mins1)], &w[pair..], &a[pair..])
    }
}

/// Q5_K against Q8_K.
pub(super) struct AffineKTile<X>(PhantomData<X>);

impl<X: AffineK + crate::Block> Tile for AffineKTile<X> {
    type W = X;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Quants (k = 0 lo, hi, k = 1 lo, hi), their scales as i16, the mins as i16,
    /// `[d, dmin, ..]`.
    type Dec = ([__m512i; 4], [__m512i; 4], __m128i, __m128);
    /// Activation pairs in the quants' order, pair sums of `bsums`, `d_y` in every lane.
    type Prep = ([__m512i; 4], __m128i, __m128);
    /// Products; minimum terms.
    type Acc = (__m512, __m128);

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let x = &*w;
        let (scales, mins) = scales_mins_k4(x.packed_scales());
        let sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64)));
        let (lo0, hi0) = x.quants(0);
        let (lo1, hi1) = x.quants(1);
        let mut sc = [sc16; 4];
        for (k, sc) in sc.iter_mut().enumerate() {
            // Sub-blocks (4k', 4k' + 2) then (4k' + 1, 4k' + 3) for k' = k / 2.
            let g = 4 * (k / 2) + k % 2;
            *sc = _mm512_shuffle_epi8(sc16, scale_pick(g, g + 2));
        }
        (
            [lo0, hi0, lo1, hi1],
            sc,
            _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64)),
            f16x4(block_ptr(x)),
        )
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        let yq = y.qs.as_ptr();
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let pairs = _mm_hadd_epi16(
            _mm256_castsi256_si128(bsums),
            _mm256_extracti128_si256::<1>(bsums),
        );
        (
            [
                load_pair(yq, yq.add(64)),
                load_pair(yq.add(32), yq.add(96)),
                load_pair(yq.add(128), yq.add(192)),
                load_pair(yq.add(160), yq.add(224)),
            ],
            pairs,
            _mm_set1_ps(y.scale()),
        )
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        (_mm512_setzero_ps(), _mm_setzero_ps())
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let mut sum = _mm512_setzero_si512();
        for i in 0..4 {
            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(w.0[i], a.0[i]), w.1[i]);
        }
        let d = _mm_mul_ps(w.3, a.2);
        let p = _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), acc.0);
        let dmin = _mm_permute_ps::<0b01_01_01_01>(d);
        let min_terms = _mm_madd_epi16(w.2, a.1);
        (p, _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(min_terms), acc.1))
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], _: &[X], _: &[BlockQ8_K]) -> f32 {
        _mm512_reduce_add_ps(acc[0].0) - hsum_ps128(acc[0].1)
    }
    #[inline(always)]
    unsafe fn finish4(acc: [[Self::Acc; 2]; 4]) -> [f32; 4] {
        let products = reduce4([acc[0][0].0, acc[1][0].0, acc[2][0].0, acc[3][0].0]);
        let mins = hsum4_ps128([acc[0][0].1, acc[1][0].1, acc[2][0].1, acc[3][0].1]);
        lanes(_mm_sub_ps(products, mins))
    }
}

/// Q6_K against Q8_K.
pub(super) struct Q6K;

impl Tile for Q6K {
    type W = BlockQ6_K;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Quants `q + 32` in activation order (64 each), their scales as i16 (4 sub-blocks each),
    /// the 16 scales as i16, `d`.
    type Dec = ([__m512i; 4], [__m512i; 4], __m256i, f32);
    /// Quants, `bsums`, `d_y`.
    type Prep = (*const i8, __m256i, f32);
    type Acc = __m512;

    #[inline(always)]
    unsafe fn decode(w: *const BlockQ6_K) -> Self::Dec {
        let x = &*w;
        let (low4, low2) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x03));
        let scales = _mm256_broadcastsi128_si256(_mm_loadu_si128(x.scales.as_ptr().cast()));
        let mut q = [_mm512_setzero_si512(); 4];
        let mut sc = [_mm512_setzero_si512(); 4];
        for c in 0..2 {
            let ql = _mm512_loadu_si512(x.ql.as_ptr().add(64 * c).cast());
            let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * c).cast());
            let h = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), _mm256_srli_epi16::<2>(qh));
            q[2 * c] = _mm512_or_si512(
                _mm512_and_si512(ql, low4),
                _mm512_slli_epi16::<4>(_mm512_and_si512(h, low2)),
            );
            q[2 * c + 1] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(ql), low4),
                _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srli_epi16::<4>(h), low2)),
            );
            for half in 0..2 {
                let k = (8 * c + 4 * half) as i64;
                let pick = _mm256_set_epi64x(
                    (k + 3) * 0x0101_0101_0101_0101,
                    (k + 2) * 0x0101_0101_0101_0101,
                    (k + 1) * 0x0101_0101_0101_0101,
                    k * 0x0101_0101_0101_0101,
                );
                sc[2 * c + half] = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(scales, pick));
            }
        }
        let sc16 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(scales));
        (q, sc, sc16, f16(x.d))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        (y.qs.as_ptr(), bsums, y.scale())
    }
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m512, w: &Self::Dec, a: &Self::Prep) -> __m512 {
        // The quants are stored as q + 32 (0..=63): Σ sc (q + 32) y - 32 Σ sc bsum.
        let offset = _mm256_madd_epi16(a.1, w.2);
        let mut sum = _mm512_setzero_si512();
        for i in 0..4 {
            let yq = _mm512_loadu_si512(a.0.add(64 * i).cast());
            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(w.0[i], yq), w.1[i]);
        }
        let offset = _mm512_castsi256_si512(_mm256_slli_epi32::<5>(offset));
        let offset = _mm512_maskz_mov_epi32(0x00ff, offset);
        let sum = _mm512_sub_epi32(sum, offset);
        let d = _mm512_set1_ps(a.2 * w.3);
        _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc)
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m512; 2], _: &[BlockQ6_K], _: &[BlockQ8_K]) -> f32 {
        _mm512_reduce_add_ps(acc[0])
    }
    #[inline(always)]
    unsafe fn finish4(acc: [[__m512; 2]; 4]) -> [f32; 4] {
        lanes(reduce4([acc[0][0], acc[1][0], acc[2][0], acc[3][0]]))
    }
}

/// IQ4_XS against Q8_K.
pub(super) struct IQ4XS;

impl Tile for IQ4XS {
    type W = BlockIQ4_XS;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// One token runs through `few` (the token prepared once, not once per row); larger
    /// jobs prepare per group of rows (up front cost more in Qwen2.5's prefill).
    const ONE_TOKEN: bool = true;
    /// Table values + 128 of sub-block pairs, their scales, `[d, ..]`.
    type Dec = ([__m512i; 4], [__m512i; 4], __m128);
    /// Quants, `-128 Σ y` per lane of each sub-block pair, `d_y` in lane 0.
    type Prep = (*const i8, [__m512i; 4], __m128);
    type Acc = __m512;

    #[inline(always)]
    unsafe fn decode(w: *const BlockIQ4_XS) -> Self::Dec {
        let x = &*w;
        let table = _mm512_broadcast_i32x4(_mm_xor_si128(
            _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()),
            _mm_set1_epi8(-128),
        ));
        let low4 = _mm512_set1_epi8(0x0f);
        let mut v = [_mm512_setzero_si512(); 4];
        let mut sc = [_mm512_setzero_si512(); 4];
        for p in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * p).cast());
            let both =
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16::<4>(q));
            let ordered = _mm512_shuffle_i64x2::<0b11_01_10_00>(both, both);
            v[p] = _mm512_shuffle_epi8(table, _mm512_and_si512(ordered, low4));
            sc[p] = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_set1_epi32(x.scale(2 * p))),
                _mm256_set1_epi32(x.scale(2 * p + 1)),
            );
        }
        (v, sc, f16x4(block_ptr(x)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        let bias = _mm512_set1_epi8(-128);
        let mut neg = [_mm512_setzero_si512(); 4];
        for (p, neg) in neg.iter_mut().enumerate() {
            let yq = _mm512_loadu_si512(y.qs.as_ptr().add(64 * p).cast());
            let off = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, yq);
            *neg = _mm512_sub_epi32(_mm512_setzero_si512(), off);
        }
        (y.qs.as_ptr(), neg, _mm_set_ss(y.scale()))
    }
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: __m512, w: &Self::Dec, a: &Self::Prep) -> __m512 {
        let mut sum = _mm512_setzero_si512();
        for p in 0..4 {
            let yq = _mm512_loadu_si512(a.0.add(64 * p).cast());
            let sub = _mm512_dpbusd_epi32(a.1[p], w.0[p], yq);
            sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(sub, w.1[p]));
        }
        let d = _mm_mul_ss(w.2, a.2);
        _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), acc)
    }
    #[inline(always)]
    unsafe fn finish(acc: [__m512; 2], _: &[BlockIQ4_XS], _: &[BlockQ8_K]) -> f32 {
        _mm512_reduce_add_ps(acc[0])
    }
    #[inline(always)]
    unsafe fn finish4(acc: [[__m512; 2]; 4]) -> [f32; 4] {
        lanes(reduce4([acc[0][0], acc[1][0], acc[2][0], acc[3][0]]))
    }
}

/// Q4_K against Q8_K with `vpdpbusd` over sub-block-rearranged quants (`dot/x86/avx512/q4_k.rs`).
pub(super) struct Q4K;

impl Tile for Q4K {
    type W = BlockQ4_K;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    const PREP_ONCE: bool = true;
    const FEW_GROUP: usize = 8;
    type Dec = q4_k::Dec;
    type Prep = q4_k::Prep;
    type Acc = __m512;

    #[inline(always)]
    unsafe fn decode(w: *const BlockQ4_K) -> Self::Dec {
        q4_k::decode(&*w)
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        q4_k::prep(&*a)
    }
    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        q4_k::step(acc, w, a)
    }
    #[inline(always)]
    unsafe fn step_tile<const R: usize, const T: usize>(
        acc: &mut [[__m512; T]; R],
        w: [&Self::Dec; R],
        a: [&Self::Prep; T],
    ) {
        q4_k::step_tile::<R, T>(acc, w, a)
    }
    #[inline(always)]
    unsafe fn finish(acc: [Self::Acc; 2], _: &[BlockQ4_K], _: &[BlockQ8_K]) -> f32 {
        q4_k::finish(acc[0])
    }
}

/// A block's integer lanes in [`Lattice`]'s step: the `vec_dot` kernel's 8 i32 lanes (exact;
/// they add up to the block's sum).
///
/// # Safety
/// As for [`gemm`].
#[inline(always)]
pub(super) unsafe fn lattice_sums(
    w: &([__m512i; 4], [__m512i; 4], __m256i, __m128),
    a: &([__m512i; 4], __m128),
) -> __m256i {
    let mut sum = _mm512_setzero_si512();
    for p in 0..4 {
        sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(a.0[p], w.0[p]), w.1[p]);
    }
    let sum = _mm256_add_epi32(
        _mm512_castsi512_si256(sum),
        _mm512_extracti64x4_epi64::<1>(sum),
    );
    _mm256_sub_epi32(sum, w.2)
}

/// One 512-bit register of two 256-bit halves.
#[inline(always)]
unsafe fn halves(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// IQ2_S, IQ3_XXS and IQ3_S against Q8_K, two groups of 32 in each 512-bit step: the AVX2 tiles'
/// decode for offset activations ([`super::avx2::OffsetLattice`]: signed weight bytes, multipliers,
/// the offset's part) paired into 512-bit registers, each token's `y + 128` bytes prepared once per
/// product. This path's `vec_dot` for them is the AVX2 kernel with AVX-512 VNNI's `vpdpwssd`; its
/// per-block integer sums are exact, so adding group `2k` in the low half and `2k + 1` in the high
/// half of one register, then the halves, less the offset's part, gives its two 256-bit
/// accumulators' sum lane for lane. It runs as the block-order chain of a few tokens
/// ([`PairChain`]), whose float part is `vec_dot`'s on this path (block order for all three).
///
/// [`PairChain`]: super::iq3_xxs_lanes::PairChain
pub(super) struct Lattice<X>(PhantomData<X>);

impl<X: SignedLattice> LatticeTile for Lattice<X> {
    type W = X;
    type Int = Avx512Vnni;
    /// Signed weight bytes and multipliers of group pairs, the offset's part, `[d, ..]`.
    type Dec = ([__m512i; 4], [__m512i; 4], __m256i, __m128);
    /// `y + 128` bytes of group pairs, `[d_y, ..]`.
    type Prep = ([__m512i; 4], __m128);
    /// The gather, sign and scale decode costs several steps; the decoded step (9 registers)
    /// and eight accumulators fit the register file.
    const CHAIN_FEW_GROUP: usize = 8;

    #[inline(always)]
    unsafe fn decode(w: *const X) -> Self::Dec {
        let (wq, ls, c) = offset_groups::<X, Avx512Vnni>(&*w);
        // No closures: they would not inherit the caller's target features.
        let (mut wq2, mut ls2) = ([_mm512_setzero_si512(); 4], [_mm512_setzero_si512(); 4]);
        for p in 0..4 {
            wq2[p] = halves(wq[2 * p], wq[2 * p + 1]);
            ls2[p] = halves(ls[2 * p], ls[2 * p + 1]);
        }
        (wq2, ls2, c, f16x4(block_ptr(&*w)))
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
        let offset = _mm512_set1_epi8(-128);
        let mut q = [_mm512_setzero_si512(); 4];
        for (p, q) in q.iter_mut().enumerate() {
            *q = _mm512_xor_si512(_mm512_loadu_si512(y.qs.as_ptr().add(64 * p).cast()), offset);
        }
        (q, _mm_set_ss(y.scale()))
    }
    #[inline(always)]
    unsafe fn sums(w: &Self::Dec, a: &Self::Prep) -> __m256i {
        lattice_sums(w, a)
    }
    #[inline(always)]
    unsafe fn d_x(w: &Self::Dec) -> __m128 {
        w.3
    }
    #[inline(always)]
    unsafe fn d_y(a: &Self::Prep) -> __m128 {
        a.1
    }
}
