//! The symmetric 32-element formats (Q4_0, Q5_0, Q8_0, IQ4_NL against Q8_0) on AVX-512 with
//! a *pair of rows* in one register's lanes: lane `2t + s` holds row `s` of the pair against
//! token `t`, so a group of 8 tokens fills the 16 lanes where 16 tokens in the lanes
//! (`block_order.rs`, [`Lanes16`]) would leave half of them empty. A routed expert in a
//! prefill chunk meets about 10 tokens (512 tokens, 10 of 512 experts), many fewer than 9.
//!
//! Everything else is [`Lanes16`]'s: the same biased quants, the same `vpdpbusd` from
//! `-OFFSET Σ y`, the same float operations per lane in block order, so every entry is
//! `vec_dot` on this path bit for bit (`tests/gemm.rs`). Only the spreading differs: the
//! decoded pair holds each dword of its two rows side by side (a qword), which one broadcast
//! load puts into every lane pair, and the activations repeat each token in two adjacent lanes.
//!
//! A *row quad* ([`Quads4`]) does the same with four rows and 4 tokens a register (lane
//! `4t + s`): one 128-bit broadcast load gives each dword of the four rows to every 128-bit
//! chunk, and each token fills the four lanes of its chunk.
//!
//! [`Lanes16`]: super::block_order::Lanes16

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::block_order::{lanes_tile, repack16, ActBlock, Spread};
use super::token_lanes::{
    spread_pair_ps, spread_quad_epi32, spread_quad_ps, zip_dwords, zip_qwords, TokenLanes,
};
use crate::dot::x86::avx512::legacy::{block_d, Offset};
use crate::legacy::BlockQ8_0;

/// One decoded block of a row pair: each field's value for row 0 in the low dword of a qword
/// and row 1's in the high one, so a qword broadcast gives lanes `[row 0, row 1, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct PairBlock {
    /// The 8 dwords of biased quants (4 bytes each, in element order) of both rows.
    q: [i64; 8],
    /// `d_x` of both rows.
    d: [f32; 2],
}

impl Spread for PairBlock {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        _mm512_set1_epi64(self.q[k])
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        spread_pair_ps(&self.d)
    }
}

/// The symmetric formats with a row pair and 8 tokens in the lanes (run by `token_lanes.rs`).
pub(super) struct Pairs8<X>(PhantomData<X>);

impl<X: Offset + crate::Block> TokenLanes for Pairs8<X> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = PairBlock;
    type ActBlock = ActBlock;
    type Sums = __m512;
    const LANES: usize = 8;
    const ROWS: usize = 2;
    const ACT_BYTES: usize = 512 << 10;

    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_0],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock,
    ) {
        repack16::<X>(a, nb, n_tok, g0, g1, dst, 2)
    }

    /// Two blocks of each row at a time, as `vec_dot` decodes them, their dwords interleaved.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut PairBlock, stride: usize) {
        let (r0, r1) = (rows[0], rows[1]);
        let nb = r0.len();
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            let x0 = X::biased_pair(&r0[b], &r0[b1]);
            let x1 = X::biased_pair(&r1[b], &r1[b1]);
            // Block b's dwords of both rows, then block b1's.
            let (both, both1) = zip_dwords(x0, x1);
            let first = &mut *dst.add(b * stride);
            _mm512_storeu_si512(first.q.as_mut_ptr().cast(), both);
            first.d = [block_d(&r0[b]), block_d(&r1[b])];
            if b1 != b {
                let second = &mut *dst.add(b1 * stride);
                _mm512_storeu_si512(second.q.as_mut_ptr().cast(), both1);
                second.d = [block_d(&r0[b1]), block_d(&r1[b1])];
            }
            b += 2;
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const PairBlock,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<PairBlock, R>(rows, acts, nb)
    }
}

/// One decoded block of a row quad: each field's values for rows 0 to 3 side by side (128
/// bits), so a 128-bit broadcast gives lanes `[row 0, row 1, row 2, row 3, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct QuadBlock {
    /// The 8 dwords of biased quants (4 bytes each, in element order) of the four rows.
    q: [[i32; 4]; 8],
    /// `d_x` of the four rows.
    d: [f32; 4],
}

impl Spread for QuadBlock {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        spread_quad_epi32(&self.q[k])
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        spread_quad_ps(&self.d)
    }
}

/// The symmetric formats with a row quad and 4 tokens in the lanes (run by `token_lanes.rs`):
/// a job of 9 to 12 tokens fills three registers where 16 tokens in the lanes fill one
/// 56–75 %, so it takes three quarters of the `vpdpbusd`s per row.
pub(super) struct Quads4<X>(PhantomData<X>);

impl<X: Offset + crate::Block> TokenLanes for Quads4<X> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = QuadBlock;
    type ActBlock = ActBlock;
    type Sums = __m512;
    const LANES: usize = 4;
    const ROWS: usize = 4;
    const ACT_BYTES: usize = 512 << 10;

    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_0],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock,
    ) {
        repack16::<X>(a, nb, n_tok, g0, g1, dst, 4)
    }

    /// Two blocks of each row at a time, as `vec_dot` decodes them, their dwords interleaved
    /// four ways.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut QuadBlock, stride: usize) {
        let nb = rows[0].len();
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            // No closures: they would not inherit the caller's target features.
            let mut x = [_mm512_setzero_si512(); 4];
            let (mut d0, mut d1) = ([0.0f32; 4], [0.0f32; 4]);
            for s in 0..4 {
                x[s] = X::biased_pair(&rows[s][b], &rows[s][b1]);
                d0[s] = block_d(&rows[s][b]);
                d1[s] = block_d(&rows[s][b1]);
            }
            // Rows 0, 1 and rows 2, 3 as pairs (block b's dwords, then block b1's), then the
            // pairs' qwords side by side: one dword of all four rows per 128 bits.
            let (p01, p01_1) = zip_dwords(x[0], x[1]);
            let (p23, p23_1) = zip_dwords(x[2], x[3]);
            let (lo, hi) = zip_qwords(p01, p23);
            let first = &mut *dst.add(b * stride);
            _mm512_storeu_si512(first.q.as_mut_ptr().cast(), lo);
            _mm512_storeu_si512(first.q.as_mut_ptr().add(4).cast(), hi);
            first.d = d0;
            if b1 != b {
                let (lo, hi) = zip_qwords(p01_1, p23_1);
                let second = &mut *dst.add(b1 * stride);
                _mm512_storeu_si512(second.q.as_mut_ptr().cast(), lo);
                _mm512_storeu_si512(second.q.as_mut_ptr().add(4).cast(), hi);
                second.d = d1;
            }
            b += 2;
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const QuadBlock,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<QuadBlock, R>(rows, acts, nb)
    }
}
