//! AVX-512 VNNI `vec_dot` of the 32-element formats: two blocks per 512-bit register. Signed
//! weights are offset to unsigned (`x + off`, off = 8, 16 or 128) so one `vpdpbusd` gives
//! `Σ (x + off) y`, and a second one with the constant `off` gives `off Σ y` to subtract: exact
//! i32 sums per block, in lanes 0..8 (first block) and 8..16 (second).
//!
//! The symmetric formats (Q4_0, Q5_0, Q8_0, IQ4_NL) then add each block's sum into one f32 sum
//! in block order, the scalar reference's float order, which the GEMM tiles can keep with
//! 16 tokens (or 16 rows) in the lanes of one register (`gemm/x86/block_order.rs`). The affine
//! formats (Q4_1, Q5_1) keep 16 lanes of FMA chains and end an odd row on the 256-bit kernel.

use std::arch::x86_64::*;

use super::super::avx2::legacy as avx2;
pub(crate) use super::super::avx2::legacy::{block_d, block_term};
use super::super::{block_ptr, Avx512Vnni};
use crate::iq4::BlockIQ4_NL;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// 32 bytes at `a` then 32 at `b`.
#[inline(always)]
unsafe fn load_pair<T>(a: *const T, b: *const T) -> __m512i {
    let lo = _mm512_castsi256_si512(_mm256_loadu_si256(a.cast()));
    _mm512_inserti64x4::<1>(lo, _mm256_loadu_si256(b.cast()))
}

/// The nibbles of two legacy blocks in element order: block `a` in bytes 0..32, `b` in 32..64.
#[inline(always)]
unsafe fn nibbles_pair(a: &[u8; 16], b: &[u8; 16]) -> __m512i {
    let q = _mm256_castsi128_si256(_mm_loadu_si128(a.as_ptr().cast()));
    let q = _mm256_inserti128_si256::<1>(q, _mm_loadu_si128(b.as_ptr().cast()));
    // [a, b, a >> 4, b >> 4] in 128-bit lanes, reordered to [a, a >> 4, b, b >> 4].
    let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16::<4>(q));
    let ordered = _mm512_shuffle_i64x2::<0b11_01_10_00>(both, both);
    _mm512_and_si512(ordered, _mm512_set1_epi8(0x0f))
}

/// The 5th bits of two Q5 blocks as a byte mask in the order of [`nibbles_pair`].
#[inline(always)]
fn high_bits_pair(a: [u8; 4], b: [u8; 4]) -> __mmask64 {
    u32::from_le_bytes(a) as u64 | (u32::from_le_bytes(b) as u64) << 32
}

/// Lane 0: `d_a`-products, lane 1: `d_b`-products of the first f16 fields of two weight and two
/// activation blocks; lanes 2, 3: the same for the second fields (`m · s` for Q4_1/Q5_1).
#[inline(always)]
unsafe fn pair_scales<X, Y>(xa: &X, xb: &X, ya: &Y, yb: &Y) -> __m128 {
    let first8 = |p: *const u8| p.cast::<__m128i>();
    let hx = _mm_unpacklo_epi16(
        _mm_loadl_epi64(first8(block_ptr(xa))),
        _mm_loadl_epi64(first8(block_ptr(xb))),
    );
    let hy = _mm_unpacklo_epi16(
        _mm_loadl_epi64(first8(block_ptr(ya))),
        _mm_loadl_epi64(first8(block_ptr(yb))),
    );
    _mm_mul_ps(_mm_cvtph_ps(hx), _mm_cvtph_ps(hy))
}

/// Lanes 0..8 = lane 0 of `s`, lanes 8..16 = lane 1.
#[inline(always)]
unsafe fn spread_pair(s: __m128) -> __m512 {
    let idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s))
}

/// A signed format as unsigned bytes `x + OFFSET`, two blocks at a time.
pub(crate) trait Offset: Sized {
    const OFFSET: i8;
    unsafe fn biased_pair(a: &Self, b: &Self) -> __m512i;
}

impl Offset for BlockQ4_0 {
    const OFFSET: i8 = 8;
    #[inline(always)]
    unsafe fn biased_pair(a: &Self, b: &Self) -> __m512i {
        nibbles_pair(&a.qs, &b.qs)
    }
}

impl Offset for BlockQ5_0 {
    const OFFSET: i8 = 16;
    #[inline(always)]
    unsafe fn biased_pair(a: &Self, b: &Self) -> __m512i {
        let nib = nibbles_pair(&a.qs, &b.qs);
        let high = high_bits_pair(a.qh, b.qh);
        _mm512_mask_add_epi8(nib, high, nib, _mm512_set1_epi8(0x10))
    }
}

impl Offset for BlockQ8_0 {
    const OFFSET: i8 = -128;
    #[inline(always)]
    unsafe fn biased_pair(a: &Self, b: &Self) -> __m512i {
        _mm512_xor_si512(
            load_pair(a.qs.as_ptr(), b.qs.as_ptr()),
            _mm512_set1_epi8(-128),
        )
    }
}

/// IQ4_NL's 16 values biased by 128 (`x + OFFSET` as u8), in every 128-bit chunk: the
/// `vpshufb` table that maps codes to biased weights.
#[inline(always)]
pub(crate) unsafe fn iq4_nl_biased_table() -> __m512i {
    let table = _mm_xor_si128(
        _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()),
        _mm_set1_epi8(-128),
    );
    _mm512_broadcast_i32x4(table)
}

impl Offset for BlockIQ4_NL {
    const OFFSET: i8 = -128;
    #[inline(always)]
    unsafe fn biased_pair(a: &Self, b: &Self) -> __m512i {
        _mm512_shuffle_epi8(iq4_nl_biased_table(), nibbles_pair(&a.qs, &b.qs))
    }
}

/// The exact i32 partial sums of `Σ x y` for two signed blocks: lanes 0..8 add up to block
/// `a`'s sum, lanes 8..16 to block `b`'s. `neg_offset` is [`neg_offset`] of the activations.
#[inline(always)]
pub(crate) unsafe fn signed_pair_sums<X: Offset>(
    xa: &X,
    xb: &X,
    y: __m512i,
    neg_offset: __m512i,
) -> __m512i {
    _mm512_dpbusd_epi32(neg_offset, X::biased_pair(xa, xb), y)
}

/// `-OFFSET Σ y` per lane of two activation blocks' quants `y` (as [`load_pair`] gives them),
/// the start that turns `Σ (x + OFFSET) y` into `Σ x y`.
#[inline(always)]
pub(crate) unsafe fn neg_offset<X: Offset>(y: __m512i) -> __m512i {
    // OFFSET as a u8 (128 for -128).
    let offset = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(X::OFFSET), y);
    _mm512_sub_epi32(_mm512_setzero_si512(), offset)
}

/// The quants of two activation blocks: `a` in bytes 0..32, `b` in 32..64.
#[inline(always)]
pub(crate) unsafe fn act_pair(a: &BlockQ8_0, b: &BlockQ8_0) -> __m512i {
    load_pair(a.qs.as_ptr(), b.qs.as_ptr())
}

/// Σ over the blocks in order, each block's exact i32 sum scaled and added to one f32 sum:
/// the scalar reference's float order, so this path's results equal `dot/legacy.rs` bit for
/// bit. The tiles (`gemm/x86/block_order.rs`) keep the same order with rows or tokens in the
/// lanes. An odd last block is paired with itself and its second sum dropped.
#[inline(always)]
unsafe fn symmetric<X: Offset>(x: &[X], y: &[BlockQ8_0]) -> f32 {
    symmetric_from(0.0, x, y)
}

/// [`symmetric`] continuing from `acc`, the sum of the blocks before `x` and `y`.
#[inline(always)]
pub(crate) unsafe fn symmetric_from<X: Offset>(acc: f32, x: &[X], y: &[BlockQ8_0]) -> f32 {
    let n = x.len();
    let mut acc = acc;
    let mut b = 0;
    while b < n {
        let b1 = (b + 1).min(n - 1);
        let yv = act_pair(&y[b], &y[b1]);
        let sums = signed_pair_sums(&x[b], &x[b1], yv, neg_offset::<X>(yv));
        let sa = _mm512_mask_reduce_add_epi32(0x00ff, sums);
        acc = block_term(acc, sa, block_d(&x[b]), block_d(&y[b]));
        if b1 != b {
            let sb = _mm512_mask_reduce_add_epi32(0xff00, sums);
            acc = block_term(acc, sb, block_d(&x[b1]), block_d(&y[b1]));
        }
        b += 2;
    }
    acc
}

/// Q4_1 and Q5_1: unsigned quants, two blocks at a time.
pub(crate) trait Affine: Sized {
    /// The quants of blocks `a`, `b` in element order: `a` in bytes 0..32, `b` in 32..64.
    unsafe fn quants_pair(a: &Self, b: &Self) -> __m512i;
    /// The same 64 quants in the order the packed nibbles give them cheaply: `a`'s elements
    /// 0..16, `b`'s 0..16, `a`'s 16..32, `b`'s 16..32 (so 128-bit chunks 1 and 2 of
    /// [`Affine::quants_pair`] swapped).
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> __m512i;
}

/// The nibbles of two legacy blocks, low nibbles first: `a`'s low, `b`'s low, `a`'s high,
/// `b`'s high (16 bytes each).
#[inline(always)]
unsafe fn nibbles_pair_split(a: &[u8; 16], b: &[u8; 16]) -> __m512i {
    let q = _mm256_castsi128_si256(_mm_loadu_si128(a.as_ptr().cast()));
    let q = _mm256_inserti128_si256::<1>(q, _mm_loadu_si128(b.as_ptr().cast()));
    let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16::<4>(q));
    _mm512_and_si512(both, _mm512_set1_epi8(0x0f))
}

impl Affine for BlockQ4_1 {
    #[inline(always)]
    unsafe fn quants_pair(a: &Self, b: &Self) -> __m512i {
        nibbles_pair(&a.qs, &b.qs)
    }
    #[inline(always)]
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> __m512i {
        nibbles_pair_split(&a.qs, &b.qs)
    }
}

impl Affine for BlockQ5_1 {
    #[inline(always)]
    unsafe fn quants_pair(a: &Self, b: &Self) -> __m512i {
        let nib = nibbles_pair(&a.qs, &b.qs);
        _mm512_mask_add_epi8(nib, high_bits_pair(a.qh, b.qh), nib, _mm512_set1_epi8(0x10))
    }
    #[inline(always)]
    unsafe fn quants_pair_split(a: &Self, b: &Self) -> __m512i {
        let nib = nibbles_pair_split(&a.qs, &b.qs);
        let (low, high) = avx2::fifth_bits_split(a.qh, b.qh);
        let mask = low as u64 | (high as u64) << 32;
        _mm512_mask_add_epi8(nib, mask, nib, _mm512_set1_epi8(0x10))
    }
}

/// One pair of blocks into `(acc, acc_m)`: the step of [`affine`]'s chains.
#[inline(always)]
pub(crate) unsafe fn affine_pair<X: Affine>(
    xa: &X,
    xb: &X,
    ya: &BlockQ8_1,
    yb: &BlockQ8_1,
    acc: __m512,
    acc_m: __m128,
) -> (__m512, __m128) {
    let y = load_pair(ya.qs.as_ptr(), yb.qs.as_ptr());
    let sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), X::quants_pair(xa, xb), y);
    // Lanes 0, 1: d_x d_y of the two blocks; lanes 2, 3: m_x s_y.
    let scales = pair_scales(xa, xb, ya, yb);
    let acc = _mm512_fmadd_ps(spread_pair(scales), _mm512_cvtepi32_ps(sum), acc);
    (acc, _mm_add_ps(acc_m, scales))
}

/// Σ over an even number of blocks.
#[inline(always)]
unsafe fn affine<X: Affine>(x: &[X], y: &[BlockQ8_1]) -> f32 {
    let (mut acc0, mut acc1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let (mut mins0, mut mins1) = (_mm_setzero_ps(), _mm_setzero_ps());
    let (xs, ys) = (x.chunks_exact(4), y.chunks_exact(4));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (x, y) in xs.zip(ys) {
        (acc0, mins0) = affine_pair(&x[0], &x[1], &y[0], &y[1], acc0, mins0);
        (acc1, mins1) = affine_pair(&x[2], &x[3], &y[2], &y[3], acc1, mins1);
    }
    if x_rest.len() == 2 {
        (acc0, mins0) = affine_pair(&x_rest[0], &x_rest[1], &y_rest[0], &y_rest[1], acc0, mins0);
    }
    let mins = _mm_add_ps(mins0, mins1);
    let mins = _mm_add_ss(
        _mm_movehl_ps(mins, mins),
        _mm_movehdup_ps(_mm_movehl_ps(mins, mins)),
    );
    _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + _mm_cvtss_f32(mins)
}

macro_rules! kernels {
    ($($name:ident: $x:ty, $y:ty => $kind:ident, $tail:expr;)*) => {$(
        /// # Safety
        /// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available.
        #[inline(always)]
        pub(crate) unsafe fn $name(x: &[$x], y: &[$y]) -> f32 {
            assert_eq!(x.len(), y.len(), "vec_dot block counts");
            if !$tail {
                return $kind(x, y);
            }
            let even = x.len() / 2 * 2;
            $kind(&x[..even], &y[..even]) + avx2::$name::<Avx512Vnni>(&x[even..], &y[even..])
        }
    )*};
}

// The symmetric formats run every block in [`symmetric`]; the affine ones end an odd row on
// the 256-bit kernel.
kernels! {
    q4_0: BlockQ4_0, BlockQ8_0 => symmetric, false;
    q5_0: BlockQ5_0, BlockQ8_0 => symmetric, false;
    q8_0: BlockQ8_0, BlockQ8_0 => symmetric, false;
    iq4_nl: BlockIQ4_NL, BlockQ8_0 => symmetric, false;
    q4_1: BlockQ4_1, BlockQ8_1 => affine, true;
    q5_1: BlockQ5_1, BlockQ8_1 => affine, true;
}
