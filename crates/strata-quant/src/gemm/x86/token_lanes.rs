//! The pass structure shared by the tokens-in-lanes GEMM kernels (`block_order.rs` on AVX-512,
//! `block_order_avx2.rs` on AVX2): the activations are repacked once per pass so a register
//! holds [`TokenLanes::LANES`] tokens, and each group of `R` weight rows is decoded once per
//! pass and then meets every token group of the pass.

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::mem::size_of;
use std::ops::Range;

use super::super::tile::{scratch, Job, Line};
use crate::block::cast_blocks;
use crate::dot::x86::prefetch_l2;

/// One tokens-in-lanes kernel: its repacked activation block, decoded weight block and the
/// register tile that meets them.
pub(super) trait TokenLanes {
    /// Weight block.
    type W: crate::Block;
    /// Activation block (one token's).
    type A: crate::Block;
    /// One weight block of one row, decoded.
    type RowBlock: Copy;
    /// One activation block of [`TokenLanes::LANES`] tokens, repacked.
    type ActBlock: Copy;
    /// The f32 sums of [`TokenLanes::ROWS`] rows for the tokens of a group: a register of
    /// `LANES · ROWS` f32 lanes (lane `t · ROWS + s` = token `t`, row `s`).
    type Sums: Copy;
    /// Tokens per group.
    const LANES: usize;
    /// Weight rows side by side in one register's lanes (1: lane = token; 2: a row pair, so
    /// a group of half as many tokens fills the register; 4: a row quad, a quarter as many).
    const ROWS: usize = 1;
    /// Bytes of repacked activations one pass reads (per thread): each pass decodes the rows
    /// again, so the larger the pass the less decoding, while it stays in L2.
    const ACT_BYTES: usize;

    /// Repacks token groups `g0..g1` of `a` (`nb` blocks per token, `n_tok` tokens) into
    /// `dst`, group-major then block order; lanes past `n_tok` hold zeros.
    ///
    /// # Safety
    /// The kernel's CPU features are available; `dst` has room for `(g1 - g0) · nb` blocks.
    unsafe fn repack(
        a: &[Self::A],
        nb: usize,
        n_tok: usize,
        g0: usize,
        g1: usize,
        dst: *mut Self::ActBlock,
    );
    /// Decodes the [`TokenLanes::ROWS`] rows `rows` (each `nb` blocks) into `dst[b · stride]`
    /// for each block `b`.
    ///
    /// # Safety
    /// As for [`TokenLanes::repack`]; `dst` has room for `nb` blocks `stride` apart.
    unsafe fn decode_rows(rows: &[&[Self::W]], dst: *mut Self::RowBlock, stride: usize);
    /// `R` decoded row blocks (of `ROWS` rows each) × one token group over `nb` blocks:
    /// `rows[b · R + i]` is block `b` of the `i`-th.
    ///
    /// # Safety
    /// As for [`TokenLanes::repack`]; `rows` holds `R · nb` blocks, `acts` `nb`.
    unsafe fn tile<const R: usize>(
        rows: *const Self::RowBlock,
        acts: *const Self::ActBlock,
        nb: usize,
    ) -> [Self::Sums; R];
}

/// `job` cut after its last whole group of `lanes` tokens when the tokens after it are
/// `tails` in number (say 1 to 5): a group of mostly empty lanes costs more than those tokens
/// on the kernel's few-token path, which gives the same bits (both are `vec_dot` in the
/// format's block order). The tail is `None` when the job is kept whole.
pub(super) fn split_tail(
    job: Job<'_>,
    lanes: usize,
    tails: Range<usize>,
) -> (Job<'_>, Option<Job<'_>>) {
    let tail = job.n_tok % lanes;
    if job.n_tok > lanes && tail > 0 && tails.contains(&tail) {
        let at = job.n_tok - tail;
        let (lanes, tail) = job.split_tokens(at);
        (lanes, Some(tail))
    } else {
        (job, None)
    }
}

/// Dword `[v0, …, v(S-1)]` of `S` rows side by side (`S` = 2: a row pair, 4: a quad) in every
/// group of `S` lanes (lane `S t + s` = row `s`, the layout of [`TokenLanes::ROWS`] = `S` on
/// 512-bit registers): one broadcast load.
///
/// # Safety
/// AVX-512 F is available; `v` points at `S` readable dwords.
#[inline(always)]
pub(super) unsafe fn spread_rows<const S: usize>(v: *const u32) -> __m512i {
    match S {
        2 => _mm512_set1_epi64(v.cast::<i64>().read_unaligned()),
        4 => _mm512_broadcast_i32x4(_mm_loadu_si128(v.cast())),
        _ => unreachable!("a row pair or a quad"),
    }
}

/// `S` rows' registers of 16 dwords (`x[s]`: row `s`), each dword of the `S` rows side by side
/// as [`spread_rows`] reads them: `[dwords 0..8, dwords 8..16]`, each `S / 2` registers
/// (`[a0, b0, a1, b1, …]` for a pair; `[a0, b0, c0, d0, a1, …]` for a quad, the second
/// register from dword 4 and 12).
///
/// # Safety
/// AVX-512 F is available; `S` is 2 or 4.
#[inline(always)]
pub(super) unsafe fn interleave_rows<const S: usize>(x: &[__m512i; S]) -> [[__m512i; 2]; 2] {
    let (p01, p01_hi) = zip_dwords(x[0], x[1]);
    if S == 2 {
        return [[p01, p01], [p01_hi, p01_hi]];
    }
    let (p23, p23_hi) = zip_dwords(x[2], x[3]);
    let (lo, lo_4) = zip_qwords(p01, p23);
    let (hi, hi_4) = zip_qwords(p01_hi, p23_hi);
    [[lo, lo_4], [hi, hi_4]]
}

/// The dwords of two registers side by side: (`[a0, b0, a1, b1, …, a7, b7]`,
/// `[a8, b8, …, a15, b15]`).
#[inline(always)]
unsafe fn zip_dwords(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    (
        _mm512_permutex2var_epi32(a, lo, b),
        _mm512_permutex2var_epi32(a, hi, b),
    )
}

/// The qwords of two registers side by side: (`[a0, b0, a1, b1, a2, b2, a3, b3]`,
/// `[a4, b4, …, a7, b7]`).
#[inline(always)]
unsafe fn zip_qwords(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    let lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    let hi = _mm512_add_epi64(lo, _mm512_set1_epi64(4));
    (
        _mm512_permutex2var_epi64(a, lo, b),
        _mm512_permutex2var_epi64(a, hi, b),
    )
}

/// Whether a job of `n_tok` tokens (more than a row pair's 8) runs as row quads, 4 tokens a
/// register: to [`QUADS_MAX`] tokens, when they fill the registers better than 16 tokens in
/// the lanes (`⌈n/4⌉ / 4` `vpdpbusd`s per row and dword against `⌈n/16⌉`: the last group of
/// 16 would be at most three quarters full).
pub(super) fn quads_win(n_tok: usize) -> bool {
    n_tok <= QUADS_MAX && matches!(n_tok % 16, 1..=12)
}

/// Most tokens a job takes row quads for: past it the repeated activations cost more than
/// the emptier lanes (criterion `expert/…/gemm/avx512`, Intel Xeon, 512 × 2048, one core, G
/// products/s; 52 tokens: Q5_0 137 against 158 in the lanes, IQ4_NL 137 against 163; 40
/// tokens: Q5_0 146–151 against 140–146, IQ4_NL 151–154 against 142–144). Only the
/// block-order formats take quads: IQ3_XXS's lost to its 8-row lanes (`iq3_xxs_vbmi.rs`).
const QUADS_MAX: usize = 48;

/// Lane `l`'s token in a group whose tokens each take `side` adjacent lanes (1, 2 or 4).
///
/// # Safety
/// AVX-512 F is available.
#[inline(always)]
pub(super) unsafe fn lane_tokens(side: usize) -> __m512i {
    let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let shift = _mm_cvtsi32_si128(side.trailing_zeros() as i32);
    _mm512_srl_epi32(lane, shift)
}

thread_local! {
    /// Per-thread scratch for repacked activations.
    static ACTS: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
    /// Per-thread scratch for the decoded blocks of a group of rows.
    static ROWS: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// `job` with tokens in lanes: passes of at most [`TokenLanes::ACT_BYTES`] of repacked token
/// groups; in each pass, groups of `R · ROWS` rows (a row past the last repeats it) are
/// decoded once and meet every token group of the pass, the next group's weight bytes asked
/// into L2 meanwhile (a hint: on DRAM-resident IQ4_NL expert downs, 2048 rows × 512, at 8–16
/// tokens, 7–19 % less time on an Intel Xeon, BENCHMARKS.md, 39th session).
///
/// # Safety
/// `K`'s CPU features are available; `gemm` checked the lengths of `job`.
#[inline(always)]
pub(super) unsafe fn run<K: TokenLanes, const R: usize>(job: Job<'_>) {
    const CHECKED: &str = "gemm checked the lengths";
    let w: &[K::W] = cast_blocks(job.w).expect(CHECKED);
    let a: &[K::A] = cast_blocks(job.acts).expect(CHECKED);
    let (n_rows, n_tok, stride) = (job.n_rows, job.n_tok, job.out_stride);
    let nb = w.len() / n_rows;
    let n_side = K::ROWS;
    assert!(
        matches!(n_side, 1 | 2 | 4),
        "one row, a pair or a quad per register"
    );
    assert_eq!(
        size_of::<K::Sums>(),
        K::LANES * n_side * size_of::<f32>(),
        "Sums holds LANES · ROWS f32"
    );
    let row_bytes = nb * size_of::<K::W>();
    let groups = n_tok.div_ceil(K::LANES);
    let group_bytes = nb * size_of::<K::ActBlock>();
    let pass = (K::ACT_BYTES / group_bytes).clamp(1, groups);
    let line = size_of::<Line>();
    // SAFETY (of using the scratch past the borrow): per thread, touched only here, and this
    // neither recurses nor yields.
    let acts = scratch::<K::ActBlock>(&ACTS, (pass * group_bytes).div_ceil(line));
    let rows = scratch::<K::RowBlock>(&ROWS, (R * nb * size_of::<K::RowBlock>()).div_ceil(line));
    for g0 in (0..groups).step_by(pass) {
        let g1 = (g0 + pass).min(groups);
        K::repack(a, nb, n_tok, g0, g1, acts);
        for r0 in (0..n_rows).step_by(R * n_side) {
            for i in 0..R {
                let row = |s: usize| {
                    let r = (r0 + i * n_side + s).min(n_rows - 1);
                    &w[r * nb..(r + 1) * nb]
                };
                K::decode_rows(&[row(0), row(1), row(2), row(3)][..n_side], rows.add(i), R);
            }
            // The next group's weights come from DRAM (a routed expert's are read once per
            // chunk) into L2 while this group's tiles compute; L1 keeps the decoded rows and
            // the activations (8 IQ3_XXS rows of 2048 are 50 KB).
            let (next, group) = (r0 + R * n_side, R * n_side);
            prefetch_l2(
                job.w,
                next * row_bytes,
                (next + group).min(n_rows) * row_bytes,
            );
            for g in g0..g1 {
                let sums = K::tile::<R>(rows, acts.add((g - g0) * nb), nb);
                let live = (n_tok - g * K::LANES).min(K::LANES);
                for (i, sum) in sums.iter().enumerate() {
                    // The register's f32 lanes, in memory order.
                    let lanes = (sum as *const K::Sums).cast::<f32>();
                    for s in 0..n_side {
                        let r = r0 + i * n_side + s;
                        if r >= n_rows {
                            break;
                        }
                        for t in 0..live {
                            job.out[(g * K::LANES + t) * stride + r] = *lanes.add(t * n_side + s);
                        }
                    }
                }
            }
        }
    }
}
