//! IQ3_XXS against Q8_K for one to a few tokens on AVX-512 with VBMI and BITALG (decode, a
//! speculative window, several sequences, small expert batches), in block order: every entry
//! equals this path's `vec_dot` and the scalar reference bit for bit, as the other block-order
//! kernels (`iq3_xxs_lanes.rs`, `dot/x86/avx512/iq3_xxs.rs`).
//!
//! A weight block is decoded once for every token of the batch, through the shared tile loop
//! (`tile.rs`: the activations prepared once per product, the rows streaming by):
//!
//! - **Points by byte.** Register `p` holds byte `p` of each of the block's 64 lattice points
//!   (elements `4 j + p`, `j` = 0..64): two `vpermi2b` over a 256-entry byte table and a blend
//!   on the index's top bit, with the indices as they are stored. The activations are
//!   rearranged the same way once per token ([`Vbmi::prep`]), so no unpacking is needed.
//! - **Signs as masks.** The 32 sign bytes (`vpmultishiftqb`, then `KSIGNS_IQ2XS` through one
//!   `vpermi2b`) stay one group to a qword, and `vpshufbitqmb` picks each register's 64 sign
//!   bits out of them; a masked negation applies them to the activations of each token.
//! - **Sums.** Four `vpdpbusd` into one register whose lanes `2 g`, `2 g + 1` hold group `g`
//!   (every register's lane `k` covers elements `16 k .. 16 k + 16`), one multiply by the odd
//!   multipliers, one reduction: the block's exact i32 sum. Then `acc + isum · (d_x · d_y)`,
//!   block after block, and times 1/4 at the end: the reference's float operations.

use std::arch::x86_64::*;

use super::super::tile::{run, Job, Tile};
use crate::dot::x86::avx2::legacy::block_d;
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

use crate::dot::x86::avx512::iq3_xxs::{GridTables, TABLES};

/// Whether this CPU has AVX512-VBMI and AVX512-BITALG (the caller holds the rest of
/// AVX-512; `crate::testing::vbmi`): cached probes.
#[inline(always)]
pub(super) fn available() -> bool {
    crate::testing::vbmi()
}

/// `job` (fewer tokens than the tokens-in-lanes kernel takes) through the shared tile loop.
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI, VBMI and BITALG, AVX2, FMA and F16C are available; `gemm` checked
/// the lengths.
#[target_feature(
    enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg"
)]
pub(super) unsafe fn gemm(job: Job<'_>) -> bool {
    run::<Vbmi, 2, 4>(job)
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

/// The tile kernel (module docs).
pub(super) struct Vbmi;

impl Tile for Vbmi {
    type W = BlockIQ3_XXS;
    type A = BlockQ8_K;
    const STEP: usize = 1;
    const CHAINS: usize = 1;
    /// The rearranging costs about a step, and one token runs here too.
    const PREP_ONCE: bool = true;
    const FEW_GROUP: usize = 4;
    /// Byte `p` of the 64 points in register `p`; the sign masks; the multiplier of each
    /// lane's group; `d_x`.
    type Dec = ([__m512i; 4], [__mmask64; 4], __m512i, f32);
    /// Elements `4 j + p` in register `p`; `d_y`.
    type Prep = ([__m512i; 4], f32);
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const BlockIQ3_XXS) -> Self::Dec {
        let x = &*w;
        let t: &GridTables = &TABLES;
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
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Self::Prep {
        let y = &*a;
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
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Self::Dec, a: &Self::Prep) -> f32 {
        let zero = _mm512_setzero_si512();
        let mut sum = zero;
        for p in 0..4 {
            let y = _mm512_mask_sub_epi8(a.0[p], w.1[p], zero, a.0[p]);
            sum = _mm512_dpbusd_epi32(sum, w.0[p], y);
        }
        let isum = _mm512_reduce_add_epi32(_mm512_mullo_epi32(sum, w.2));
        acc + isum as f32 * (w.3 * a.1)
    }
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], _: &[BlockIQ3_XXS], _: &[BlockQ8_K]) -> f32 {
        0.25 * acc[0]
    }
}

/// `vpmultishiftqb` offsets: bytes 0..4 of each qword take the group word's four 7-bit sign
/// indices (bits 0, 7, 14, 21); bytes 4..8 are not used.
const SIGN_FIELDS: i64 = i64::from_le_bytes([0, 7, 14, 21, 0, 0, 0, 0]);
