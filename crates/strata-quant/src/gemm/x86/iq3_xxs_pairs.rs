//! IQ3_XXS against Q8_K on AVX-512 with a *pair of rows* in one register's lanes: lane
//! `2t + s` holds row `s` of the pair against token `t`, so a group of 8 tokens fills the 16
//! lanes where the tokens-in-lanes tile (`iq3_xxs_lanes.rs`, [`Lanes16`]) would leave half of
//! them empty. A routed expert in a prefill chunk meets about 10 tokens (512 tokens, 10 of 512
//! experts), where every group of 16 lanes holds at most 10 tokens.
//!
//! Everything else is [`Lanes16`]'s: the same biased lattice points, the same `vpdpbusd` from
//! `-64 Σ y`, the same multipliers and float operations per lane in block order, so every
//! entry is `vec_dot` on this path bit for bit (`tests/gemm.rs`). Only the spreading differs:
//! the decoded pair holds each dword of its two rows side by side (a qword), which one
//! broadcast load puts into every lane pair, and the activations repeat each token in two
//! adjacent lanes.
//!
//! [`Lanes16`]: super::iq3_xxs_lanes::Lanes16

use std::arch::x86_64::*;

use std::marker::PhantomData;

use super::iq3_xxs_lanes::{lanes_tile, repack_zmm, ActBlock, BlockDecode, Spread, Zmm};
use super::token_lanes::{spread_pair_ps, zip_dwords, TokenLanes};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

/// One decoded block of a row pair: each field's value for row 0 in the low dword of a qword
/// and row 1's in the high one, so a qword broadcast gives lanes `[row 0, row 1, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct PairBlock {
    /// The 64 dwords of biased weights (4 bytes each, in element order) of both rows.
    q: [i64; 64],
    /// The 8 groups' odd multipliers `2 s + 1` of both rows.
    ls: [i64; 8],
    /// `d_x` of both rows.
    d: [f32; 2],
}

impl Spread<Zmm> for PairBlock {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        _mm512_set1_epi64(self.q[k])
    }
    #[inline(always)]
    unsafe fn ls(&self, g: usize) -> __m512i {
        _mm512_set1_epi64(self.ls[g])
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        spread_pair_ps(&self.d)
    }
}

/// Two dwords in one qword: `lo` in the low half.
#[inline(always)]
fn pair(lo: i32, hi: i32) -> i64 {
    (lo as u32 as i64) | ((hi as i64) << 32)
}

/// IQ3_XXS with a row pair and 8 tokens in the lanes (run by `token_lanes.rs`), blocks
/// decoded by `D`.
pub(super) struct Pairs8<D>(PhantomData<D>);

impl<D: BlockDecode> TokenLanes for Pairs8<D> {
    type W = BlockIQ3_XXS;
    type A = BlockQ8_K;
    type RowBlock = PairBlock;
    type ActBlock = ActBlock<Zmm>;
    type Sums = __m512;
    const LANES: usize = 8;
    const ROWS: usize = 2;
    const ACT_BYTES: usize = 512 << 10;

    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_K],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock<Zmm>,
    ) {
        repack_zmm(a, nb, n_tok, g0, g1, dst, 2)
    }

    /// Both rows' blocks decoded as for [`Lanes16`](super::iq3_xxs_lanes::Lanes16), their
    /// dwords interleaved.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[BlockIQ3_XXS]], dst: *mut PairBlock, stride: usize) {
        let (mut q0, mut q1) = ([0i32; 64], [0i32; 64]);
        for (b, (x0, x1)) in rows[0].iter().zip(rows[1]).enumerate() {
            let (ls0, d0) = D::decode(x0, &mut q0);
            let (ls1, d1) = D::decode(x1, &mut q1);
            let out = &mut *dst.add(b * stride);
            for h in 0..4 {
                let a = _mm512_loadu_si512(q0.as_ptr().add(16 * h).cast());
                let b = _mm512_loadu_si512(q1.as_ptr().add(16 * h).cast());
                let (lo, hi) = zip_dwords(a, b);
                let at = out.q.as_mut_ptr().add(16 * h);
                _mm512_storeu_si512(at.cast(), lo);
                _mm512_storeu_si512(at.add(8).cast(), hi);
            }
            for (g, ls) in out.ls.iter_mut().enumerate() {
                *ls = pair(ls0[g], ls1[g]);
            }
            out.d = [d0, d1];
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const PairBlock,
        acts: *const ActBlock<Zmm>,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<Zmm, PairBlock, R>(rows, acts, nb)
    }
}
