//! IQ3_XXS against Q8_K on AVX-512 with VBMI and BITALG, where the byte permutes of
//! `dot/x86/avx512/iq3_xxs.rs` decode a whole block at once:
//!
//! - **One to a few tokens** (decode, a speculative window, several sequences, small expert
//!   batches): that kernel through the shared tile loop (`tile.rs`, [`Vbmi`]), each weight block
//!   decoded once for every token of the batch and each token prepared once.
//! - **More** (prefill; a routed expert's 4 to ~150 tokens): the tokens-in-lanes kernels with
//!   the same decode ([`Permutes`], its points left in the order the lookups give them): 16
//!   tokens in the lanes (`iq3_xxs_lanes.rs`), and to 8 tokens (a job's, or those after its
//!   last whole group of 16) a row pair and 8 tokens (`iq3_xxs_pairs.rs`). The table decode's
//!   lookups of eight points at a time were most of the lanes' cost where a row's decoded
//!   blocks meet few tokens: criterion
//!   (`expert/IQ3_XXS/gemm/avx512`, Intel Xeon, one core) 16 tokens 102 → 122–125 G
//!   products/s, 32 tokens 133 → 151; 8 tokens 57 → 94 with the row pairs.
//!
//! Every entry equals this path's `vec_dot`, and the scalar reference, bit for bit.

use std::arch::x86_64::*;

use super::super::tile::{run, Job, Tile};
use super::iq3_xxs_lanes::{lanes16, BlockDecode, BIAS};
use super::iq3_xxs_pairs::Pairs8;
use super::token_lanes::{self, TokenLanes};
use crate::dot::x86::avx512::iq3_xxs::{self as kernel, Dec, Prep};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

pub(super) use kernel::available;

/// Tokens from which a job runs with a row pair and 8 tokens in the lanes ([`Pairs8`]) rather
/// than through [`Vbmi`]; from 9 tokens, 16 in the lanes ([`lanes16`]). Criterion on an Intel
/// Xeon (`expert/IQ3_XXS/gemm/avx512`, 512 × 2048, one core, G products/s, eighteenth
/// session): 4 tokens 47 against 46, 6 tokens 70 against 52, 8 tokens 94 against 57
/// ([`Vbmi`]) and 64 (16 in the lanes); 10 tokens 16 in the lanes 76–79 against 61–63. With
/// the decode kept in slot order ([`Permutes`], twentieth session) 2 tokens still ran 24–26
/// against 32–33.
pub(super) const PAIRS_MIN: usize = 4;

/// `job`: [`Vbmi`] below [`PAIRS_MIN`] tokens (one included), [`Pairs8`] to 8 tokens, else
/// 16 tokens in the lanes, the tokens after the last whole group of 16 (up to 8 of them)
/// again through these few-token routes. The same routes on every CPU (Intel Xeon and Zen 5
/// measured).
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
    // The tokens after the last whole group of 16 go through [`Pairs8`] from 4 to 8, through
    // [`Vbmi`] below. Row quads (`Quads4`, 4 rows and 4 tokens a register) lost to this
    // wherever the 8-row tile ran: criterion (`expert/IQ3_XXS/gemm/avx512`, 512 × 2048, one
    // core, G products/s, two rounds) on Intel Xeon family 6 model 207, quads against this:
    // 10 tokens 70–79 against 78–79, 12 tokens 83–94 against 94–96, 17 tokens 82–84 against
    // 92–93, 33 tokens 100–101 against 120–122, 40 tokens 106–125 against 123–126; they won
    // only at 19 and 20 tokens (93–97 against 86–87). On Zen 5 (twenty-third session) 20
    // tokens 184–193 → 198–201, 24 tokens 220–236 → 236–241, 40 tokens 251–261 → 265–271 with
    // these tails, against 16 in the lanes and a [`Vbmi`] tail.
    let tails = 1..Pairs8::<Permutes>::LANES + 1;
    if let Some(tail) = lanes16::<Permutes, 8>(job, tails) {
        // Fewer than 9 tokens: the few-token branches above, which write every entry.
        let written = gemm(tail);
        assert!(written, "the few-token routes take any tail");
    }
    true
}

/// The tokens-in-lanes kernels' block decode with byte permutes: [`kernel::decode`]'s points
/// (register `p` = byte `p` of the 64 points) given their signs and bias, kept in that order:
/// slot `16 p + m` holds byte `p` of points `4 m .. 4 m + 4` (weights `16 m + 4 i + p`,
/// `i` = 0..4). The activations are reordered to match, once per token, where interleaving
/// the weights back to element order cost 16 shuffles per row and block.
pub(super) struct Permutes;

/// [`Permutes::reorder`]'s byte selections: output register `p`, byte `4 m + i` takes
/// activation `16 m + 4 i + p`, as byte `16 (m mod 8) + 4 i + p` of registers 0–1 (`m < 8`)
/// or 2–3.
const REORDER: [[u8; 64]; 4] = {
    let mut t = [[0u8; 64]; 4];
    let mut p = 0;
    while p < 4 {
        let mut m = 0;
        while m < 16 {
            let mut i = 0;
            while i < 4 {
                t[p][4 * m + i] = (16 * (m % 8) + 4 * i + p) as u8;
                i += 1;
            }
            m += 1;
        }
        p += 1;
    }
    t
};

impl BlockDecode for Permutes {
    type W = BlockIQ3_XXS;
    const REORDERED: bool = true;

    #[inline(always)]
    unsafe fn decode(x: &BlockIQ3_XXS, q: &mut [i32; 64]) -> ([i32; 8], f32) {
        let (bytes, negative, mult, d) = kernel::decode(x);
        let bias = _mm512_set1_epi8(BIAS);
        // w + 64, or 64 - w where the element's sign is set.
        for (p, bytes) in bytes.iter().enumerate() {
            let plus = _mm512_add_epi8(*bytes, bias);
            let w = _mm512_mask_sub_epi8(plus, negative[p], bias, *bytes);
            _mm512_storeu_si512(q.as_mut_ptr().add(16 * p).cast(), w);
        }
        // Group g's multiplier is in lanes 2 g and 2 g + 1.
        let mut ls = [0i32; 8];
        _mm256_storeu_si256(ls.as_mut_ptr().cast(), _mm512_cvtepi64_epi32(mult));
        (ls, d)
    }

    /// Group `g` is points `8 g .. 8 g + 8`: `m` = `2 g`, `2 g + 1` of every register `p`.
    #[inline(always)]
    fn slot(g: usize, j: usize) -> usize {
        16 * (j % 4) + 2 * g + j / 4
    }

    #[inline(always)]
    unsafe fn reorder(y: &[i8; 256], dst: &mut [i32; 64]) {
        let y = y.as_ptr();
        let (y0, y1) = (
            _mm512_loadu_si512(y.cast()),
            _mm512_loadu_si512(y.add(64).cast()),
        );
        let (y2, y3) = (
            _mm512_loadu_si512(y.add(128).cast()),
            _mm512_loadu_si512(y.add(192).cast()),
        );
        for (p, pick) in REORDER.iter().enumerate() {
            let pick = _mm512_loadu_si512(pick.as_ptr().cast());
            let low = _mm512_permutex2var_epi8(y0, pick, y1);
            let high = _mm512_permutex2var_epi8(y2, pick, y3);
            let w = _mm512_mask_blend_epi8(0xffff_ffff_0000_0000, low, high);
            _mm512_storeu_si512(dst.as_mut_ptr().add(16 * p).cast(), w);
        }
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
