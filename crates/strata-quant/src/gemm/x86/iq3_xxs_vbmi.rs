//! IQ3_XXS against Q8_K on AVX-512 with VBMI and BITALG, where the byte permutes of
//! `dot/x86/avx512/iq3_xxs.rs` decode a whole block at once:
//!
//! - **One to a few tokens** (decode, a speculative window, several sequences, small expert
//!   batches): that kernel through the shared tile loop (`tile.rs`, [`Vbmi`]), each weight block
//!   decoded once for every token of the batch and each token prepared once.
//! - **More** (prefill; a routed expert's ~10 tokens): the tokens-in-lanes kernels with the
//!   same decode ([`Permutes`]): 16 tokens in the lanes (`iq3_xxs_lanes.rs`), or to 8 tokens a
//!   row pair and 8 tokens (`iq3_xxs_pairs.rs`). Their lookups of eight points at a time were
//!   most of the lanes' cost where a row's decoded blocks meet few tokens: criterion
//!   (`expert/IQ3_XXS/gemm/avx512`, Intel Xeon, one core) 16 tokens 102 → 122–125 G
//!   products/s, 32 tokens 133 → 151; 8 tokens 57 → 94 with the row pairs.
//!
//! Every entry equals this path's `vec_dot`, and the scalar reference, bit for bit.

use std::arch::x86_64::*;

use super::super::tile::{run, Job, Tile};
use super::iq3_xxs_lanes::{lanes16, BlockDecode, BIAS};
use super::iq3_xxs_pairs::{Pairs8, Quads4};
use super::token_lanes::{self, TokenLanes};
use crate::dot::x86::avx512::iq3_xxs::{self as kernel, Dec, Prep};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

pub(super) use kernel::available;

/// Tokens from which a job runs with a row pair and 8 tokens in the lanes ([`Pairs8`]) rather
/// than through [`Vbmi`]; from 9 tokens, 16 in the lanes ([`lanes16`]). Criterion on an Intel
/// Xeon (`expert/IQ3_XXS/gemm/avx512`, 512 × 2048, one core, G products/s, eighteenth
/// session): 4 tokens 47 against 46, 6 tokens 70 against 52, 8 tokens 94 against 57
/// ([`Vbmi`]) and 64 (16 in the lanes); 10 tokens 16 in the lanes 76–79 against 61–63.
pub(super) const PAIRS_MIN: usize = 4;

/// `job`: [`Vbmi`] below [`PAIRS_MIN`] tokens (one included), [`Pairs8`] to 8 tokens, row
/// quads ([`Quads4`]) where [`quads_win`], else 16 tokens in the lanes, with a last partial
/// group of fewer than [`PAIRS_MIN`] tokens through [`Vbmi`] (from there a partial group in the lanes costs its products only, about
/// what [`Pairs8`] would cost with its decoding again).
///
/// # Safety
/// AVX-512 F, BW, VL, VNNI, VBMI and BITALG, AVX2, FMA and F16C are available; `gemm` checked
/// the lengths.
#[target_feature(
    enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512bitalg"
)]
pub(super) unsafe fn gemm(job: Job<'_>) -> bool {
    if job.n_tok < PAIRS_MIN {
        return run::<Vbmi, 2, 4>(job);
    }
    if job.n_tok <= Pairs8::<Permutes>::LANES {
        token_lanes::run::<Pairs8<Permutes>, 4>(job);
        return true;
    }
    if quads_win(job.n_tok) {
        token_lanes::run::<Quads4<Permutes>, QUADS_R>(job);
        return true;
    }
    if let Some(tail) = lanes16::<Permutes>(job, 1..PAIRS_MIN) {
        let written = run::<Vbmi, 2, 4>(tail);
        assert!(written, "the VBMI tile takes one token too");
    }
    true
}

/// Row quads per decoded group ([`Quads4`]).
const QUADS_R: usize = 4;

/// Whether a job of `n_tok` tokens (more than 8) runs as row quads with 4 tokens a register
/// ([`Quads4`]): past one group of 16 tokens, when the last group of 16 would be at most three
/// quarters full (`⌈n/4⌉ / 4` `vpdpbusd`s per row against `⌈n/16⌉`). Below 16 the decode, not
/// the products, sets the pace. Criterion on an Intel Xeon (`expert/IQ3_XXS/gemm/avx512`,
/// 512 × 2048, one core, G products/s, nineteenth session, two rounds): 20 tokens 111–112
/// against 91–95 (16 in the lanes and a [`Vbmi`] tail); 10 tokens 73–76 against 76–77, 12
/// tokens 90 against 90–91, so those stay in the lanes; 40 tokens even (129–140 against
/// 131–135), 52 tokens 146 against 137, to 48 as for the block-order formats.
fn quads_win(n_tok: usize) -> bool {
    (17..=48).contains(&n_tok) && token_lanes::quads_fill_better(n_tok)
}

/// The tokens-in-lanes kernels' block decode with byte permutes: [`kernel::decode`]'s points
/// (register `p` = byte `p` of the 64 points) given their signs and bias, then interleaved
/// back to element order.
pub(super) struct Permutes;

impl BlockDecode for Permutes {
    #[inline(always)]
    unsafe fn decode(x: &BlockIQ3_XXS, q: &mut [i32; 64]) -> ([i32; 8], f32) {
        let (bytes, negative, mult, d) = kernel::decode(x);
        let bias = _mm512_set1_epi8(BIAS);
        // w + 64, or 64 - w where the element's sign is set.
        let mut w = [bias; 4];
        for (p, w) in w.iter_mut().enumerate() {
            let plus = _mm512_add_epi8(bytes[p], bias);
            *w = _mm512_mask_sub_epi8(plus, negative[p], bias, bytes[p]);
        }
        // Per 128-bit lane L (points 16 L .. 16 L + 16): bytes 0, 1 and 2, 3 of points
        // 0..8 and 8..16 side by side, then whole points: `r[i]` lane L = points
        // 16 L + 4 i .. 16 L + 4 i + 4.
        let (lo01, hi01) = (
            _mm512_unpacklo_epi8(w[0], w[1]),
            _mm512_unpackhi_epi8(w[0], w[1]),
        );
        let (lo23, hi23) = (
            _mm512_unpacklo_epi8(w[2], w[3]),
            _mm512_unpackhi_epi8(w[2], w[3]),
        );
        let r = [
            _mm512_unpacklo_epi16(lo01, lo23),
            _mm512_unpackhi_epi16(lo01, lo23),
            _mm512_unpacklo_epi16(hi01, hi23),
            _mm512_unpackhi_epi16(hi01, hi23),
        ];
        // Transposed as 4 × 4 lanes: register L = lane L of r[0], r[1], r[2], r[3].
        let t0 = _mm512_shuffle_i64x2::<0b01_00_01_00>(r[0], r[1]);
        let t1 = _mm512_shuffle_i64x2::<0b11_10_11_10>(r[0], r[1]);
        let t2 = _mm512_shuffle_i64x2::<0b01_00_01_00>(r[2], r[3]);
        let t3 = _mm512_shuffle_i64x2::<0b11_10_11_10>(r[2], r[3]);
        let out = [
            _mm512_shuffle_i64x2::<0b10_00_10_00>(t0, t2),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(t0, t2),
            _mm512_shuffle_i64x2::<0b10_00_10_00>(t1, t3),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(t1, t3),
        ];
        for (i, out) in out.iter().enumerate() {
            _mm512_storeu_si512(q.as_mut_ptr().add(16 * i).cast(), *out);
        }
        // Group g's multiplier is in lanes 2 g and 2 g + 1.
        let mut ls = [0i32; 8];
        _mm256_storeu_si256(ls.as_mut_ptr().cast(), _mm512_cvtepi64_epi32(mult));
        (ls, d)
    }
}

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
    type Dec = Dec;
    type Prep = Prep;
    type Acc = f32;

    #[inline(always)]
    unsafe fn decode(w: *const BlockIQ3_XXS) -> Dec {
        kernel::decode(&*w)
    }
    #[inline(always)]
    unsafe fn prep(a: *const BlockQ8_K) -> Prep {
        kernel::prep(&*a)
    }
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn step(acc: f32, w: &Dec, a: &Prep) -> f32 {
        kernel::step(acc, w, a)
    }
    #[inline(always)]
    unsafe fn finish(acc: [f32; 2], _: &[BlockIQ3_XXS], _: &[BlockQ8_K]) -> f32 {
        0.25 * acc[0]
    }
}
