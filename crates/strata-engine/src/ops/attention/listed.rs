//! Attention of each query over its own list of cached positions (QSA's kept tokens,
//! `ops/qsa.rs`), with the dense kernel's arithmetic on gathered tiles.
//!
//! A query's positions (ascending) are taken [`K_TILE`] at a time: their key rows copied next
//! to each other, converted and transposed, their value rows converted, and the tile scored
//! and folded as `kernel.rs` folds a tile of consecutive positions. Every [`SEGMENT`] listed
//! positions form a segment, computed as a task of its own, and the segments are merged in
//! order (`online.rs`), as a decode step of the dense kernel merges its key segments. So:
//!
//! - a query that lists every position `0..=p` gets the dense kernel's output bit for bit;
//! - a query's output depends only on its list and the cache, never on the other queries of
//!   the call, how many there are, or the worker count (batch invariance);
//! - a decode step (one query) still spreads over the pool: its segments and KV heads are
//!   separate tasks.

use super::kernel::Scratch;
use super::lanes::{self, Isa};
use super::{online, with_scratch, AttnShape, K_TILE, PARTIALS, Q_BLOCK, SEGMENT};
use crate::kv_cache::{KvRows, LayerKv};
use crate::pool::{Pool, Tiles};

/// Attention of the `T = lists.len()` queries `q` (`[T][n_head·head_dim]`) over the cached
/// positions each lists: query `t` attends to exactly the keys and values at `lists[t]`
/// (ascending, each below the cache's length, at least one), with the softmax of
/// [`super::attention`] (scores times `s.scale`; with an f16 cache the query rounded to f16
/// first). `s.window` is not applied: the list is the mask. `out`: as `q`.
///
/// # Panics
/// If the lengths disagree, or a list is empty or not ascending.
pub fn attention_listed(
    pool: &Pool,
    q: &[f32],
    kv: &LayerKv,
    lists: &[Vec<usize>],
    s: &AttnShape,
    out: &mut [f32],
) {
    attention_listed_on(pool, Isa::detect(), q, kv, lists, s, out)
}

/// [`attention_listed`] on the kernels of `isa`, which this CPU must have.
pub(super) fn attention_listed_on(
    pool: &Pool,
    isa: Isa,
    q: &[f32],
    kv: &LayerKv,
    lists: &[Vec<usize>],
    s: &AttnShape,
    out: &mut [f32],
) {
    let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
    let width = s.n_head * hd;
    assert_eq!(q.len(), lists.len() * width, "one query row a list");
    assert_eq!(out.len(), q.len(), "one output row a query");
    for list in lists {
        assert!(!list.is_empty(), "a query attends to at least one key");
        assert!(list.is_sorted(), "listed positions ascend");
    }
    let cell_w = hd + 2;
    // At most `Q_BLOCK` queries at a time, so their segments' partial results stay small.
    let chunks = lists
        .chunks(Q_BLOCK)
        .zip(q.chunks(Q_BLOCK * width))
        .zip(out.chunks_mut(Q_BLOCK * width));
    for ((lists, q), out) in chunks {
        let t_n = lists.len();
        let n_splits = lists.iter().map(|l| l.len().div_ceil(SEGMENT)).max();
        let n_splits = n_splits.expect("a chunk holds queries");
        PARTIALS.with(|cell| {
            let (part, acc) = &mut *cell.borrow_mut();
            part.resize(t_n * n_splits * s.n_head * cell_w, 0.0);
            let tiles = Tiles::new(part, n_splits * s.n_head * cell_w, group * cell_w, t_n);
            let r = pool.for_each_tile(tiles, |tile| {
                let c = tile.cols.start / (group * cell_w);
                let (sp, g) = (c / s.n_kv_head, c % s.n_kv_head);
                with_scratch(|sc| {
                    for k in 0..tile.rows.len() {
                        let t = tile.rows.start + k;
                        let list = &lists[t];
                        let seg = list.len().min(sp * SEGMENT)..list.len().min((sp + 1) * SEGMENT);
                        sc.attend_listed(&ListedJob {
                            q: &q[t * width..(t + 1) * width],
                            k: kv.k_rows(),
                            v: kv.v_rows(),
                            s,
                            g,
                            positions: &list[seg],
                            isa,
                        });
                        sc.st.write_partial_row(0, tile.row_mut(k), group, hd);
                    }
                });
                Ok::<(), ()>(())
            });
            r.expect("attention tasks do not fail");
            online::merge_splits(part, n_splits, s, acc, out);
        });
    }
}

/// The inputs of one (query, KV head, segment) task.
pub(super) struct ListedJob<'a> {
    /// The query's row `[n_head·hd]`.
    pub q: &'a [f32],
    pub k: KvRows<'a>,
    pub v: KvRows<'a>,
    pub s: &'a AttnShape,
    /// KV head.
    pub g: usize,
    /// The segment's positions, ascending (at most [`SEGMENT`]; none leaves an empty state).
    pub positions: &'a [usize],
    pub isa: Isa,
}

impl Scratch {
    /// Online softmax of the query heads of KV head `job.g` over `job.positions`, one
    /// segment: leaves `st` for the `group` heads (index = head in the group).
    pub(super) fn attend_listed(&mut self, job: &ListedJob<'_>) {
        match job.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` found AVX-512F and FMA on this CPU.
            Isa::Avx512 => unsafe { self.attend_listed_avx512(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` found AVX2, F16C and FMA on this CPU.
            Isa::Avx2 => unsafe { self.attend_listed_avx2(job) },
            Isa::Scalar => self.attend_listed_any(job),
        }
    }

    /// [`Scratch::attend_listed_any`] compiled for AVX-512F and FMA (the same operations, so
    /// the same bits: see `attend_avx512`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn attend_listed_avx512(&mut self, job: &ListedJob<'_>) {
        self.attend_listed_any(job)
    }

    /// [`Scratch::attend_listed_any`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c,fma")]
    unsafe fn attend_listed_avx2(&mut self, job: &ListedJob<'_>) {
        self.attend_listed_any(job)
    }

    #[inline(always)]
    fn attend_listed_any(&mut self, job: &ListedJob<'_>) {
        let s = job.s;
        let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
        let qg = &job.q[job.g * group * hd..(job.g + 1) * group * hd];
        self.q.clear();
        self.push_queries(job.isa, matches!(job.k, KvRows::F16(_)), qg);
        self.st.reset(group, hd);
        self.size_tiles(hd);
        let head = job.g * hd..(job.g + 1) * hd;
        for tile in job.positions.chunks(K_TILE) {
            let n = tile.len();
            // Keys: the rows side by side as cached, then converted and transposed.
            match job.k {
                KvRows::F16(k) => {
                    gather(&mut self.gathered_f16, tile, hd, |p| {
                        &k.row(p)[head.clone()]
                    });
                    let src = &self.gathered_f16;
                    lanes::transpose(job.isa, src, hd, &mut self.kt, K_TILE, n, hd);
                }
                KvRows::F32(k) => {
                    gather(&mut self.gathered_f32, tile, hd, |p| {
                        &k.row(p)[head.clone()]
                    });
                    let src = &self.gathered_f32;
                    lanes::transpose(job.isa, src, hd, &mut self.kt, K_TILE, n, hd);
                }
            }
            for (j, &p) in tile.iter().enumerate() {
                let dst = &mut self.v[j * hd..(j + 1) * hd];
                match job.v {
                    KvRows::F16(v) => lanes::convert_f16(job.isa, &v.row(p)[head.clone()], dst),
                    KvRows::F32(v) => dst.copy_from_slice(&v.row(p)[head.clone()]),
                }
            }
            // Out of `self` while the fold borrows it (no copy, no allocation).
            let values = std::mem::take(&mut self.v);
            self.fold_tile(job.isa, 0..group, hd, s.scale, 0..n, &values, hd);
            self.v = values;
        }
    }
}

/// `dst` = the rows `row(p)` (`hd` elements each) of `positions`, one after another.
#[inline(always)]
fn gather<'r, T: Copy + 'r>(
    dst: &mut Vec<T>,
    positions: &[usize],
    hd: usize,
    row: impl Fn(usize) -> &'r [T],
) {
    dst.clear();
    for &p in positions {
        dst.extend_from_slice(&row(p)[..hd]);
    }
}
