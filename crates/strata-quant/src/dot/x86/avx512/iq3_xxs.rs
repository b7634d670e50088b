//! AVX-512 IQ3_XXS against Q8_K with VBMI and BITALG, in block order (the scalar reference's,
//! `dot/iq.rs`, as on the other VNNI paths: `avx2::iq3::block_order`). Like
//! `q4_k.rs`, the kernel is three parts, [`decode`] (weights), [`prep`] (activations) and
//! [`step`]: [`vec_dot`] runs them block after block, and the GEMM tile for one to a few
//! tokens (`gemm/x86/iq3_xxs_vbmi.rs`) decodes each block once for every token and prepares
//! each token once.
//!
//! The AVX2 kernel fetches each 32-element group's eight 4-byte lattice points one by one and
//! expands its signs through a table of 8-byte multipliers, ~5 G products/s a core on Zen 4.
//! Here a whole block is decoded with byte permutes:
//!
//! - **Points by byte.** Register `p` holds byte `p` of each of the block's 64 lattice points
//!   (elements `4 j + p`, `j` = 0..64): two `vpermi2b` over a 256-entry byte table
//!   (`IQ3XXS_GRID` split by byte) and a blend on the index's top bit, with the indices as they
//!   are stored. The activations are rearranged the same way ([`prep`]), so nothing is unpacked.
//! - **Signs as masks.** `vpmultishiftqb` cuts the 32 seven-bit sign indices out of the group
//!   words, one `vpermi2b` through `KSIGNS_IQ2XS` makes their sign bytes (parity included), one
//!   group to a qword, and `vpshufbitqmb` picks each register's 64 sign bits out of them; a
//!   masked negation applies them to the activations.
//! - **Sums.** Four `vpdpbusd` (unsigned lattice bytes ≤ 62, signed activations) into one
//!   register whose lanes `2 g`, `2 g + 1` hold group `g` (every register's lane `k` covers
//!   elements `16 k .. 16 k + 16`), one multiply by the odd multipliers `2 s + 1`, one
//!   reduction: the block's exact i32 sum. Then `acc + isum · (d_x · d_y)`, block after block,
//!   and times 1/4 at the end: the reference's float operations, so the result is the scalar
//!   reference's bit for bit (`tests/simd.rs`, `tests/gemm.rs`).

use std::arch::x86_64::*;

use super::super::avx2::legacy::block_d;
use crate::iq3::BlockIQ3_XXS;
use crate::iq_tables::{IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::q8_k::BlockQ8_K;

/// Whether this CPU has AVX512-VBMI and BITALG (the caller already holds AVX-512 F, BW, VL
/// and VNNI; `crate::testing::vbmi`): cached probes, a few loads and tests.
#[inline(always)]
pub(crate) fn available() -> bool {
    crate::testing::vbmi()
}

/// The lookup tables, aligned for 64-byte loads: byte `p` of lattice point `i` at
/// `grid[p][i]`, and the 8-bit sign byte of each 7-bit sign index.
#[repr(C, align(64))]
struct Tables {
    grid: [[u8; 256]; 4],
    signs: [u8; 128],
}

static TABLES: Tables = Tables {
    grid: grid_bytes(),
    signs: KSIGNS_IQ2XS,
};

/// `IQ3XXS_GRID` split into its four bytes (little-endian).
const fn grid_bytes() -> [[u8; 256]; 4] {
    let mut t = [[0u8; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut p = 0;
        while p < 4 {
            t[p][i] = (IQ3XXS_GRID[i] >> (8 * p)) as u8;
            p += 1;
        }
        i += 1;
    }
    t
}

/// `vpermt2b` indices that gather byte `p` of each 4-byte point from the activations: index
/// position `j` takes element `4 j + p` from the two registers holding elements `0..128`
/// (positions 0..32) or `128..256` (positions 32..64).
const fn act_order(p: usize) -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut j = 0;
    while j < 64 {
        order[j] = ((4 * j + p) % 128) as u8;
        j += 1;
    }
    order
}

/// `vpshufbitqmb` selectors: bit `j` of register `p`'s mask is the sign of element `4 j + p`,
/// bit `4 (j % 8) + p` of group `j / 8`'s qword of sign bytes.
const fn sign_order(p: usize) -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut j = 0;
    while j < 64 {
        order[j] = (4 * (j % 8) + p) as u8;
        j += 1;
    }
    order
}

#[repr(C, align(64))]
struct Orders([[u8; 64]; 4]);

static ACT_ORDER: Orders = Orders([act_order(0), act_order(1), act_order(2), act_order(3)]);
static SIGN_ORDER: Orders = Orders([sign_order(0), sign_order(1), sign_order(2), sign_order(3)]);

/// `vpmultishiftqb` offsets: bytes 0..4 of each qword take the group word's four 7-bit sign
/// indices (bits 0, 7, 14, 21); bytes 4..8 are not used.
const SIGN_FIELDS: i64 = i64::from_le_bytes([0, 7, 14, 21, 0, 0, 0, 0]);

/// A decoded weight block: byte `p` of the 64 points in register `p`; the sign masks; the
/// multiplier of each lane's group; `d_x`.
pub(crate) type Dec = ([__m512i; 4], [__mmask64; 4], __m512i, f32);
/// A prepared activation block: elements `4 j + p` in register `p`; `d_y`.
pub(crate) type Prep = ([__m512i; 4], f32);

/// Decodes one weight block.
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI, VBMI and BITALG, AVX2 and F16C are available.
#[inline(always)]
pub(crate) unsafe fn decode(x: &BlockIQ3_XXS) -> Dec {
    let t = &TABLES;
    let idx = _mm512_loadu_si512(x.qs.as_ptr().cast());
    let hi = _mm512_movepi8_mask(idx);
    // No closures: they would not inherit the caller's target features.
    let mut bytes = [_mm512_setzero_si512(); 4];
    for (p, b) in bytes.iter_mut().enumerate() {
        let g = t.grid[p].as_ptr();
        let lo = _mm512_permutex2var_epi8(
            _mm512_load_si512(g.cast()),
            idx,
            _mm512_load_si512(g.add(64).cast()),
        );
        let up = _mm512_permutex2var_epi8(
            _mm512_load_si512(g.add(128).cast()),
            idx,
            _mm512_load_si512(g.add(192).cast()),
        );
        *b = _mm512_mask_blend_epi8(hi, lo, up);
    }
    // One group word per qword: the sign bytes in bytes 0..4, the multiplier in bits 28..32.
    let words = _mm512_cvtepu32_epi64(_mm256_loadu_si256(x.qs.as_ptr().add(64).cast()));
    let fields = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(_mm512_set1_epi64(SIGN_FIELDS), words),
        _mm512_set1_epi8(0x7f),
    );
    let signs = _mm512_permutex2var_epi8(
        _mm512_load_si512(t.signs.as_ptr().cast()),
        fields,
        _mm512_load_si512(t.signs[64..].as_ptr().cast()),
    );
    let mut masks = [0; 4];
    for (p, m) in masks.iter_mut().enumerate() {
        let order = _mm512_load_si512(SIGN_ORDER.0[p].as_ptr().cast());
        *m = _mm512_bitshuffle_epi64_mask(signs, order);
    }
    // `2 s + 1` in both dwords of group `g`'s qword (lanes 2 g, 2 g + 1).
    let s = _mm512_srli_epi64::<28>(words);
    let s = _mm512_or_si512(s, _mm512_slli_epi64::<32>(s));
    let mult = _mm512_or_si512(_mm512_slli_epi32::<1>(s), _mm512_set1_epi32(1));
    // `d` through F16C (the software conversion is slower on this path's hot loop).
    (bytes, masks, mult, block_d(x))
}

/// Prepares one activation block.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn prep(y: &BlockQ8_K) -> Prep {
    let q = y.qs.as_ptr();
    let (q0, q1) = (
        _mm512_loadu_si512(q.cast()),
        _mm512_loadu_si512(q.add(64).cast()),
    );
    let (q2, q3) = (
        _mm512_loadu_si512(q.add(128).cast()),
        _mm512_loadu_si512(q.add(192).cast()),
    );
    let mut r = [_mm512_setzero_si512(); 4];
    for (p, r) in r.iter_mut().enumerate() {
        let order = _mm512_load_si512(ACT_ORDER.0[p].as_ptr().cast());
        let lo = _mm512_permutex2var_epi8(q0, order, q1);
        let up = _mm512_permutex2var_epi8(q2, order, q3);
        *r = _mm512_mask_blend_epi8(0xffff_ffff_0000_0000, lo, up);
    }
    (r, y.scale())
}

/// `acc` plus one block's term, `isum · (d_x · d_y)`.
///
/// # Safety
/// As for [`decode`].
#[inline(always)]
pub(crate) unsafe fn step(acc: f32, w: &Dec, a: &Prep) -> f32 {
    let zero = _mm512_setzero_si512();
    let mut sum = zero;
    for p in 0..4 {
        let y = _mm512_mask_sub_epi8(a.0[p], w.1[p], zero, a.0[p]);
        sum = _mm512_dpbusd_epi32(sum, w.0[p], y);
    }
    let isum = _mm512_reduce_add_epi32(_mm512_mullo_epi32(sum, w.2));
    acc + isum as f32 * (w.3 * a.1)
}

/// `vec_dot` in block order (module docs).
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI, VBMI and BITALG, AVX2, FMA and F16C are available.
#[target_feature(
    enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg"
)]
pub(super) unsafe fn vec_dot(x: &[BlockIQ3_XXS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let mut acc = 0.0f32;
    for (x, y) in x.iter().zip(y) {
        acc = step(acc, &decode(x), &prep(y));
    }
    0.25 * acc
}
