//! AVX2 `vec_dot` of IQ3_XXS and IQ3_S against Q8_K. Per 32 elements: eight 4-byte lattice
//! points fetched into one register, signs applied to the activation bytes, `vpmaddubsw` (exact:
//! grid bytes <= 62) and one i16 multiply-add by the odd sub-block multiplier into i32 lanes.
//! IQ3_XXS's constant 1/4 is applied at the end, as in the scalar reference (`dot/iq.rs`).

use std::arch::x86_64::*;
use std::mem::size_of;

use super::super::{block_ptr, f16x4, hsum_ps, load32, IntDot};
use super::iq2::add_block;
use super::lattice::{bits_at, even_sign_masks, negate_where, points32, u16_at, u32_at};
use super::legacy::{add4_in_order, block_sums4, block_term, halves4, hsum_epi32, terms4};
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};
use crate::iq_tables::{IQ3S_GRID, IQ3XXS_GRID};
use crate::q8_k::BlockQ8_K;

/// One IQ3_XXS block's exact i32 partial sums of `Σ_g (2 s_g + 1) Σ w y`: 8 lanes that add up
/// to the scalar reference's block sum.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn iq3_xxs_partials<M: IntDot>(x: &BlockIQ3_XXS, y: &BlockQ8_K) -> __m256i {
    // Even groups into one sum, odd into the other, two groups an iteration: indexing a pair
    // of sums by `ib % 2` in a loop the compiler did not unroll kept them in memory (a store
    // and a reload per group, the top samples of plain AVX2's IQ3_XXS decode).
    let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    // The 8 groups' sign and scale words follow the 64 grid indices.
    let masks = even_sign_masks(_mm256_loadu_si256(x.qs.as_ptr().add(64).cast()));
    for pair in 0..4 {
        even = iq3_xxs_group::<M>(x, y, 2 * pair, masks[2 * pair], even);
        odd = iq3_xxs_group::<M>(x, y, 2 * pair + 1, masks[2 * pair + 1], odd);
    }
    _mm256_add_epi32(even, odd)
}

/// Group `ib` (32 weights) of an IQ3_XXS block, with its sign masks
/// ([`even_sign_masks`]), added to `sum`.
#[inline(always)]
unsafe fn iq3_xxs_group<M: IntDot>(
    x: &BlockIQ3_XXS,
    y: &BlockQ8_K,
    ib: usize,
    negated: __m256i,
    sum: __m256i,
) -> __m256i {
    let q = &x.qs[8 * ib..8 * ib + 8];
    let grid = if M::GATHER {
        let index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(q.as_ptr().cast()));
        // SAFETY: every index is a byte, IQ3XXS_GRID has 256 entries.
        _mm256_i32gather_epi32::<4>(IQ3XXS_GRID.as_ptr().cast(), index)
    } else {
        points32(std::array::from_fn(|k| IQ3XXS_GRID[q[k] as usize]))
    };
    let aux = u32_at(&x.qs, 64 + 4 * ib);
    let y = load32(y.qs.as_ptr().add(32 * ib));
    let yq = _mm256_sub_epi8(_mm256_xor_si256(y, negated), negated);
    let ls = _mm256_set1_epi16(2 * (aux >> 28) as i16 + 1);
    M::madd_i16(sum, _mm256_maddubs_epi16(grid, yq), ls)
}

/// `vec_dot` with one f32 sum per lane (the AVX2 path's order).
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn iq3_xxs<M: IntDot>(x: &[BlockIQ3_XXS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        acc = add_block(acc, x, y, iq3_xxs_partials::<M>(x, y));
    }
    0.25 * hsum_ps(acc)
}

/// A lattice format's exact per-block integer lanes (the AVX2 kernels' i32 accumulators),
/// for the block-order `vec_dot` ([`block_order`]) and the GEMM tiles that keep its order.
pub(crate) trait Partials: crate::Block {
    /// The constant the scalar reference multiplies its sum by at the end (IQ2_S 1/8,
    /// IQ3_XXS 1/4, IQ3_S 1).
    const FINAL: f32;
    /// The block's 8 exact i32 lanes of `Σ_g (2 s_g + 1) Σ w y` against `y`: they add up to
    /// the scalar reference's block sum.
    ///
    /// # Safety
    /// AVX2, FMA, F16C and `M`'s instructions are available.
    unsafe fn partials<M: IntDot>(&self, y: &BlockQ8_K) -> __m256i;
}

impl Partials for BlockIQ3_XXS {
    const FINAL: f32 = 0.25;
    #[inline(always)]
    unsafe fn partials<M: IntDot>(&self, y: &BlockQ8_K) -> __m256i {
        iq3_xxs_partials::<M>(self, y)
    }
}

impl Partials for BlockIQ3_S {
    const FINAL: f32 = 1.0;
    #[inline(always)]
    unsafe fn partials<M: IntDot>(&self, y: &BlockQ8_K) -> __m256i {
        iq3_s_partials::<M>(self, y)
    }
}

/// `vec_dot` in block order, the scalar reference's (`dot/iq.rs`): each block's exact i32 sum,
/// converted, times `d_x · d_y`, added to one f32 sum, block after block; then times
/// [`Partials::FINAL`]. Equal to the scalar reference bit for bit, and the order in which a
/// register of 16 tokens can run (`gemm/x86/iq3_xxs_lanes.rs`). `X`'s `d` is its first field,
/// an f16.
///
/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn block_order<X: Partials, M: IntDot>(x: &[X], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut sum = 0.0f32;
    // Four blocks a step: their sums reduced together, their terms added in order.
    let whole = x.len() / 4 * 4;
    for b in (0..whole).step_by(4) {
        let v = [
            x[b].partials::<M>(&y[b]),
            x[b + 1].partials::<M>(&y[b + 1]),
            x[b + 2].partials::<M>(&y[b + 2]),
            x[b + 3].partials::<M>(&y[b + 3]),
        ];
        // The blocks' f16 `d` (their first field) through F16C.
        let dx = halves4(x[b..].as_ptr().cast(), size_of::<X>());
        let dy = _mm_setr_ps(
            y[b].scale(),
            y[b + 1].scale(),
            y[b + 2].scale(),
            y[b + 3].scale(),
        );
        sum = add4_in_order(sum, terms4(block_sums4(v), dx, dy));
    }
    for (x, y) in x[whole..].iter().zip(&y[whole..]) {
        let block = hsum_epi32(x.partials::<M>(y));
        sum = block_term(sum, block, block_d(x), y.scale());
    }
    X::FINAL * sum
}

/// A lattice block's `d` (its first field, an f16) as f32.
///
/// # Safety
/// F16C is available; `X`'s first field is an f16.
#[inline(always)]
pub(crate) unsafe fn block_d<X>(x: &X) -> f32 {
    _mm_cvtss_f32(f16x4(block_ptr(x)))
}

/// The 64 nine-bit grid indices of an IQ3_S block, computed 16 at a time: byte `qs[j]` with
/// bit `j % 16` of the little-endian u16 `qh[j / 16]` as bit 8.
#[inline(always)]
pub(crate) unsafe fn iq3_s_indices(x: &BlockIQ3_S) -> [u16; 64] {
    let mut index = [0u16; 64];
    let bit = _mm256_setr_epi16(
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768,
    );
    for t in 0..4 {
        let low = _mm256_cvtepu8_epi16(_mm_loadu_si128(x.qs.as_ptr().add(16 * t).cast()));
        let qh = _mm256_set1_epi16(u16_at(&x.qh, 2 * t) as i16);
        let set = _mm256_cmpeq_epi16(_mm256_and_si256(qh, bit), bit);
        let high = _mm256_and_si256(set, _mm256_set1_epi16(0x100));
        // SAFETY: 16 u16 lanes into index[16 t .. 16 t + 16], t < 4.
        _mm256_storeu_si256(
            index.as_mut_ptr().add(16 * t).cast(),
            _mm256_or_si256(low, high),
        );
    }
    index
}

/// Group `ib`'s 8 lattice points (4 bytes each) of an IQ3_S block whose grid indices are
/// `index` ([`iq3_s_indices`]), fetched by `M`'s rule (a gather or 8 table reads).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn iq3_s_points<M: IntDot>(index: &[u16; 64], ib: usize) -> __m256i {
    if M::GATHER {
        let at = index.as_ptr().add(8 * ib).cast();
        let index = _mm256_cvtepu16_epi32(_mm_loadu_si128(at));
        // SAFETY: every index has 9 bits, IQ3S_GRID has 512 entries.
        _mm256_i32gather_epi32::<4>(IQ3S_GRID.as_ptr().cast(), index)
    } else {
        points32(std::array::from_fn(|k| {
            IQ3S_GRID[(index[8 * ib + k] & 511) as usize]
        }))
    }
}

/// One IQ3_S block's exact i32 partial sums (see [`Partials`]).
///
/// # Safety
/// As for [`iq3_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq3_s_partials<M: IntDot>(x: &BlockIQ3_S, y: &BlockQ8_K) -> __m256i {
    let index = iq3_s_indices(x);
    let mut sums = [_mm256_setzero_si256(); 2];
    for ib in 0..8 {
        let grid = iq3_s_points::<M>(&index, ib);
        let yq = negate_where(
            load32(y.qs.as_ptr().add(32 * ib)),
            bits_at(&x.signs, 4 * ib),
        );
        let s = (x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let ls = _mm256_set1_epi16(2 * s as i16 + 1);
        sums[ib % 2] = M::madd_i16(sums[ib % 2], _mm256_maddubs_epi16(grid, yq), ls);
    }
    _mm256_add_epi32(sums[0], sums[1])
}

/// `vec_dot` with one f32 sum per lane (the AVX2 path's order).
///
/// # Safety
/// As for [`iq3_xxs`].
#[inline(always)]
pub(crate) unsafe fn iq3_s<M: IntDot>(x: &[BlockIQ3_S], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        acc = add_block(acc, x, y, iq3_s_partials::<M>(x, y));
    }
    hsum_ps(acc)
}
