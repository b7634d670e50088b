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
//! chunk, and each token fills the four lanes of its chunk. Both are [`Sides`], `S` rows side
//! by side.
//!
//! [`Lanes16`]: super::block_order::Lanes16

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::block_order::{lanes_tile, repack16, ActBlock, Spread};
use super::token_lanes::{interleave_rows, spread_rows, TokenLanes};
use crate::dot::x86::avx512::legacy::{block_d, Offset};
use crate::legacy::BlockQ8_0;

/// One decoded block of `S` rows (2: a pair, 4: a quad): each field's values for the `S` rows
/// side by side, so one broadcast gives lanes `[row 0, …, row S-1, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct SideBlock<const S: usize> {
    /// The 8 dwords of biased quants (4 bytes each, in element order) of the `S` rows.
    q: [[i32; S]; 8],
    /// `d_x` of the `S` rows.
    d: [f32; S],
}

impl<const S: usize> Spread for SideBlock<S> {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        spread_rows::<S>(self.q[k].as_ptr().cast())
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        _mm512_castsi512_ps(spread_rows::<S>(self.d.as_ptr().cast()))
    }
}

/// The symmetric formats with `S` rows side by side and `16 / S` tokens in the lanes (run by
/// `token_lanes.rs`).
pub(super) struct Sides<X, const S: usize>(PhantomData<X>);

/// A row pair and 8 tokens a register: 6 to 8 tokens fill it.
pub(super) type Pairs8<X> = Sides<X, 2>;

/// A row quad and 4 tokens a register: a job of 9 to 12 tokens fills three registers where 16
/// tokens in the lanes fill one 56–75 %, so it takes three quarters of the `vpdpbusd`s per row.
pub(super) type Quads4<X> = Sides<X, 4>;

impl<X: Offset + crate::Block, const S: usize> TokenLanes for Sides<X, S> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = SideBlock<S>;
    type ActBlock = ActBlock;
    type Sums = __m512;
    const LANES: usize = 16 / S;
    const ROWS: usize = S;
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
        repack16::<X>(a, nb, n_tok, g0, g1, dst, S)
    }

    /// Two blocks of each row at a time, as `vec_dot` decodes them, their dwords interleaved.
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut SideBlock<S>, stride: usize) {
        let nb = rows[0].len();
        let mut b = 0;
        while b < nb {
            let b1 = (b + 1).min(nb - 1);
            // No closures: they would not inherit the caller's target features.
            let mut x = [_mm512_setzero_si512(); S];
            let mut d = [[0.0f32; S]; 2];
            for s in 0..S {
                x[s] = X::biased_pair(&rows[s][b], &rows[s][b1]);
                d[0][s] = block_d(&rows[s][b]);
                d[1][s] = block_d(&rows[s][b1]);
            }
            // Block b's dwords of the S rows, then block b1's.
            let both = interleave_rows::<S>(&x);
            for (i, at) in [b, b1]
                .into_iter()
                .enumerate()
                .take(if b1 == b { 1 } else { 2 })
            {
                let out = &mut *dst.add(at * stride);
                let q = out.q.as_mut_ptr().cast::<__m512i>();
                for (r, v) in both[i].into_iter().take(S / 2).enumerate() {
                    _mm512_storeu_si512(q.add(r).cast(), v);
                }
                out.d = d[i];
            }
            b += 2;
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const SideBlock<S>,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<SideBlock<S>, R>(rows, acts, nb)
    }
}
