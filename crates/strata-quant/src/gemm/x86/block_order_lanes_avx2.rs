//! The tokens-in-lanes kernels of `block_order_avx2.rs` (Q4_0, Q5_0, Q8_0, IQ4_NL against
//! Q8_0 on AVX2 and AVX-VNNI), run by `token_lanes.rs`: `S` weight rows side by side (1: one
//! row, [`Lanes8`]; 2: a row pair, [`Pairs4`]) against `8 / S` tokens, lane `t · S + s` holding
//! row `s` against token `t`. The activations are repacked once per pass (an 8 × 8 transpose
//! of dwords, each token in `S` adjacent lanes); a group of rows is decoded once per pass to
//! dwords of 4 weight bytes, the `S` rows' dword `k` side by side, which one broadcast load
//! spreads over the lanes. Each lane holds the exact i32 sum of its (row, token) block and
//! does the reference's float operations in block order, so every entry equals `vec_dot` on
//! this path bit for bit (`tests/gemm.rs`). `block_order_avx2.rs` chooses the form.

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::block_order_avx2::biased_form;
use super::token_lanes::TokenLanes;
use crate::dot::x86::avx2::legacy::{block_d, Signed};
use crate::dot::x86::{block_ptr, IntDot};
use crate::legacy::BlockQ8_0;

/// Registers of `vpmaddubsw` pair sums of biased weights that plain AVX2 adds in 16 bits
/// before widening: `n · 2 · BIASED_MAX · 128 ≤ 32767`.
const fn i16_group(biased_max: u8) -> usize {
    if biased_max <= 15 {
        8
    } else {
        4
    }
}

/// One decoded weight block of `S` rows side by side (1: one row; 2: a pair): the
/// 8 dwords of 4 weight bytes each (in element order), biased (`x + OFFSET`) or, for the sign
/// form, `|x|` with `x` in `signs`; and `d_x`. Each field holds its value for the `S` rows
/// next to each other, so one broadcast load ([`spread`]) gives lanes `[row 0, …, row S-1,
/// row 0, …]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct SideBlock<const S: usize> {
    q: [[i32; S]; 8],
    signs: [[i32; S]; 8],
    d: [f32; S],
}

// Safety of the three: AVX2 is available (`S` is 1 or 2, as for [`spread`]).
impl<const S: usize> SideBlock<S> {
    /// Dword `k` of the `S` rows in every group of `S` lanes.
    #[inline(always)]
    unsafe fn q(&self, k: usize) -> __m256i {
        spread::<S>(self.q[k].as_ptr())
    }
    /// The sign form's `x` of dword `k`, as [`SideBlock::q`].
    #[inline(always)]
    unsafe fn signs(&self, k: usize) -> __m256i {
        spread::<S>(self.signs[k].as_ptr())
    }
    /// `d_x` of the `S` rows, as [`SideBlock::q`].
    #[inline(always)]
    unsafe fn d(&self) -> __m256 {
        _mm256_castsi256_ps(spread::<S>(self.d.as_ptr().cast()))
    }
}

/// The `S` dwords at `v` in every group of `S` lanes (lane `l` = `v[l mod S]`): one broadcast
/// load.
///
/// # Safety
/// AVX2 is available; `v` points at `S` readable dwords; `S` is 1 or 2.
#[inline(always)]
unsafe fn spread<const S: usize>(v: *const i32) -> __m256i {
    match S {
        1 => _mm256_set1_epi32(v.read()),
        2 => _mm256_set1_epi64x(v.cast::<i64>().read_unaligned()),
        _ => unreachable!("one row or a pair"),
    }
}

/// Stores the 8 dwords of each of `S` rows' registers (`x[s]`: row `s`) at `dst` with the `S`
/// rows' dword `k` side by side (`dst[k][s]`), as [`SideBlock`] holds them.
///
/// # Safety
/// AVX2 is available; `dst` has room for `8 · S` dwords; `S` is 1 or 2.
#[inline(always)]
unsafe fn store_sides<const S: usize>(x: &[__m256i; S], dst: *mut [i32; S]) {
    let out = dst.cast::<__m256i>();
    match S {
        1 => _mm256_storeu_si256(out, x[0]),
        2 => {
            // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | a6 b6 a7 b7].
            let lo = _mm256_unpacklo_epi32(x[0], x[1]);
            let hi = _mm256_unpackhi_epi32(x[0], x[1]);
            _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(lo, hi));
            _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(lo, hi));
        }
        _ => unreachable!("one row or a pair"),
    }
}

/// One activation block of 8 lanes: register `k` holds bytes `4k..4k + 4` of each token
/// (lane `t · S + s` = token `t` for [`Sides`] of `S` rows), `neg` holds `-OFFSET Σ y`
/// (the start that cancels the weights' bias) and `d` the tokens' `d_y`. Lanes past the last
/// token hold `y = 0`, `d_y = 0`.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct ActBlock {
    q: [__m256i; 8],
    neg: __m256i,
    d: __m256,
}

/// `[r0[k], .., r7[k]]` for each dword `k` of the 8 registers `r` (an 8 × 8 transpose).
#[inline(always)]
pub(super) unsafe fn transpose8(r: &[__m256i; 8]) -> [__m256i; 8] {
    let mut s = [_mm256_setzero_si256(); 8];
    for p in 0..4 {
        // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 a3 b3 | a6 b6 a7 b7] of rows a, b.
        s[2 * p] = _mm256_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
        s[2 * p + 1] = _mm256_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
    }
    let mut u = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        // Rows 4h..4h + 4: dwords (0 | 4), (1 | 5), (2 | 6), (3 | 7).
        let (s0, s1, s2, s3) = (s[4 * h], s[4 * h + 1], s[4 * h + 2], s[4 * h + 3]);
        u[4 * h] = _mm256_unpacklo_epi64(s0, s2);
        u[4 * h + 1] = _mm256_unpackhi_epi64(s0, s2);
        u[4 * h + 2] = _mm256_unpacklo_epi64(s1, s3);
        u[4 * h + 3] = _mm256_unpackhi_epi64(s1, s3);
    }
    let mut out = [_mm256_setzero_si256(); 8];
    for k in 0..4 {
        out[k] = _mm256_permute2x128_si256::<0x20>(u[k], u[4 + k]);
        out[k + 4] = _mm256_permute2x128_si256::<0x31>(u[k], u[4 + k]);
    }
    out
}

/// The symmetric formats with `S` rows side by side and `8 / S` tokens in the lanes (lane
/// `t · S + s`: row `s` against token `t`; run by `token_lanes.rs`).
pub(super) struct Sides<X, M, const S: usize>(PhantomData<(X, M)>);

/// 8 tokens in the lanes, one row a register: prefill.
pub(super) type Lanes8<X, M> = Sides<X, M, 1>;

/// A row pair and 4 tokens a register (`block_order_avx2.rs`, `pairs_win`: plain AVX2 only).
pub(super) type Pairs4<X, M> = Sides<X, M, 2>;

impl<X: Signed + crate::Block, M: IntDot, const S: usize> TokenLanes for Sides<X, M, S> {
    type W = X;
    type A = BlockQ8_0;
    type RowBlock = SideBlock<S>;
    type ActBlock = ActBlock;
    type Sums = __m256;
    const LANES: usize = 8 / S;
    const ROWS: usize = S;
    /// Within L2 (512 KiB on Zen 3, more on Intel client cores).
    const ACT_BYTES: usize = 256 << 10;

    /// Loads and transposes 8 / `S` tokens' blocks, each in `S` adjacent lanes (no gathers:
    /// they are slow on AVX2-only CPUs).
    #[inline(always)]
    unsafe fn repack(
        a: &[BlockQ8_0],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut ActBlock,
    ) {
        // OFFSET as a u8 (128 for -128).
        let offset = _mm256_set1_epi8(X::OFFSET);
        let zero = _mm256_setzero_si256();
        let lanes = Self::LANES;
        for g in g0..g1 {
            let live = (n_tok - g * lanes).min(lanes);
            for b in 0..nb {
                let mut rows = [zero; 8];
                let mut halves = [0u16; 8];
                for t in 0..live {
                    let block = &a[(g * lanes + t) * nb + b];
                    let q = _mm256_loadu_si256(block.qs.as_ptr().cast());
                    let half = block_ptr(block).cast::<u16>().read_unaligned();
                    for s in 0..S {
                        rows[t * S + s] = q;
                        halves[t * S + s] = half;
                    }
                }
                let q = transpose8(&rows);
                let mut sum = zero;
                for q in &q {
                    sum = M::dot_u8i8(sum, offset, *q);
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(halves.as_ptr().cast()));
                let neg = _mm256_sub_epi32(zero, sum);
                dst.add((g - g0) * nb + b).write(ActBlock { q, neg, d });
            }
        }
    }

    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // `b` indexes every row of the group
    unsafe fn decode_rows(rows: &[&[X]], dst: *mut SideBlock<S>, stride: usize) {
        let zero = _mm256_setzero_si256();
        for b in 0..rows[0].len() {
            let out = &mut *dst.add(b * stride);
            let mut q = [zero; S];
            let mut signs = [zero; S];
            for s in 0..S {
                let x = &rows[s][b];
                if biased_form::<X, M>() {
                    q[s] = x.biased();
                } else {
                    signs[s] = x.quants();
                    q[s] = _mm256_sign_epi8(signs[s], signs[s]);
                }
                out.d[s] = block_d(x);
            }
            store_sides::<S>(&q, out.q.as_mut_ptr());
            if !biased_form::<X, M>() {
                store_sides::<S>(&signs, out.signs.as_mut_ptr());
            }
        }
    }

    /// With VNNI [`vnni_tile`]; on plain AVX2 per (row block, block) [`block_sums`], then the
    /// block's term for the register's 8 (row, token) pairs.
    #[inline(always)]
    unsafe fn tile<const R: usize>(
        rows: *const SideBlock<S>,
        acts: *const ActBlock,
        nb: usize,
    ) -> [__m256; R] {
        if !M::SATURATES {
            return vnni_tile::<M, S, R>(rows, acts, nb);
        }
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..nb {
            let act = &*acts.add(b);
            for (i, acc) in acc.iter_mut().enumerate() {
                let row = &*rows.add(b * R + i);
                let sums = block_sums::<X, M, S>(row, act);
                let d = _mm256_mul_ps(row.d(), act.d);
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
            }
        }
        acc
    }
}

/// [`Lanes8`]'s tile with VNNI (always the biased form there): the rows' sums from `neg` as
/// [`block_sums`] makes them, but each activation register loaded once for the `R` rows and a
/// row's even and odd dwords in two chains (exact i32 sums, so the same in any order): with
/// `vpdpbusd`'s 5 cycles of latency (Intel, uops.info), `R` chains of eight would leave the
/// ports idle. Criterion on Intel Xeon family 6 model 207 (`expert/*/gemm/avxvnni`, 512 ×
/// 2048, one core, G products/s, two rounds), a
/// row's eight in one chain → this: IQ4_NL 6 tokens 71 → 77–78, 16 tokens 108 → 119–120, 64
/// tokens 124 → 139; Q5_0 16 tokens 101–103 → 113, 64 tokens 122 → 136–137.
///
/// # Safety
/// As for `block_order_avx2::gemm`; `rows` holds `R · nb` row blocks (block-major), `acts` `nb` blocks.
#[inline(always)]
unsafe fn vnni_tile<M: IntDot, const S: usize, const R: usize>(
    rows: *const SideBlock<S>,
    acts: *const ActBlock,
    nb: usize,
) -> [__m256; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let act = &*acts.add(b);
        let row = rows.add(b * R);
        let mut s = [act.neg; R];
        let mut odd = [_mm256_setzero_si256(); R];
        for k in (0..8).step_by(2) {
            let (y, y_odd) = (act.q[k], act.q[k + 1]);
            for (i, s) in s.iter_mut().enumerate() {
                *s = M::dot_u8i8(*s, (*row.add(i)).q(k), y);
            }
            for (i, odd) in odd.iter_mut().enumerate() {
                *odd = M::dot_u8i8(*odd, (*row.add(i)).q(k + 1), y_odd);
            }
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            let sums = _mm256_add_epi32(s[i], odd[i]);
            let d = _mm256_mul_ps((*row.add(i)).d(), act.d);
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d));
        }
    }
    acc
}

/// The exact `Σ x y` of one block of the `S` rows of `row` against the `8 / S` tokens of
/// `act` (lane `t · S + s`: row `s`, token `t`) on plain AVX2 (with VNNI [`vnni_tile`] makes
/// them).
#[inline(always)]
unsafe fn block_sums<X: Signed, M: IntDot, const S: usize>(
    row: &SideBlock<S>,
    act: &ActBlock,
) -> __m256i {
    if !biased_form::<X, M>() {
        // Sign trick: |x| · (y with x's sign); pair sums ≤ 2 · 128 · 127.
        let mut s = _mm256_setzero_si256();
        for k in 0..8 {
            let y = _mm256_sign_epi8(act.q[k], row.signs(k));
            s = M::dot_u8i8(s, row.q(k), y);
        }
        return s;
    }
    // Σ (x + OFFSET) y - OFFSET Σ y, in `vpmaddubsw` pair sums: plain AVX2 only (the biased
    // form with VNNI is `vnni_tile`'s).
    debug_assert!(M::SATURATES);
    let mut s = act.neg;
    let group = i16_group(X::BIASED_MAX);
    let mut k = 0;
    while k < 8 {
        let mut pairs = _mm256_maddubs_epi16(row.q(k), act.q[k]);
        for j in k + 1..k + group {
            let p = _mm256_maddubs_epi16(row.q(j), act.q[j]);
            pairs = _mm256_add_epi16(pairs, p);
        }
        s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        k += group;
    }
    s
}
