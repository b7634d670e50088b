//! IQ3_XXS against Q8_K on AVX-512 with a *pair of rows* in one register's lanes: lane
//! `2t + s` holds row `s` of the pair against token `t`, so a group of 8 tokens fills the 16
//! lanes where the tokens-in-lanes tile (`iq3_xxs_lanes.rs`, [`Lanes16`]) would leave half of
//! them empty. A routed expert in a prefill chunk meets anywhere from 1 to ~150 tokens, and
//! a fifth of its products come in jobs of 5 to 8 (BENCHMARKS.md, nineteenth session).
//!
//! Everything else is [`Lanes16`]'s: the same biased lattice points, the same `vpdpbusd` from
//! `-64 Σ y`, the same multipliers and float operations per lane in block order, so every
//! entry is `vec_dot` on this path bit for bit (`tests/gemm.rs`). Only the spreading differs:
//! the decoded pair holds each dword of its two rows side by side (a qword), which one
//! broadcast load puts into every lane pair, and the activations repeat each token in two
//! adjacent lanes.
//!
//! The pair is [`Sides`] with `S` = 2 rows side by side; four (a row quad, lane `4t + s`)
//! lost to 16 tokens in the lanes of 8-row tiles on Intel Xeon and Zen 5 (`iq3_xxs_vbmi.rs`).
//!
//! The decoded dwords are in the decoder's slot order ([`BlockDecode::slot`]), which the
//! activations' repacking follows.
//!
//! [`Lanes16`]: super::iq3_xxs_lanes::Lanes16

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::iq3_xxs_lanes::{lanes_tile, repack_zmm, ActBlock, BlockDecode, Spread, Zmm};
use super::token_lanes::{interleave_rows, spread_rows, TokenLanes};
use crate::iq3::BlockIQ3_XXS;
use crate::q8_k::BlockQ8_K;

/// One decoded block of `S` rows (2: a pair, 4: a quad): each field's values for the `S` rows
/// side by side, so one broadcast gives lanes `[row 0, …, row S-1, row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct SideBlock<const S: usize> {
    /// The 64 dwords of biased weights (4 bytes each, in the decoder's slot order) of the `S`
    /// rows.
    q: [[i32; S]; 64],
    /// The 8 groups' odd multipliers `2 s + 1` of the `S` rows, as
    /// [`word_pair`](super::iq3_xxs_lanes::word_pair)s.
    ls: [[i32; S]; 8],
    /// `d_x` of the `S` rows.
    d: [f32; S],
}

impl<const S: usize> Spread<Zmm> for SideBlock<S> {
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m512i {
        spread_rows::<S>(self.q[k].as_ptr().cast())
    }
    #[inline(always)]
    unsafe fn ls(&self, g: usize) -> __m512i {
        spread_rows::<S>(self.ls[g].as_ptr().cast())
    }
    #[inline(always)]
    unsafe fn d(&self) -> __m512 {
        _mm512_castsi512_ps(spread_rows::<S>(self.d.as_ptr().cast()))
    }
}

/// IQ3_XXS with `S` rows side by side and `16 / S` tokens in the lanes (run by
/// `token_lanes.rs`), blocks decoded by `D`.
pub(super) struct Sides<D, const S: usize>(PhantomData<D>);

/// A row pair and 8 tokens a register: 4 to 8 tokens.
pub(super) type Pairs8<D> = Sides<D, 2>;

impl<D: BlockDecode<W = BlockIQ3_XXS>, const S: usize> TokenLanes for Sides<D, S> {
    type W = BlockIQ3_XXS;
    type A = BlockQ8_K;
    type RowBlock = SideBlock<S>;
    type ActBlock = ActBlock<Zmm>;
    type Sums = __m512;
    const LANES: usize = 16 / S;
    const ROWS: usize = S;
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
        repack_zmm::<D, 8>(a, nb, n_tok, g0, g1, dst, S)
    }

    /// The rows' blocks decoded as for [`Lanes16`](super::iq3_xxs_lanes::Lanes16), their
    /// dwords interleaved.
    // Index loops over the const `S`: they unroll, where iterators over `rows` (a slice of
    // runtime length) or a `flat_map` closure cost 5 % at 4–8 tokens and 35 % at 20.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    unsafe fn decode_rows(rows: &[&[BlockIQ3_XXS]], dst: *mut SideBlock<S>, stride: usize) {
        let mut q = [[0i32; 64]; S];
        for b in 0..rows[0].len() {
            let out = &mut *dst.add(b * stride);
            // The multipliers go out interleaved in whole registers, as the tiles load them
            // (a load spanning several small stores would wait for them to retire).
            let mut ls = [_mm512_setzero_si512(); S];
            for s in 0..S {
                let l;
                (l, out.d[s]) = D::decode(&rows[s][b], &mut q[s]);
                let l = _mm256_loadu_si256(l.as_ptr().cast());
                // `word_pair` of each.
                let l = _mm256_or_si256(l, _mm256_slli_epi32::<24>(l));
                ls[s] = _mm512_castsi256_si512(l);
            }
            let ls = interleave_rows::<S>(&ls);
            for r in 0..S / 2 {
                _mm512_storeu_si512(
                    out.ls.as_mut_ptr().cast::<__m512i>().add(r).cast(),
                    ls[0][r],
                );
            }
            // Dwords 16 h .. 16 h + 16 of the S rows, 16 / S a register.
            let dwords = out.q.as_mut_ptr().cast::<__m512i>();
            for h in 0..4 {
                let mut x = [_mm512_setzero_si512(); S];
                for (x, q) in x.iter_mut().zip(&q) {
                    *x = _mm512_loadu_si512(q.as_ptr().add(16 * h).cast());
                }
                let both = interleave_rows::<S>(&x);
                for i in 0..2 {
                    for r in 0..S / 2 {
                        let at = h * S + i * (S / 2) + r;
                        _mm512_storeu_si512(dwords.add(at).cast(), both[i][r]);
                    }
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const SideBlock<S>,
        acts: *const ActBlock<Zmm>,
        nb: usize,
    ) -> [__m512; R] {
        lanes_tile::<Zmm, SideBlock<S>, D, R, 8>(rows, acts, nb)
    }
}
