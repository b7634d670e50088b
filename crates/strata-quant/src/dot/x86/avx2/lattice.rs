//! Register builders shared by the lattice (i-quant) and low k-quant kernels: lattice points
//! fetched from the grid tables, sign patterns, and per-16-element scale vectors.
//!
//! The lattice kernels all reduce to `Σ scale · Σ |grid| · (±y)`: the grid bytes are unsigned
//! (IQ2: 8..43, IQ3: 1..62), so the signs go onto the activation bytes and one `vpmaddubsw`
//! gives exact i16 pair sums (`2 · 62 · 127 < 2^15`). Q8_K quants lie in -127..=127 (the
//! quantizer never writes -128), so negating them cannot wrap.

use std::arch::x86_64::*;

use super::super::bytes_from_bits;
use crate::iq_tables::KEVEN_SIGNS_Q2XS;

/// Four 8-byte lattice points as one register, `p[0]` in bytes 0..8.
#[inline(always)]
pub(crate) unsafe fn points64(p: [u64; 4]) -> __m256i {
    _mm256_set_epi64x(p[3] as i64, p[2] as i64, p[1] as i64, p[0] as i64)
}

/// Eight 4-byte lattice points as one register, `p[0]` in bytes 0..4.
#[inline(always)]
pub(crate) unsafe fn points32(p: [u32; 8]) -> __m256i {
    // Each point broadcast (a load where it comes from a table) and blended into place, where
    // pairing the points in GPRs and moving them over cost shifts, ORs and shuffle-port
    // inserts: criterion (Intel Xeon, one core, G products/s) `expert/IQ3_XXS/gemm/avx2/1`
    // 11.3 -> 12.4, `avxvnni/10` 51.9 -> 54.2. Storing the points and loading the register
    // back ran at a third of the speed (the load waits for the stores).
    let [b0, b1, b2, b3, b4, b5, b6, b7] = p.map(|p| p as i32);
    dwords8(&[
        _mm256_set1_epi32(b0),
        _mm256_set1_epi32(b1),
        _mm256_set1_epi32(b2),
        _mm256_set1_epi32(b3),
        _mm256_set1_epi32(b4),
        _mm256_set1_epi32(b5),
        _mm256_set1_epi32(b6),
        _mm256_set1_epi32(b7),
    ])
}

/// Dword `g` of each register `v[g]`, in one register (seven blends).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn dwords8(v: &[__m256i; 8]) -> __m256i {
    let v01 = _mm256_blend_epi32::<0b0000_0010>(v[0], v[1]);
    let v23 = _mm256_blend_epi32::<0b0000_1000>(v[2], v[3]);
    let v45 = _mm256_blend_epi32::<0b0010_0000>(v[4], v[5]);
    let v67 = _mm256_blend_epi32::<0b1000_0000>(v[6], v[7]);
    let low = _mm256_blend_epi32::<0b0000_1100>(v01, v23);
    let high = _mm256_blend_epi32::<0b1100_0000>(v45, v67);
    _mm256_blend_epi32::<0b1111_0000>(low, high)
}

/// The ±1 multiplier bytes of four 7-bit sign indices (`KSIGNS_IQ2XS` order, parity bit
/// implied) packed at bits 0, 7, 14 and 21 of `packed`; index `l` covers bytes `8 l .. 8 l + 8`.
#[inline(always)]
pub(crate) unsafe fn even_signs(packed: u32) -> __m256i {
    let s = |l: u32| KEVEN_SIGNS_Q2XS[((packed >> (7 * l)) & 127) as usize];
    points64([s(0), s(1), s(2), s(3)])
}

/// The sign masks of 8 groups of 32 weights whose signs are packed as IQ2_XXS and IQ3_XXS
/// pack them (`KSIGNS_IQ2XS`): dword `g` of `packed` holds four 7-bit indices at bits 0, 7,
/// 14 and 21 (its bits 28.. are ignored), index `l` the signs of weights `8 l .. 8 l + 7` of
/// group `g`, and the eighth sign is their parity (each 8 have an even count of negatives).
/// Register `g` has 0xFF at byte `j` where weight `j` of group `g` is negated, else 0: the
/// bytes of [`even_signs`], as masks.
///
/// Computed in registers (the parity from a nibble table): about 45 instructions a block,
/// against 32 table loads and 8 register assemblies by [`even_signs`], which were most of the
/// AVX2 and AVX-VNNI IQ3_XXS decode.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
pub(crate) unsafe fn even_sign_masks(packed: __m256i) -> [__m256i; 8] {
    // Byte `l` of dword `g`: index `l` (bits 7l..7l + 7 moved to 8l..8l + 7).
    let index = |l: u32| 0x7f << (8 * l);
    let mut s = _mm256_and_si256(packed, _mm256_set1_epi32(index(0)));
    let moved = _mm256_slli_epi32::<1>(packed);
    s = _mm256_or_si256(s, _mm256_and_si256(moved, _mm256_set1_epi32(index(1))));
    let moved = _mm256_slli_epi32::<2>(packed);
    s = _mm256_or_si256(s, _mm256_and_si256(moved, _mm256_set1_epi32(index(2))));
    let moved = _mm256_slli_epi32::<3>(packed);
    s = _mm256_or_si256(s, _mm256_and_si256(moved, _mm256_set1_epi32(index(3))));
    // Bit 7: the parity of bits 0..7, as the parities of the two nibbles.
    let odd = i8::MIN;
    let parity = _mm256_setr_epi8(
        0, odd, odd, 0, odd, 0, 0, odd, odd, 0, 0, odd, 0, odd, odd, 0, //
        0, odd, odd, 0, odd, 0, 0, odd, odd, 0, 0, odd, 0, odd, odd, 0,
    );
    let nibble = _mm256_set1_epi8(0x0f);
    let low = _mm256_shuffle_epi8(parity, _mm256_and_si256(s, nibble));
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(s), nibble);
    let high = _mm256_shuffle_epi8(parity, high);
    let s = _mm256_or_si256(s, _mm256_xor_si256(low, high));
    // Groups 0..4 lie in the low 128 bits, 4..8 in the high: each half in both.
    let halves = [
        _mm256_permute2x128_si256::<0x00>(s, s),
        _mm256_permute2x128_si256::<0x11>(s, s),
    ];
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let mut out = [_mm256_setzero_si256(); 8];
    for (g, out) in out.iter_mut().enumerate() {
        // Byte j takes sign byte 4 (g mod 4) + j / 8 of its half, then its bit j mod 8.
        let first = 0x0101_0101_0101_0101 * (4 * (g % 4)) as i64;
        let pick = _mm256_add_epi8(
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
            _mm256_set1_epi64x(first),
        );
        let spread = _mm256_shuffle_epi8(halves[g / 4], pick);
        *out = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    }
    out
}

/// `y` with byte `j` negated where bit `j` of `bits` is set (little-endian).
#[inline(always)]
pub(crate) unsafe fn negate_where(y: __m256i, bits: [u8; 4]) -> __m256i {
    let m = bytes_from_bits(bits);
    _mm256_sub_epi8(_mm256_xor_si256(y, m), m)
}

/// i16 lanes 0..8 = `lo`, 8..16 = `hi`: the multiplier of a 32-element `vpmaddubsw` result
/// whose two 16-element halves have their own scales.
#[inline(always)]
pub(crate) unsafe fn halves16(lo: i16, hi: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
}

/// From `scales` (8 i16 lanes repeated in both 128-bit halves): lane `k` in i16 lanes 0..8,
/// lane `k + 1` in lanes 8..16 (`k` even, < 8).
#[inline(always)]
pub(crate) unsafe fn pick_pair(scales: __m256i, k: usize) -> __m256i {
    let lane = |g: usize| i16::from_le_bytes([2 * g as u8, 2 * g as u8 + 1]);
    _mm256_shuffle_epi8(scales, halves16(lane(k), lane(k + 1)))
}

/// 16 i16 scales (one per 16 elements) as the two registers [`pick_pair`] reads: scales 0..8
/// repeated in both halves, then scales 8..16.
#[inline(always)]
pub(crate) unsafe fn split_scales(scales: __m256i) -> [__m256i; 2] {
    [
        _mm256_permute2x128_si256::<0x00>(scales, scales),
        _mm256_permute2x128_si256::<0x11>(scales, scales),
    ]
}

/// Little-endian u32 at byte `at` of `bytes`.
#[inline(always)]
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// Little-endian u16 at byte `at` of `bytes`.
#[inline(always)]
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// 4 bytes from `bytes[at..]`, as the bit source of [`negate_where`].
#[inline(always)]
pub(crate) fn bits_at(bytes: &[u8], at: usize) -> [u8; 4] {
    bytes[at..at + 4].try_into().unwrap()
}
