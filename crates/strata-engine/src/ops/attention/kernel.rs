//! One attention task: the queries of one KV head at a block of tokens against a range of
//! keys, visited in tiles of [`K_TILE`] positions with an online softmax.
//!
//! Every task scores a tile the same way, whatever its number of queries: the key tile is
//! converted to f32 once, transposed, and scored column-wise. One way for decode and prefill
//! alike is what keeps a query's scores, and so its output, independent of how many queries
//! share its call (batch invariance). Values are converted to f32 once per tile (f16) or read
//! in place (f32).

use std::ops::Range;

use super::lanes::{self, Isa};
use super::online::Online;
use super::{AttnShape, K_TILE, SEGMENT};
use crate::kv_cache::KvRows;

/// Query heads of one token scored and folded together over a transposed key tile (AVX-512).
const HEAD_BLOCK: usize = 4;
/// The same on AVX2, whose 16 registers hold the accumulators of two heads.
const HEAD_BLOCK_AVX2: usize = 2;

/// The inputs of one (KV head, query block, key range) task.
pub(super) struct Job<'a> {
    pub q: &'a [f32],
    pub k: KvRows<'a>,
    pub v: KvRows<'a>,
    /// Cache elements per position.
    pub row: usize,
    pub pos0: usize,
    pub s: &'a AttnShape,
    /// KV head.
    pub g: usize,
    pub toks: Range<usize>,
    pub keys: Range<usize>,
    pub isa: Isa,
}

/// Per-thread buffers of one task.
#[derive(Default)]
pub(super) struct Scratch {
    /// Queries `[n_q][hd]` (rounded to f16 with an f16 cache).
    pub(super) q: Vec<f32>,
    /// Softmax state of the queries.
    pub st: Online,
    /// Key tile transposed `[hd][K_TILE]`, value tile `[K_TILE][hd]` (f32 of an f16 cache).
    pub(super) kt: Vec<f32>,
    pub(super) v: Vec<f32>,
    /// Scores `[n_q][K_TILE]` of the current tile.
    pub(super) sc: Vec<f32>,
    /// Gathered key rows `[K_TILE][hd]` before their transposition (`listed.rs`), as cached.
    pub(super) gathered_f16: Vec<half::f16>,
    pub(super) gathered_f32: Vec<f32>,
}

impl Scratch {
    /// Online softmax of the queries of KV head `job.g` (its `group` query heads) at tokens
    /// `job.toks` over the visible keys within `job.keys`; leaves `st` per query (index
    /// `(t − toks.start)·group + head in group`).
    pub fn attend(&mut self, job: &Job<'_>) {
        match job.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` found AVX-512F and FMA on this CPU.
            Isa::Avx512 => unsafe { self.attend_avx512(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` found AVX2, F16C and FMA on this CPU.
            Isa::Avx2 => unsafe { self.attend_avx2(job) },
            Isa::Scalar => self.attend_any(job),
        }
    }

    /// [`Scratch::attend_any`] compiled for AVX-512F and FMA: same operations in the same
    /// order (no FMA contraction, no reassociation; the only fused multiply-adds are
    /// `ops::exp`'s explicit `mul_add`s, correctly rounded on every path), so the same bits as
    /// the other paths.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn attend_avx512(&mut self, job: &Job<'_>) {
        self.attend_any(job)
    }

    /// [`Scratch::attend_any`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c,fma")]
    unsafe fn attend_avx2(&mut self, job: &Job<'_>) {
        self.attend_any(job)
    }

    #[inline(always)]
    fn attend_any(&mut self, job: &Job<'_>) {
        let s = job.s;
        let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
        let (toks, pos0) = (job.toks.clone(), job.pos0);
        let n_q = toks.len() * group;
        let f16 = matches!(job.k, KvRows::F16(_));
        self.q.clear();
        for t in toks.clone() {
            let qt = &job.q[(t * s.n_head + job.g * group) * hd..][..group * hd];
            self.push_queries(job.isa, f16, qt);
        }
        self.st.reset(n_q, hd);
        self.size_tiles(hd);
        // Keys visible to token t: first(t) .. pos0 + t + 1; both ends grow with t.
        let first = |t: usize| match s.window {
            Some(w) => (pos0 + t + 1).saturating_sub(w),
            None => 0,
        };
        let lo = job.keys.start.max(first(toks.start));
        let hi = job.keys.end.min(pos0 + toks.end);
        let mut tile0 = lo / K_TILE * K_TILE;
        while tile0 < hi {
            if tile0.is_multiple_of(SEGMENT) && tile0 > lo {
                self.st.seal(hd);
            }
            let (a, b) = (lo.max(tile0), hi.min(tile0 + K_TILE));
            self.load_keys(job, tile0, a..b);
            // Values of the tile: `(slice, stride)` with row 0 at position `tile0`.
            let (vals, v_stride) = self.values(job, tile0, a..b);
            // Out of `self` while the folds borrow it (no copy, no allocation).
            let converted = std::mem::take(&mut self.v);
            for t in toks.clone() {
                let (ja, jb) = (a.max(first(t)), b.min(pos0 + t + 1));
                if ja >= jb {
                    continue;
                }
                let js = ja - tile0..jb - tile0;
                let v = vals.unwrap_or(&converted);
                let v = &v[js.start * v_stride..];
                let qi0 = (t - toks.start) * group;
                self.fold_tile(job.isa, qi0..qi0 + group, hd, s.scale, js, v, v_stride);
            }
            self.v = converted;
            tile0 += K_TILE;
        }
    }

    /// Appends query rows `qt` to `self.q`, rounded to f16 first over an f16 cache (`f16`), as
    /// ggml's `mul_mat` rounds its f32 operand against f16 weights.
    #[inline(always)]
    pub(super) fn push_queries(&mut self, isa: Isa, f16: bool, qt: &[f32]) {
        if f16 {
            lanes::extend_rounded_f16(isa, qt, &mut self.q);
        } else {
            self.q.extend_from_slice(qt);
        }
    }

    /// Sizes the tile buffers (`v`, `kt`, `sc`) for heads of `hd`.
    #[inline(always)]
    pub(super) fn size_tiles(&mut self, hd: usize) {
        self.v.resize(K_TILE * hd, 0.0);
        self.kt.resize(hd * K_TILE, 0.0);
        self.sc.resize(HEAD_BLOCK * K_TILE, 0.0);
    }

    /// Scores the queries `heads` (rows of `self.q`, one token's) against columns `js` of the
    /// transposed key tile `kt` and folds them into their softmax state; the value of column
    /// `j` is `v[(j − js.start)·v_stride ..][..hd]`. The same operations for every task, every
    /// ISA (`fold_heads` on x86-64, `score_columns` + [`Online::fold`] otherwise).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn fold_tile(
        &mut self,
        isa: Isa,
        heads: Range<usize>,
        hd: usize,
        scale: f32,
        js: Range<usize>,
        v: &[f32],
        v_stride: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        if isa != Isa::Scalar {
            let (q, kt) = (&self.q, &self.kt);
            fold_heads(
                isa,
                q,
                kt,
                &mut self.sc,
                &mut self.st,
                heads,
                hd,
                scale,
                js,
                v,
                v_stride,
            );
            return;
        }
        let _ = isa;
        for qi in heads {
            let q = &self.q[qi * hd..(qi + 1) * hd];
            let sc = score_columns(q, &self.kt, js.clone(), &mut self.sc);
            self.st.fold(qi, hd, scale, sc, v, v_stride);
        }
    }

    /// Converts keys of positions `range` (inside the tile at `tile0`) to f32 and transposes
    /// them into `kt` `[hd][K_TILE]`, in one pass from the cache page.
    #[inline(always)]
    fn load_keys(&mut self, job: &Job<'_>, tile0: usize, range: Range<usize>) {
        let hd = job.s.head_dim;
        let (j0, n) = (range.start - tile0, range.len());
        let kt = &mut self.kt[j0..];
        // A tile lies inside one page (`KV_PAGE` is a multiple of `K_TILE`).
        match job.k {
            KvRows::F16(k) => {
                let src = &k.from(range.start)[job.g * hd..];
                lanes::transpose(job.isa, src, job.row, kt, K_TILE, n, hd);
            }
            KvRows::F32(k) => {
                let src = &k.from(range.start)[job.g * hd..];
                lanes::transpose(job.isa, src, job.row, kt, K_TILE, n, hd);
            }
        }
    }

    /// The values of positions `range` (inside the tile at `tile0`): an f16 cache is converted
    /// into `self.v` (returns `None`, stride `hd`); an f32 cache is read in place (returns the
    /// cache's page from position `tile0` on, stride `row`).
    #[inline(always)]
    fn values<'v>(
        &mut self,
        job: &Job<'v>,
        tile0: usize,
        range: Range<usize>,
    ) -> (Option<&'v [f32]>, usize) {
        let hd = job.s.head_dim;
        match job.v {
            KvRows::F16(v) => {
                let head = job.g * hd..(job.g + 1) * hd;
                for p in range {
                    let dst = &mut self.v[(p - tile0) * hd..(p - tile0 + 1) * hd];
                    lanes::convert_f16(job.isa, &v.row(p)[head.clone()], dst);
                }
                (None, hd)
            }
            // A tile lies inside one page (`KV_PAGE` is a multiple of `K_TILE`).
            KvRows::F32(v) => (Some(&v.from(tile0)[job.g * hd..]), job.row),
        }
    }
}

/// Scores and folds the heads of one token (queries `heads`, visible tile
/// columns `js`) in blocks of [`HEAD_BLOCK`] (AVX-512) or [`HEAD_BLOCK_AVX2`]: each key and
/// value row is loaded once per block. Same operations per query as `score_columns` +
/// [`Online::fold`], so same bits.
/// `isa`: AVX-512F or AVX2, present on this CPU.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fold_heads(
    isa: Isa,
    q_all: &[f32],
    kt: &[f32],
    sc: &mut [f32],
    st: &mut Online,
    heads: Range<usize>,
    hd: usize,
    scale: f32,
    js: Range<usize>,
    v: &[f32],
    v_stride: usize,
) {
    use super::x86::{avx2, avx512};
    let block = if isa == Isa::Avx512 {
        HEAD_BLOCK
    } else {
        HEAD_BLOCK_AVX2
    };
    let mut qi = heads.start;
    while qi < heads.end {
        let n = (heads.end - qi).min(block);
        let q = &q_all[qi * hd..];
        let js = js.clone();
        macro_rules! fold {
            ($n:literal, $tile:path) => {{
                $tile(q, hd, kt, sc);
                st.fold_block::<$n>(isa, qi, hd, scale, sc, K_TILE, js, v, v_stride);
            }};
        }
        // SAFETY: the caller passes an `isa` this CPU has; `score_tile` asserts its bounds.
        unsafe {
            match (isa, n) {
                (Isa::Avx512, 4) => fold!(4, avx512::score_tile::<4>),
                (Isa::Avx512, 3) => fold!(3, avx512::score_tile::<3>),
                (Isa::Avx512, 2) => fold!(2, avx512::score_tile::<2>),
                (Isa::Avx512, _) => fold!(1, avx512::score_tile::<1>),
                (_, 2) => fold!(2, avx2::score_tile::<2>),
                _ => fold!(1, avx2::score_tile::<1>),
            }
        }
        qi += n;
    }
}

/// Scores of one query against tile columns `js` of the transposed keys `kt`, into `sc[js]`.
#[inline(always)]
fn score_columns<'s>(q: &[f32], kt: &[f32], js: Range<usize>, sc: &'s mut [f32]) -> &'s mut [f32] {
    let sc = &mut sc[js.clone()];
    sc.fill(0.0);
    for (d, qd) in q.iter().enumerate() {
        let krow = &kt[d * K_TILE + js.start..d * K_TILE + js.end];
        for (s, k) in sc.iter_mut().zip(krow) {
            *s += qd * k;
        }
    }
    sc
}
