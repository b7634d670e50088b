//! AVX-512 VBMI `vec_dot` of IQ3_XXS against Q8_K, in block order (the scalar reference's,
//! `dot/iq.rs`, as on the other VNNI paths: `avx2::iq3::iq3_xxs_block_order`).
//!
//! The AVX2 kernel fetches each 32-element group's eight 4-byte lattice points one by one and
//! expands its signs through a table of 8-byte multipliers: ~20 instructions per 32 products,
//! ~5 G products/s a core on Zen 4, well short of what DRAM delivers. Here a whole block is
//! decoded with byte permutes:
//!
//! - **Points.** The 64 grid indices of a block sit in one register. Each of the 4 bytes of a
//!   lattice point has a 256-entry table (`IQ3XXS_GRID` split by byte); `vpermi2b` looks up 64
//!   indices in 128 entries at once, so two lookups and a blend on the index's top bit give
//!   byte `p` of every point. Byte and word unpacks interleave the four results into the
//!   block's 256 weights, 64 to a register, in element order: the indices are permuted first
//!   (one `vpermb`, [`POINT_ORDER`]) so that the unpacks, which work within 128-bit lanes,
//!   land every point where its elements are.
//! - **Signs.** `vpmultishiftqb` cuts the 32 seven-bit sign indices out of the 8 group words,
//!   one `vpermi2b` through `KSIGNS_IQ2XS` makes their 8-bit sign bytes (parity included), and
//!   those 256 bits, in element order, are the masks of a masked negation of the activations.
//! - **Sums.** One `vpdpbusd` per register (unsigned lattice bytes ≤ 62, signed activations),
//!   from zero, so each i32 lane holds 4 products of one group; lanes are multiplied by their
//!   group's odd multiplier `2 s + 1` and added. Every step is exact integer arithmetic, so the
//!   block sums are the scalar reference's, and the float part that follows (four blocks'
//!   sums converted, times `d_x · d_y`, added in block order) is `iq3_xxs_block_order`'s: the
//!   result is that kernel's, and the scalar reference's, bit for bit (`tests/simd.rs`).
//!
//! About 60 instructions a block where the AVX2 kernel takes ~170.

use std::arch::x86_64::*;

use super::super::avx2::iq3::{in_block_order, Iq3XxsSums};
use crate::iq3::BlockIQ3_XXS;
use crate::iq_tables::{IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::q8_k::BlockQ8_K;

/// Whether this CPU has AVX512-VBMI and BITALG (the caller already holds AVX-512 F, BW, VL
/// and VNNI; `crate::testing::vbmi`): cached probes, a few loads and tests.
#[inline(always)]
pub(super) fn available() -> bool {
    crate::testing::vbmi()
}

/// The lookup tables, aligned for 64-byte loads: byte `p` of lattice point `i` at
/// `grid[p][i]`, and the 8-bit sign byte of each 7-bit sign index.
#[repr(C, align(64))]
pub(crate) struct GridTables {
    pub(crate) grid: [[u8; 256]; 4],
    pub(crate) signs: [u8; 128],
}

/// The tables of both IQ3_XXS kernels with VBMI (this one and `gemm/x86/iq3_xxs_vbmi.rs`).
pub(crate) static TABLES: GridTables = GridTables {
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

/// Where each index position takes its index from: after the unpacks, position
/// `16 L + 4 m + t` lands in register `m`, 128-bit lane `L`, dword `t`, which holds elements
/// `64 m + 16 L + 4 t ..`: point `16 m + 4 L + t`.
const POINT_ORDER: [u8; 64] = {
    let mut order = [0u8; 64];
    let mut at = 0;
    while at < 64 {
        let (lane, m, t) = (at / 16, (at % 16) / 4, at % 4);
        order[at] = (16 * m + 4 * lane + t) as u8;
        at += 1;
    }
    order
};

/// `vpmultishiftqb` offsets: bytes 0..4 of each qword take the group word's four 7-bit sign
/// indices (bits 0, 7, 14, 21); bytes 4..8 are not used.
const SIGN_FIELDS: [u8; 8] = [0, 7, 14, 21, 0, 0, 0, 0];

/// The kernel's constants, loaded once per row.
struct Consts {
    /// `grid[p][q]`: byte `p` of points `64 q .. 64 q + 64`.
    grid: [[__m512i; 4]; 4],
    /// `KSIGNS_IQ2XS`: entries 0..64, 64..128.
    signs: [__m512i; 2],
    point_order: __m512i,
    sign_fields: __m512i,
    /// For register `m`: the dword of group `2 m`'s multiplier in lanes 0..8, of group
    /// `2 m + 1`'s in lanes 8..16 (the multipliers sit one to a qword, in its low dword).
    group_of_lane: [__m512i; 4],
}

/// # Safety
/// AVX-512 F is available.
#[inline(always)]
unsafe fn consts() -> Consts {
    // No closures: they would not inherit the caller's target features.
    let t = &TABLES;
    let mut grid = [[_mm512_setzero_si512(); 4]; 4];
    for (p, bytes) in grid.iter_mut().enumerate() {
        for (q, v) in bytes.iter_mut().enumerate() {
            *v = _mm512_load_si512(t.grid[p][64 * q..].as_ptr().cast());
        }
    }
    let mut group_of_lane = [_mm512_setzero_si512(); 4];
    for (m, v) in group_of_lane.iter_mut().enumerate() {
        let (a, b) = (4 * m as i32, 4 * m as i32 + 2);
        *v = _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
    }
    Consts {
        grid,
        signs: [
            _mm512_load_si512(t.signs.as_ptr().cast()),
            _mm512_load_si512(t.signs[64..].as_ptr().cast()),
        ],
        point_order: _mm512_loadu_si512(POINT_ORDER.as_ptr().cast()),
        sign_fields: _mm512_set1_epi64(i64::from_le_bytes(SIGN_FIELDS)),
        group_of_lane,
    }
}

/// Byte `p` of the lattice points whose indices are in `idx` (`hi`: their top bits).
///
/// # Safety
/// AVX-512 F, BW and VBMI are available.
#[inline(always)]
unsafe fn point_bytes(c: &[__m512i; 4], idx: __m512i, hi: __mmask64) -> __m512i {
    let lo = _mm512_permutex2var_epi8(c[0], idx, c[1]);
    let up = _mm512_permutex2var_epi8(c[2], idx, c[3]);
    _mm512_mask_blend_epi8(hi, lo, up)
}

/// One block's exact products: 16 i32 lanes that add up to `Σ_g (2 s_g + 1) Σ w y`.
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI and VBMI are available.
#[inline(always)]
unsafe fn block_lanes(c: &Consts, x: &BlockIQ3_XXS, y: &BlockQ8_K) -> __m512i {
    // The 64 points' bytes, interleaved into element order (module docs).
    let idx = _mm512_permutexvar_epi8(c.point_order, _mm512_loadu_si512(x.qs.as_ptr().cast()));
    let hi = _mm512_movepi8_mask(idx);
    let b0 = point_bytes(&c.grid[0], idx, hi);
    let b1 = point_bytes(&c.grid[1], idx, hi);
    let b2 = point_bytes(&c.grid[2], idx, hi);
    let b3 = point_bytes(&c.grid[3], idx, hi);
    let (lo01, hi01) = (_mm512_unpacklo_epi8(b0, b1), _mm512_unpackhi_epi8(b0, b1));
    let (lo23, hi23) = (_mm512_unpacklo_epi8(b2, b3), _mm512_unpackhi_epi8(b2, b3));
    let w = [
        _mm512_unpacklo_epi16(lo01, lo23),
        _mm512_unpackhi_epi16(lo01, lo23),
        _mm512_unpacklo_epi16(hi01, hi23),
        _mm512_unpackhi_epi16(hi01, hi23),
    ];
    // Group words, one to a qword: sign bytes in bytes 0..4, multipliers.
    let words = _mm512_cvtepu32_epi64(_mm256_loadu_si256(x.qs.as_ptr().add(64).cast()));
    let fields = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(c.sign_fields, words),
        _mm512_set1_epi8(0x7f),
    );
    let signs = _mm512_permutex2var_epi8(c.signs[0], fields, c.signs[1]);
    // Bytes 0..4 of each qword: the 256 sign bits in element order.
    let bits: [u64; 4] = std::mem::transmute(_mm512_cvtepi64_epi32(signs));
    let mult = _mm512_or_si512(
        _mm512_slli_epi64::<1>(_mm512_srli_epi64::<28>(words)),
        _mm512_set1_epi64(1),
    );
    let mut sum = _mm512_setzero_si512();
    for m in 0..4 {
        let a = _mm512_loadu_si512(y.qs.as_ptr().add(64 * m).cast());
        let a = _mm512_mask_sub_epi8(a, bits[m], _mm512_setzero_si512(), a);
        let p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[m], a);
        let scale = _mm512_permutexvar_epi32(c.group_of_lane[m], mult);
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(p, scale));
    }
    sum
}

/// The 8 lanes of `v`'s halves added (exact).
#[inline(always)]
unsafe fn fold(v: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
}

impl Iq3XxsSums for Consts {
    #[inline(always)]
    unsafe fn sums(&self, x: &BlockIQ3_XXS, y: &BlockQ8_K) -> __m256i {
        fold(block_lanes(self, x, y))
    }
}

/// `vec_dot` in block order (module docs).
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI and VBMI, AVX2, FMA and F16C are available.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
pub(super) unsafe fn vec_dot(x: &[BlockIQ3_XXS], y: &[BlockQ8_K]) -> f32 {
    in_block_order(&consts(), x, y)
}
