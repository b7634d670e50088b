//! Four consecutive blocks of a row of a symmetric 32-element format as the AVX-512 one-token
//! row loop takes them (`RowChain` in `block_order.rs`): the weights biased to unsigned
//! (`x + OFFSET`) in two registers, and the blocks' four `d`.
//!
//! The nibble formats (Q4_0, Q5_0, IQ4_NL) come in **chunk order**: 128-bit chunk `k` of the
//! first register holds elements 0..16 of block `k` (the low nibbles of its 16 `qs` bytes),
//! chunk `k` of the second its elements 16..32 (the high nibbles). Their blocks are a whole
//! number of 16-bit words (9 or 11), so the four blocks' bytes (72 or 88) arrive in two loads
//! and one word permute (`vpermt2w`) puts the four `qs` side by side; a second permute gathers
//! the four `d` (and Q5_0's fifth bits). Against the same activations in chunk order, one
//! register pair's `vpdpbusd` leaves block `k`'s sum in chunk `k`, which needs less shuffling
//! than two blocks a register (`Offset::biased_pair`: element order, two loads, a
//! cross-chunk shuffle and a scalar mask per pair). Q8_0, whose 34-byte blocks need no
//! unpacking, stays in element order.
//!
//! Integer sums are exact in any order, so the order changes no result.

use std::arch::x86_64::*;

use crate::dot::x86::avx2::legacy::halves4;
use crate::dot::x86::avx512::legacy::{iq4_nl_biased_table, Offset};
use crate::iq4::BlockIQ4_NL;
use crate::legacy::{BlockQ4_0, BlockQ5_0, BlockQ8_0};

/// [`Offset`] with four blocks at once, in the order [`Quad::CHUNK_ORDER`] names.
pub(super) trait Quad: Offset {
    /// Chunk order (above) rather than element order (blocks 0, 1 in the first register,
    /// 2, 3 in the second, as two [`Offset::biased_pair`]s).
    const CHUNK_ORDER: bool;
    /// The biased quants of the four blocks at `w`, and their `d` as f32.
    ///
    /// # Safety
    /// `w` points at four readable blocks; AVX-512 F and BW, F16C are available.
    unsafe fn biased_quad(w: *const Self) -> (__m512i, __m512i, __m128);
}

/// Word indices into two registers of 32 words (the second from index 32) that put the
/// 8-word `qs` of four blocks of `block` words, starting at word `at` of each, side by side.
const fn qs_words(block: u16, at: u16) -> [u16; 32] {
    let mut idx = [0u16; 32];
    let mut j = 0;
    while j < 32 {
        idx[j] = block * (j as u16 / 8) + at + j as u16 % 8;
        j += 1;
    }
    idx
}

/// Word indices of the four blocks' `d` (words 0..4) and, for Q5_0, the low and high halves
/// of their `qh` (words 4..8 and 8..12); the rest unused.
const fn meta_words(block: u16) -> [u16; 32] {
    let mut idx = [0u16; 32];
    let mut k = 0;
    while k < 4 {
        idx[k] = block * k as u16;
        idx[4 + k] = block * k as u16 + 1;
        idx[8 + k] = block * k as u16 + 2;
        k += 1;
    }
    idx
}

/// Q4_0 and IQ4_NL blocks (9 words: `d`, then 16 `qs` bytes).
const QS9: [u16; 32] = qs_words(9, 1);
const META9: [u16; 32] = meta_words(9);
/// Q5_0 blocks (11 words: `d`, 4 `qh` bytes, 16 `qs` bytes).
const QS11: [u16; 32] = qs_words(11, 3);
const META11: [u16; 32] = meta_words(11);

/// The four blocks' words: the first 32 and the rest (`4 · block - 32` words, masked, so
/// nothing past the fourth block is read).
#[inline(always)]
unsafe fn load_words<X>(w: *const X, block_words: u32) -> (__m512i, __m512i) {
    let p = w.cast::<u8>();
    let rest = (1u32 << (4 * block_words - 32)) - 1;
    (
        _mm512_loadu_si512(p.cast()),
        _mm512_maskz_loadu_epi16(rest, p.add(64).cast()),
    )
}

/// `idx` as a register.
#[inline(always)]
unsafe fn words(idx: &[u16; 32]) -> __m512i {
    _mm512_loadu_si512(idx.as_ptr().cast())
}

/// Low and high nibbles of the four side-by-side `qs`: chunk order.
#[inline(always)]
unsafe fn nibbles(qs: __m512i) -> (__m512i, __m512i) {
    let low4 = _mm512_set1_epi8(0x0f);
    (
        _mm512_and_si512(qs, low4),
        _mm512_and_si512(_mm512_srli_epi16::<4>(qs), low4),
    )
}

/// Four blocks of 9 words: their nibbles in chunk order and their `d`.
#[inline(always)]
unsafe fn nibbles9<X>(w: *const X) -> (__m512i, __m512i, __m128) {
    let (z0, z1) = load_words(w, 9);
    let (lo, hi) = nibbles(_mm512_permutex2var_epi16(z0, words(&QS9), z1));
    let meta = _mm512_permutex2var_epi16(z0, words(&META9), z1);
    (lo, hi, _mm_cvtph_ps(_mm512_castsi512_si128(meta)))
}

impl Quad for BlockQ4_0 {
    const CHUNK_ORDER: bool = true;
    #[inline(always)]
    unsafe fn biased_quad(w: *const Self) -> (__m512i, __m512i, __m128) {
        // The nibbles are `x + 8`.
        nibbles9(w)
    }
}

impl Quad for BlockIQ4_NL {
    const CHUNK_ORDER: bool = true;
    #[inline(always)]
    unsafe fn biased_quad(w: *const Self) -> (__m512i, __m512i, __m128) {
        let (lo, hi, d) = nibbles9(w);
        let table = iq4_nl_biased_table();
        (
            _mm512_shuffle_epi8(table, lo),
            _mm512_shuffle_epi8(table, hi),
            d,
        )
    }
}

impl Quad for BlockQ5_0 {
    const CHUNK_ORDER: bool = true;
    #[inline(always)]
    unsafe fn biased_quad(w: *const Self) -> (__m512i, __m512i, __m128) {
        let (z0, z1) = load_words(w, 11);
        let (lo, hi) = nibbles(_mm512_permutex2var_epi16(z0, words(&QS11), z1));
        let meta = _mm512_permutex2var_epi16(z0, words(&META11), z1);
        let first = _mm512_castsi512_si128(meta);
        // Bit 16k + j: the fifth bit of element j (low) or 16 + j (high) of block k.
        let high_lo = _mm_extract_epi64::<1>(first) as u64;
        let high_hi = _mm_cvtsi128_si64(_mm512_extracti32x4_epi32::<1>(meta)) as u64;
        let bit = _mm512_set1_epi8(0x10);
        (
            _mm512_mask_add_epi8(lo, high_lo, lo, bit),
            _mm512_mask_add_epi8(hi, high_hi, hi, bit),
            _mm_cvtph_ps(first),
        )
    }
}

impl Quad for BlockQ8_0 {
    const CHUNK_ORDER: bool = false;
    #[inline(always)]
    unsafe fn biased_quad(w: *const Self) -> (__m512i, __m512i, __m128) {
        (
            Self::biased_pair(&*w, &*w.add(1)),
            Self::biased_pair(&*w.add(2), &*w.add(3)),
            halves4(w.cast(), size_of::<Self>()),
        )
    }
}
