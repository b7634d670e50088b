//! IQ3_XXS against Q8_K for one to a few tokens on AVX-512 with VBMI and BITALG (decode, a
//! speculative window, several sequences, small expert batches): the kernel of
//! `dot/x86/avx512/iq3_xxs.rs` through the shared tile loop (`tile.rs`), each weight block
//! decoded once for every token of the batch and each token prepared once. Every entry equals
//! this path's `vec_dot`, and the scalar reference, bit for bit.

use super::super::tile::{run, Job, Tile};
use crate::dot::x86::avx512::iq3_xxs::{self as kernel, Dec, Prep};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

pub(super) use kernel::available;

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
