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
//! A *row quad* ([`Quads4`]) does the same with four rows and 4 tokens a register (lane
//! `4t + s`), for the jobs just past a whole group of 16 tokens.
//!
//! [`Lanes16`]: super::iq3_xxs_lanes::Lanes16

use std::arch::x86_64::*;

use std::marker::PhantomData;

use super::iq3_xxs_lanes::{lanes_tile, repack_zmm, ActBlock, BlockDecode, Spread, Zmm};
use super::token_lanes::{
    spread_pair_ps, spread_quad_epi32, spread_quad_ps, zip_dwords, zip_qwords, TokenLanes,
};
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

/// One decoded block of a row quad: each field's values for rows 0 to 3 side by side (128
/// bits), so a 128-bit broadcast gives lanes `[row 0, row 1, row 2, row 3, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct QuadBlock {
    /// The 64 dwords of biased weights (4 bytes each, in element order) of the four rows.
    q: [[i32; 4]; 64],
    /// The 8 groups' odd multipliers `2 s + 1` of the four rows.
    ls: [[i32; 4]; 8],
    /// `d_x` of the four rows.
    d: [f32; 4],
}

impl Spread<Zmm> for QuadBlock {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        spread_quad_epi32(&self.q[k])
    }
    #[inline(always)]
    unsafe fn ls(&self, g: usize) -> __m512i {
        spread_quad_epi32(&self.ls[g])
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        spread_quad_ps(&self.d)
    }
}

/// IQ3_XXS with a row quad and 4 tokens in the lanes (run by `token_lanes.rs`), blocks
/// decoded by `D`: a job of 9 to 12 tokens fills three registers where 16 tokens in the lanes
/// fill one 56–75 %, so it takes three quarters of the `vpdpbusd`s per row.
pub(super) struct Quads4<D>(PhantomData<D>);

impl<D: BlockDecode> TokenLanes for Quads4<D> {
    type W = BlockIQ3_XXS;
    type A = BlockQ8_K;
    type RowBlock = QuadBlock;
    type ActBlock = ActBlock<Zmm>;
    type Sums = __m512;
    const LANES: usize = 4;
    const ROWS: usize = 4;
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
        repack_zmm(a, nb, n_tok, g0, g1, dst, 4)
    }

    /// The four rows' blocks decoded as for [`Lanes16`](super::iq3_xxs_lanes::Lanes16),
    /// their dwords interleaved four ways.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[BlockIQ3_XXS]], dst: *mut QuadBlock, stride: usize) {
        let mut q = [[0i32; 64]; 4];
        for (b, x0) in rows[0].iter().enumerate() {
            let x = [x0, &rows[1][b], &rows[2][b], &rows[3][b]];
            let out = &mut *dst.add(b * stride);
            for s in 0..4 {
                let ls;
                (ls, out.d[s]) = D::decode(x[s], &mut q[s]);
                for (g, ls) in ls.into_iter().enumerate() {
                    out.ls[g][s] = ls;
                }
            }
            for h in 0..4 {
                let x = [0, 1, 2, 3].map(|s| q[s].as_ptr().add(16 * h));
                let (p01, p01_1) = zip_dwords(
                    _mm512_loadu_si512(x[0].cast()),
                    _mm512_loadu_si512(x[1].cast()),
                );
                let (p23, p23_1) = zip_dwords(
                    _mm512_loadu_si512(x[2].cast()),
                    _mm512_loadu_si512(x[3].cast()),
                );
                // Dwords 16 h .. 16 h + 16 of the four rows, 4 per register.
                let at = out.q.as_mut_ptr().add(16 * h);
                let (lo, hi) = zip_qwords(p01, p23);
                _mm512_storeu_si512(at.cast(), lo);
                _mm512_storeu_si512(at.add(4).cast(), hi);
                let (lo, hi) = zip_qwords(p01_1, p23_1);
                _mm512_storeu_si512(at.add(8).cast(), lo);
                _mm512_storeu_si512(at.add(12).cast(), hi);
            }
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const QuadBlock,
        acts: *const ActBlock<Zmm>,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<Zmm, QuadBlock, R>(rows, acts, nb)
    }
}
