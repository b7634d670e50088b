//! QSA sparse attention (`qwen4exp`): a lightning indexer scores blocks of `r` cached tokens
//! and each query attends only to its best `budget / r` whole blocks plus its incomplete last
//! block (the tail, always kept).
//!
//! ```text
//! kb    = rope( rms_norm(mean_{t in b} kr_t) · k_norm, pos = b·r )    block b = tokens b·r .. b·r+r−1
//! s_b   = Σ_h relu(qi_h · kb) / √di                                    qi normed and rotated at p
//! keep  = the min(budget/r, nb) best blocks (nb = (p+1) / r complete blocks) + tokens nb·r ..= p
//! o     = softmax(q·Kᵀ·scale over the kept tokens) · V
//! ```
//!
//! While every complete block fits the budget (`p ≤ budget + r − 2`) a query keeps all its
//! tokens: it runs the dense kernel ([`super::attention::attention`]), whose results it then
//! equals bit for bit. Later queries attend over their kept tokens with the same arithmetic on
//! gathered tiles ([`super::attention::attention_listed`]). Both choices depend
//! only on the query's position and the cache, so a position's output does not depend on how
//! many tokens share its call (batch invariance). Block keys are pooled from the raw cached
//! keys (`kr`, before norm and RoPE, [`crate::kv_cache::LayerKv::index_keys`]) once per
//! complete block and cached beside them; a rewritten position (a rollback) has its block and
//! the later ones pooled again, always the same way.
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextQSAIndexer.forward` and
//! `Qwen4ExpTextAttention.forward` (llama.cpp `src/models/qwen4exp.cpp`, `build_qsa_top_k`,
//! which keeps a few tokens too many: docs/qwen4exp.md, disagreement 1).

use std::cell::RefCell;
use std::ops::Range;

use super::attention::{attention, attention_listed, AttnShape};
use super::dot;
use super::exp::vectorized;
use super::norm::rms_norm;
use super::rope::Rope;
use crate::kv_cache::LayerKv;
use crate::pool::{Pool, Tiles};

/// The indexer's shape and the budget of one QSA layer.
#[derive(Clone, Copy, Debug)]
pub struct QsaShape {
    /// Tokens per block `r` (> 0).
    pub ratio: usize,
    /// Tokens a query reads from whole blocks (a multiple of `ratio`).
    pub budget: usize,
    /// Indexer query heads `ni` (one key head).
    pub n_head: usize,
    /// Indexer head width `di`.
    pub head_dim: usize,
    /// RMS norm epsilon of the pooled block keys.
    pub eps: f32,
}

impl QsaShape {
    /// Blocks a query keeps at most.
    fn max_blocks(&self) -> usize {
        self.budget / self.ratio
    }

    /// Whether the query at `pos` keeps every token before it.
    pub fn is_dense_at(&self, pos: usize) -> bool {
        (pos + 1) / self.ratio <= self.max_blocks()
    }

    /// How many of the `t_n` queries at `pos0 ..` keep every token: they come first, since
    /// a query keeps everything up to a position.
    fn n_dense(&self, pos0: usize, t_n: usize) -> usize {
        (0..t_n).take_while(|t| self.is_dense_at(pos0 + t)).count()
    }
}

/// The block keys' weights: the RMS norm gamma (`indexer.k_norm`, `[di]`) and the rotation.
#[derive(Clone, Copy)]
pub struct BlockKeyWeights<'a> {
    pub k_norm: &'a [f32],
    pub rope: &'a Rope,
}

/// Block keys `[n_blocks][di]` and the buffers that make them.
#[derive(Default)]
pub struct BlockKeys {
    pub keys: Vec<f32>,
    /// RoPE angles `[n_rot]` and one pooled key `[di]`.
    cs: Vec<f32>,
    mean: Vec<f32>,
}

/// Per-thread buffers of the sparse queries' selection.
#[derive(Default)]
struct Scratch {
    /// One query's block scores.
    scores: Vec<f32>,
    /// (score, block) pairs being ranked.
    ranked: Vec<(f32, usize)>,
}

/// Sparse queries whose kept positions are listed at once (bounds the lists' memory: about
/// 16 KiB a query at the real model's budget).
const LIST_CHUNK: usize = 128;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// The pooling buffers of [`block_keys`] (calling thread).
    static POOLING: RefCell<BlockKeys> = RefCell::new(BlockKeys::default());
    /// The kept positions of [`LIST_CHUNK`] queries (calling thread).
    static LISTS: RefCell<Vec<Vec<usize>>> = const { RefCell::new(Vec::new()) };
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, restricted to each query's kept tokens. The cache already holds the
/// keys, values and raw indexer keys of those positions.
///
/// A query past the budget attends over its kept positions with the dense kernel's arithmetic
/// on gathered tiles ([`attention_listed`]): the same operations in the same order as for a
/// tile of consecutive positions, so a list of every position would give the dense kernel's
/// bits.
///
/// `q`: `[T][n_head·head_dim]` (normed and rotated); `iq`: `[T][ni·di]` indexer queries
/// (normed and rotated); `out`: as `q`.
#[allow(clippy::too_many_arguments)]
pub fn qsa_attention(
    pool: &Pool,
    q: &[f32],
    iq: &[f32],
    kv: &mut LayerKv,
    pos0: usize,
    s: &AttnShape,
    qsa: &QsaShape,
    bk: BlockKeyWeights<'_>,
    out: &mut [f32],
) {
    let width = s.n_head * s.head_dim;
    let t_n = q.len() / width;
    let n_dense = qsa.n_dense(pos0, t_n);
    if n_dense > 0 {
        let rows = 0..n_dense * width;
        attention(pool, &q[rows.clone()], kv, pos0, s, &mut out[rows]);
    }
    if n_dense == t_n {
        return;
    }
    let n_blocks = (pos0 + t_n) / qsa.ratio;
    update_block_keys(kv, n_blocks, qsa, bk);
    let kv = &*kv;
    let cache = kv
        .block_key_cache()
        .expect("a QSA layer caches indexer keys");
    let keys = &cache.keys[..n_blocks * qsa.head_dim];
    LISTS.with(|cell| {
        let lists = &mut *cell.borrow_mut();
        for t0 in (n_dense..t_n).step_by(LIST_CHUNK) {
            let t1 = (t0 + LIST_CHUNK).min(t_n);
            lists.resize(t1 - t0, Vec::new());
            select_kept(pool, iq, keys, pos0, t0, qsa, lists);
            let rows = t0 * width..t1 * width;
            attention_listed(pool, &q[rows.clone()], kv, lists, s, &mut out[rows]);
        }
    });
}

/// The kept positions ([`kept_positions`]) of the queries `t0 .. t0 + lists.len()` of a call
/// starting at `pos0`, all past the budget, into `lists`. Many queries (prefill) go in parallel,
/// one task's after another; fewer than the workers (decode) one at a time, each query's
/// block scores split over the pool. Either way each list is the same.
///
/// `iq`: the call's indexer queries `[T][ni·di]`; `keys`: block keys `[≥ blocks][di]`.
fn select_kept(
    pool: &Pool,
    iq: &[f32],
    keys: &[f32],
    pos0: usize,
    t0: usize,
    qsa: &QsaShape,
    lists: &mut [Vec<usize>],
) {
    let iw = qsa.n_head * qsa.head_dim;
    let iq_t = |t: usize| &iq[t * iw..(t + 1) * iw];
    let n = lists.len();
    if n >= pool.workers() {
        let chunk = n.div_ceil(pool.workers());
        let tiles = Tiles::new(lists, n, chunk, 1);
        let r = pool.for_each_tile(tiles, |tile| {
            let first = t0 + tile.cols.start;
            SCRATCH.with(|sc| {
                let sc = &mut *sc.borrow_mut();
                for (i, list) in tile.row_mut(0).iter_mut().enumerate() {
                    let t = first + i;
                    kept_positions(iq_t(t), keys, pos0 + t, qsa, sc, list, None);
                }
            });
            Ok::<(), ()>(())
        });
        r.expect("selection tasks do not fail");
    } else {
        SCRATCH.with(|sc| {
            let sc = &mut *sc.borrow_mut();
            for (i, list) in lists.iter_mut().enumerate() {
                let t = t0 + i;
                kept_positions(iq_t(t), keys, pos0 + t, qsa, sc, list, Some(pool));
            }
        });
    }
}

/// Brings the layer's block-key cache up to its first `n_blocks` complete blocks: pools only
/// the blocks completed (or rewritten) since the last call.
fn update_block_keys(kv: &mut LayerKv, n_blocks: usize, qsa: &QsaShape, bk: BlockKeyWeights<'_>) {
    let (raw, cache) = kv
        .index_keys_and_blocks()
        .expect("a QSA layer caches indexer keys");
    let valid = cache.valid(qsa.ratio, qsa.head_dim).min(n_blocks);
    cache.keys.truncate(valid * qsa.head_dim);
    POOLING.with(|cell| {
        let bks = &mut *cell.borrow_mut();
        pool_blocks(
            |p| raw.row(p),
            valid..n_blocks,
            qsa,
            bk,
            bks,
            &mut cache.keys,
        );
    });
    cache.clean = usize::MAX;
}

/// Fills `out.keys` with the keys `[n_blocks][di]` of the first `n_blocks` complete blocks:
/// the mean of the block's raw keys (added in order, then scaled), RMS-normed times
/// `k_norm`, rotated at the block's first position.
pub fn block_keys<'a>(
    raw: impl Fn(usize) -> &'a [f32],
    n_blocks: usize,
    qsa: &QsaShape,
    bk: BlockKeyWeights<'_>,
    out: &mut BlockKeys,
) {
    let mut keys = std::mem::take(&mut out.keys);
    keys.clear();
    pool_blocks(raw, 0..n_blocks, qsa, bk, out, &mut keys);
    out.keys = keys;
}

/// Appends to `keys` the keys `[di]` of `blocks` (see [`block_keys`]), pooling in `bufs`.
fn pool_blocks<'a>(
    raw: impl Fn(usize) -> &'a [f32],
    blocks: Range<usize>,
    qsa: &QsaShape,
    bk: BlockKeyWeights<'_>,
    bufs: &mut BlockKeys,
    keys: &mut Vec<f32>,
) {
    let (r, di) = (qsa.ratio, qsa.head_dim);
    let BlockKeys { cs, mean, .. } = bufs;
    cs.resize(bk.rope.n_rot, 0.0);
    mean.resize(di, 0.0);
    let inv = 1.0 / r as f32;
    let start = keys.len();
    keys.resize(start + blocks.len() * di, 0.0);
    for (b, key) in blocks.zip(keys[start..].chunks_exact_mut(di)) {
        mean.fill(0.0);
        for t in b * r..(b + 1) * r {
            mean.iter_mut().zip(raw(t)).for_each(|(m, k)| *m += k);
        }
        mean.iter_mut().for_each(|m| *m *= inv);
        rms_norm(mean, bk.k_norm, qsa.eps, key);
        bk.rope.angles(b * r, cs);
        bk.rope.apply(key, di, cs);
    }
}

/// The positions the query at `p` keeps, ascending, into `out` (replacing its contents): the
/// best `budget / r` complete blocks by indexer score ([`block_scores`]; ties broken as
/// `torch.topk` breaks them, [`topk`]), then the tail. With a `pool`, many blocks (a decode
/// step deep in the context) are scored in parallel parts, each score computed as alone.
fn kept_positions(
    iq: &[f32],
    keys: &[f32],
    p: usize,
    qsa: &QsaShape,
    sc: &mut Scratch,
    out: &mut Vec<usize>,
    pool: Option<&Pool>,
) {
    let (r, di) = (qsa.ratio, qsa.head_dim);
    let nb = (p + 1) / r;
    let Scratch { ranked, scores } = sc;
    scores.resize(nb, 0.0);
    match pool {
        Some(pool) if nb >= PAR_SCORE_BLOCKS && pool.workers() > 1 => {
            let part = nb.div_ceil(pool.workers());
            let tiles = Tiles::new(&mut scores[..], nb, part, 1);
            let r = pool.for_each_tile(tiles, |tile| {
                block_scores(iq, keys, tile.cols.start, di, tile.row_mut(0));
                Ok::<(), ()>(())
            });
            r.expect("scoring tasks do not fail");
        }
        _ => block_scores(iq, keys, 0, di, scores),
    }
    ranked.clear();
    ranked.extend(scores.iter().copied().zip(0..));
    let keep = qsa.max_blocks().min(nb);
    torch_topk(ranked, keep);
    ranked.truncate(keep);
    ranked.sort_unstable_by_key(|(_, b)| *b);
    out.clear();
    for &(_, b) in ranked.iter() {
        out.extend(b * r..(b + 1) * r);
    }
    out.extend(nb * r..=p);
}

/// Blocks from which a lone query's scores are split over the pool (16K tokens at `r` = 4).
const PAR_SCORE_BLOCKS: usize = 4096;

/// The indexer scores of blocks `b0 .. b0 + out.len()` for one query into `out`:
/// `s_b = Σ_h relu(qi_h · kb) / √di`, each dot in [`dot`]'s order, heads added in order.
/// Compiled for the widest vector unit ([`vectorized`]): the same operations in the same
/// order on every path, so the same bits.
///
/// `iq`: `[ni][di]`; `keys`: block keys `[n_blocks][di]`.
fn block_scores(iq: &[f32], keys: &[f32], b0: usize, di: usize, out: &mut [f32]) {
    let inv_sqrt = 1.0 / (di as f32).sqrt();
    let keys = &keys[b0 * di..(b0 + out.len()) * di];
    vectorized(|| {
        for (s, kb) in out.iter_mut().zip(keys.chunks_exact(di)) {
            *s = iq
                .chunks_exact(di)
                .map(|qh| dot(qh, kb).max(0.0))
                .sum::<f32>()
                * inv_sqrt;
        }
    });
}

mod select;
#[cfg(test)]
mod tests;
mod topk;

pub use select::sparse_positions;
use topk::torch_topk;
