//! AVX2 `vec_dot` of the 32-element formats against Q8_0 / Q8_1: one block is one 256-bit
//! register of bytes. Signed weights use the sign trick (|x| times y with x's sign), so one
//! u8 × i8 dot gives the exact i32 block sum.
//!
//! The symmetric formats (Q4_0, Q5_0, Q8_0, IQ4_NL) then add each block's sum into one f32 sum
//! in block order, `acc + isum · (d_x · d_y)`: the scalar reference's float order
//! (`dot/legacy.rs`), so this path equals it bit for bit, and the GEMM tiles keep the order
//! with 8 tokens in the lanes of one register (`gemm/x86/block_order_avx2.rs`). The affine
//! formats (Q4_1, Q5_1) add `d_x d_y · sum` into float accumulators (two, alternating, to hide
//! the FMA latency).

use std::arch::x86_64::*;

use super::super::{
    block_ptr, bytes_from_bits, f16x4, hsum_ps, load32, nibbles32, sign_split, IntDot,
};
use crate::iq4::BlockIQ4_NL;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use std::mem::size_of;

/// A weight block whose 32 quants are signed bytes (Q4_0, Q5_0, Q8_0, IQ4_NL). Every one
/// starts with its f16 scale, followed by at least 6 more bytes.
pub(crate) trait Signed {
    /// What [`Signed::biased`] adds to each quant, as a wrapping i8 (-128 stands for +128).
    const OFFSET: i8;
    /// The largest biased quant `x + OFFSET`: `vpmaddubsw`'s 16-bit pair sums of biased weights
    /// and activations (|y| ≤ 128) stay exact while `2 · BIASED_MAX · 128` fits i16, and so do
    /// their sums over several registers when small enough (Q4_0: 8 registers, Q5_0: 4).
    const BIASED_MAX: u8;
    /// Whether [`Signed::biased`] costs no more than [`Signed::quants`]: then one row at a
    /// time takes the biased form wherever it is exact (`gemm/x86/block_order_avx2.rs`).
    const BIASED_AS_CHEAP: bool;
    /// The 32 quants as i8 lanes, in element order.
    unsafe fn quants(&self) -> __m256i;
    /// The 32 quants biased to unsigned bytes, `x + OFFSET`, in element order.
    #[inline(always)]
    unsafe fn biased(&self) -> __m256i {
        _mm256_add_epi8(self.quants(), _mm256_set1_epi8(Self::OFFSET))
    }
}

/// A weight block with unsigned quants and a minimum (Q4_1, Q5_1): value `d q + m`, starting
/// with the f16 `d` and `m`, followed by at least 4 more bytes.
pub(crate) trait Affine {
    /// The 32 quants as u8 lanes, in element order.
    unsafe fn quants(&self) -> __m256i;
    /// The quants of two blocks in split order, each 128-bit half one block's half:
    /// (`[a 0..16, b 0..16]`, `[a 16..32, b 16..32]`) as u8 lanes, so each register is one
    /// load of both blocks' packed bytes, shifted or not (no shuffle across halves).
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> (__m256i, __m256i);
}

/// The nibbles of two legacy blocks in split order: (low nibbles of `a` then of `b`, high
/// nibbles of `a` then of `b`), 16 bytes each half.
#[inline(always)]
unsafe fn nibbles_pair_split(a: &[u8; 16], b: &[u8; 16]) -> (__m256i, __m256i) {
    let q = _mm256_castsi128_si256(_mm_loadu_si128(a.as_ptr().cast()));
    let q = _mm256_inserti128_si256::<1>(q, _mm_loadu_si128(b.as_ptr().cast()));
    let low = _mm256_set1_epi8(0x0f);
    (
        _mm256_and_si256(q, low),
        _mm256_and_si256(_mm256_srli_epi16::<4>(q), low),
    )
}

impl Signed for BlockQ4_0 {
    const OFFSET: i8 = 8;
    const BIASED_MAX: u8 = 15;
    const BIASED_AS_CHEAP: bool = true;
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        _mm256_sub_epi8(nibbles32(&self.qs), _mm256_set1_epi8(8))
    }
    #[inline(always)]
    unsafe fn biased(&self) -> __m256i {
        nibbles32(&self.qs)
    }
}

impl Signed for BlockQ5_0 {
    const OFFSET: i8 = 16;
    const BIASED_MAX: u8 = 31;
    const BIASED_AS_CHEAP: bool = true;
    #[inline(always)]
    unsafe fn biased(&self) -> __m256i {
        let high = _mm256_and_si256(bytes_from_bits(self.qh), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles32(&self.qs), high)
    }
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        // q - 16 = the nibble with 0xf0 or'ed in where the 5th bit is clear.
        let high_clear = _mm256_andnot_si256(bytes_from_bits(self.qh), _mm256_set1_epi8(-16));
        _mm256_or_si256(nibbles32(&self.qs), high_clear)
    }
}

impl Signed for BlockQ8_0 {
    const OFFSET: i8 = -128;
    const BIASED_MAX: u8 = 255;
    /// The bias is one more add per register.
    const BIASED_AS_CHEAP: bool = false;
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        load32(self.qs.as_ptr())
    }
}

/// IQ4_NL's 16 values (`KVALUES_IQ4NL`, signed bytes) in both 128-bit halves: the table a
/// byte shuffle maps 4-bit codes through (IQ4_NL, IQ4_XS).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn iq4nl_table() -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()))
}

impl Signed for BlockIQ4_NL {
    const OFFSET: i8 = -128;
    // The table's largest value is 113.
    const BIASED_MAX: u8 = 241;
    const BIASED_AS_CHEAP: bool = true;
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        _mm256_shuffle_epi8(iq4nl_table(), nibbles32(&self.qs))
    }
    /// The same shuffle from the table with the bias added (`x + 128` as a wrapping byte).
    #[inline(always)]
    unsafe fn biased(&self) -> __m256i {
        let table = _mm256_add_epi8(iq4nl_table(), _mm256_set1_epi8(Self::OFFSET));
        _mm256_shuffle_epi8(table, nibbles32(&self.qs))
    }
}

impl Affine for BlockQ4_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        nibbles32(&self.qs)
    }
    #[inline(always)]
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> (__m256i, __m256i) {
        nibbles_pair_split(&a.qs, &b.qs)
    }
}

impl Affine for BlockQ5_1 {
    #[inline(always)]
    unsafe fn quants(&self) -> __m256i {
        let high = _mm256_and_si256(bytes_from_bits(self.qh), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles32(&self.qs), high)
    }
    #[inline(always)]
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> (__m256i, __m256i) {
        let (low, high) = nibbles_pair_split(&a.qs, &b.qs);
        let (bits_low, bits_high) = fifth_bits_split(a.qh, b.qh);
        (with_fifth(low, bits_low), with_fifth(high, bits_high))
    }
}

/// The fifth bits of two Q5_0/Q5_1 blocks (`qh`, bit `j` for element `j`) in split order:
/// (elements 0..16 of `a` then of `b`, elements 16..32 of `a` then of `b`), bit `j` for
/// byte `j` of the split-order register.
#[inline(always)]
pub(crate) fn fifth_bits_split(a: [u8; 4], b: [u8; 4]) -> (u32, u32) {
    let (ha, hb) = (u32::from_le_bytes(a), u32::from_le_bytes(b));
    ((ha & 0xffff) | hb << 16, ha >> 16 | (hb & 0xffff_0000))
}

/// `n` with 0x10 added to byte `j` where bit `j` of `bits` is set (`n`'s bytes below 16). A
/// function, not a closure: a closure would not inherit the target features.
#[inline(always)]
unsafe fn with_fifth(n: __m256i, bits: u32) -> __m256i {
    let fifth = _mm256_and_si256(bytes_from_bits(bits.to_le_bytes()), _mm256_set1_epi8(0x10));
    _mm256_or_si256(n, fifth)
}

/// The exact i32 partial sums of one signed block's `Σ x y`: 8 lanes that add up to it.
#[inline(always)]
pub(crate) unsafe fn block_partials<X: Signed, M: IntDot>(x: &X, y: &BlockQ8_0) -> __m256i {
    let (ax, sy) = sign_split(x.quants(), load32(y.qs.as_ptr()));
    M::dot_u8i8(_mm256_setzero_si256(), ax, sy)
}

/// The sums of four blocks' partial sums `v[k]` (as [`block_partials`] leaves them), block `k`
/// in lane `k`. Exact (i32 adds).
#[inline(always)]
pub(crate) unsafe fn block_sums4(v: [__m256i; 4]) -> __m128i {
    // Per 128-bit half: [v0 01, v0 23, v1 01, v1 23], then [v0, v1, v2, v3] half sums.
    let lo = _mm256_hadd_epi32(v[0], v[1]);
    let hi = _mm256_hadd_epi32(v[2], v[3]);
    let both = _mm256_hadd_epi32(lo, hi);
    _mm_add_epi32(
        _mm256_castsi256_si128(both),
        _mm256_extracti128_si256::<1>(both),
    )
}

/// Σ of the 8 i32 lanes (exact).
#[inline(always)]
pub(crate) unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// The f16 scale at the start of a block, as f32 (exact).
#[inline(always)]
pub(crate) unsafe fn block_d<T>(block: &T) -> f32 {
    let half = block_ptr(block).cast::<u16>().read_unaligned();
    // F16C: the integer conversion's float multiply is slow on subnormal results.
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(half as i32)))
}

/// The two f16 fields at the starts of four blocks `size` bytes apart, as f32 (exact):
/// `[a0, a1, b0, b1, c0, c1, d0, d1]` (`d` then `m` or `s` of each block).
#[inline(always)]
pub(crate) unsafe fn halves_pairs4(p: *const u8, size: usize) -> __m256 {
    let h = |k: usize| p.add(k * size).cast::<i32>().read_unaligned();
    _mm256_cvtph_ps(_mm_setr_epi32(h(0), h(1), h(2), h(3)))
}

/// The f16 fields at the starts of 4 blocks `size` bytes apart, as f32 (exact).
#[inline(always)]
pub(crate) unsafe fn halves4(p: *const u8, size: usize) -> __m128 {
    let h = |k: usize| p.add(k * size).cast::<u16>().read_unaligned() as i32;
    let v = _mm_setr_epi32(h(0) | h(1) << 16, h(2) | h(3) << 16, 0, 0);
    _mm_cvtph_ps(v)
}

/// One block's term in the block order of the symmetric formats: `acc + isum · (d_x · d_y)`,
/// two roundings (product, sum), as the scalar reference (`dot/legacy.rs`) adds it.
#[inline(always)]
pub(crate) fn block_term(acc: f32, isum: i32, dx: f32, dy: f32) -> f32 {
    acc + isum as f32 * (dx * dy)
}

/// `acc + t[0] + t[1] + t[2] + t[3]`, added in that order (four blocks' terms).
#[inline(always)]
pub(crate) unsafe fn add4_in_order(acc: f32, t: __m128) -> f32 {
    let acc = _mm_add_ss(_mm_set_ss(acc), t);
    let acc = _mm_add_ss(acc, _mm_movehdup_ps(t));
    let acc = _mm_add_ss(acc, _mm_movehl_ps(t, t));
    let acc = _mm_add_ss(acc, _mm_shuffle_ps::<0b11_11_11_11>(t, t));
    _mm_cvtss_f32(acc)
}

/// The terms `isum_k · (d_x · d_y)_k` of four blocks, `sums` from [`block_sums4`], the scales
/// from [`halves4`].
#[inline(always)]
pub(crate) unsafe fn terms4(sums: __m128i, dx: __m128, dy: __m128) -> __m128 {
    _mm_mul_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(dx, dy))
}

/// Σ over the blocks in order, each block's exact i32 sum scaled and added to one f32 sum,
/// continuing from `acc` (the sum of the blocks before `x` and `y`): the scalar reference's
/// float order. Four blocks a step.
#[inline(always)]
pub(crate) unsafe fn symmetric_from<X: Signed, M: IntDot>(
    acc: f32,
    x: &[X],
    y: &[BlockQ8_0],
) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = acc;
    let (xs, ys) = (x.chunks_exact(4), y.chunks_exact(4));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        let v = [
            block_partials::<X, M>(&x[0], &y[0]),
            block_partials::<X, M>(&x[1], &y[1]),
            block_partials::<X, M>(&x[2], &y[2]),
            block_partials::<X, M>(&x[3], &y[3]),
        ];
        let dx = halves4(block_ptr(&x[0]), size_of::<X>());
        let dy = halves4(block_ptr(&y[0]), size_of::<BlockQ8_0>());
        acc = add4_in_order(acc, terms4(block_sums4(v), dx, dy));
    }
    for (x, y) in x_rest.iter().zip(y_rest) {
        let isum = hsum_epi32(block_partials::<X, M>(x, y));
        acc = block_term(acc, isum, block_d(x), block_d(y));
    }
    acc
}

#[inline(always)]
unsafe fn symmetric<X: Signed, M: IntDot>(x: &[X], y: &[BlockQ8_0]) -> f32 {
    symmetric_from::<X, M>(0.0, x, y)
}

/// `acc + d_x d_y · Σ q y` for one affine block, and `acc_m + m_x s_y` in lane 1 of `acc_m`.
#[inline(always)]
pub(crate) unsafe fn affine_block<X: Affine, M: IntDot>(
    x: &X,
    y: &BlockQ8_1,
    acc: __m256,
    acc_m: __m128,
) -> (__m256, __m128) {
    let sum = M::dot_u8i8(_mm256_setzero_si256(), x.quants(), load32(y.qs.as_ptr()));
    // Lane 0: d_x d_y; lane 1: m_x s_y.
    let scales = _mm_mul_ps(f16x4(block_ptr(x)), f16x4(block_ptr(y)));
    let acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(scales), _mm256_cvtepi32_ps(sum), acc);
    (acc, _mm_add_ps(acc_m, scales))
}

#[inline(always)]
unsafe fn affine<X: Affine, M: IntDot>(x: &[X], y: &[BlockQ8_1]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (mut mins0, mut mins1) = (_mm_setzero_ps(), _mm_setzero_ps());
    let (xs, ys) = (x.chunks_exact(2), y.chunks_exact(2));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        (acc0, mins0) = affine_block::<X, M>(&x[0], &y[0], acc0, mins0);
        (acc1, mins1) = affine_block::<X, M>(&x[1], &y[1], acc1, mins1);
    }
    if let (Some(x), Some(y)) = (x_rest.first(), y_rest.first()) {
        (acc0, mins0) = affine_block::<X, M>(x, y, acc0, mins0);
    }
    let mins = _mm_add_ps(mins0, mins1);
    hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(mins))
}

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn q4_0<M: IntDot>(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_0<M: IntDot>(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`]. Weight quants may be -128 (|x| = 128 still fits the u8 operand).
#[inline(always)]
pub(crate) unsafe fn q8_0<M: IntDot>(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn iq4_nl<M: IntDot>(x: &[BlockIQ4_NL], y: &[BlockQ8_0]) -> f32 {
    symmetric::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q4_1<M: IntDot>(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    affine::<_, M>(x, y)
}

/// # Safety
/// As for [`q4_0`].
#[inline(always)]
pub(crate) unsafe fn q5_1<M: IntDot>(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    affine::<_, M>(x, y)
}
