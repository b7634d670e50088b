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
//! equals bit for bit. Later queries attend over their kept tokens here. Both choices depend
//! only on the query's position and the cache, so a position's output does not depend on how
//! many tokens share its call (batch invariance). Block keys are recomputed from the raw
//! cached keys (`kr`, before norm and RoPE, [`crate::kv_cache::LayerKv::index_keys`]) on each
//! call, always the same way.
//!
//! Source: transformers `modeling_qwen4_exp.py`, `Qwen4ExpTextQSAIndexer.forward` and
//! `Qwen4ExpTextAttention.forward` (llama.cpp `src/models/qwen4exp.cpp`, `build_qsa_top_k`,
//! which keeps a few tokens too many: docs/qwen4exp.md, disagreement 1).

use std::cell::RefCell;
use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::attention::{attention, AttnShape};
use super::norm::rms_norm;
use super::rope::Rope;
use super::{dot, par_chunks};
use crate::kv_cache::{KvRows, LayerKv};
use crate::pool::Pool;

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

/// Per-thread buffers of the sparse queries.
#[derive(Default)]
struct Scratch {
    /// Block scores, then (score, block) pairs being ranked.
    ranked: Vec<(f32, usize)>,
    /// Kept positions, ascending.
    positions: Vec<usize>,
    /// Attention weights over the kept positions, `[group][positions]` (the query heads of
    /// one KV head).
    weights: Vec<f32>,
    /// Each of those heads' sum of weights.
    sums: Vec<f32>,
    /// One key or value row in f32 (f16 caches).
    row: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// The pooling buffers of [`block_keys`] (calling thread).
    static POOLING: RefCell<BlockKeys> = RefCell::new(BlockKeys::default());
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, restricted to each query's kept tokens. The cache already holds the
/// keys, values and raw indexer keys of those positions.
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
    let n_dense = (0..t_n).take_while(|t| qsa.is_dense_at(pos0 + t)).count();
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
    let iw = qsa.n_head * qsa.head_dim;
    let sparse = &mut out[n_dense * width..];
    par_chunks(pool, sparse, width, |r, o| {
        SCRATCH.with(|sc| {
            let sc = &mut *sc.borrow_mut();
            for (i, o) in o.chunks_exact_mut(width).enumerate() {
                let t = n_dense + r.start / width + i;
                let p = pos0 + t;
                let iq_t = &iq[t * iw..(t + 1) * iw];
                kept_positions(iq_t, keys, p, qsa, sc);
                attend_positions(&q[t * width..(t + 1) * width], kv, s, sc, o);
            }
        });
    });
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

/// The positions the query at `p` keeps, ascending, into `sc.positions`: the best
/// `budget / r` complete blocks by indexer score (ties broken as `torch.topk` breaks them,
/// [`topk`]), then the tail.
fn kept_positions(iq: &[f32], keys: &[f32], p: usize, qsa: &QsaShape, sc: &mut Scratch) {
    let (r, di) = (qsa.ratio, qsa.head_dim);
    let nb = (p + 1) / r;
    let inv_sqrt = 1.0 / (di as f32).sqrt();
    sc.ranked.clear();
    for (b, kb) in keys[..nb * di].chunks_exact(di).enumerate() {
        let s: f32 = iq
            .chunks_exact(di)
            .map(|qh| dot(qh, kb).max(0.0))
            .sum::<f32>()
            * inv_sqrt;
        sc.ranked.push((s, b));
    }
    let keep = qsa.max_blocks().min(nb);
    torch_topk(&mut sc.ranked, keep);
    sc.ranked.truncate(keep);
    sc.ranked.sort_unstable_by_key(|(_, b)| *b);
    sc.positions.clear();
    for &(_, b) in &sc.ranked {
        sc.positions.extend(b * r..(b + 1) * r);
    }
    sc.positions.extend(nb * r..=p);
}

/// Softmax attention of one query row over `sc.positions` into `out` (`[n_head·head_dim]`).
/// Per head: scores in position order, their maximum, weights `e^(s − max)` and their sum
/// in order, then the weighted values in order, divided by the sum. The heads that share a
/// KV head go together, position by position, so each cached row is converted once for
/// all of them; each head's operations and their order are those of one head alone.
fn attend_positions(q: &[f32], kv: &LayerKv, s: &AttnShape, sc: &mut Scratch, out: &mut [f32]) {
    let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
    let (k_rows, v_rows) = (kv.k_rows(), kv.v_rows());
    let Scratch {
        positions,
        weights,
        sums,
        row,
        ..
    } = sc;
    let n = positions.len();
    row.resize(hd, 0.0);
    weights.resize(group * n, 0.0);
    sums.resize(group, 0.0);
    let width = group * hd;
    for (kv_h, (qg, og)) in q
        .chunks_exact(width)
        .zip(out.chunks_exact_mut(width))
        .enumerate()
    {
        let at = kv_h * hd;
        for (i, &p) in positions.iter().enumerate() {
            let k = row_f32(k_rows, p, at, hd, row);
            for (g, qh) in qg.chunks_exact(hd).enumerate() {
                weights[g * n + i] = dot(qh, k) * s.scale;
            }
        }
        for (w, sum) in weights.chunks_exact_mut(n).zip(sums.iter_mut()) {
            let max = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            *sum = 0.0;
            for w in w.iter_mut() {
                *w = (*w - max).exp();
                *sum += *w;
            }
        }
        og.fill(0.0);
        for (i, &p) in positions.iter().enumerate() {
            let v = row_f32(v_rows, p, at, hd, row);
            for (g, oh) in og.chunks_exact_mut(hd).enumerate() {
                let w = weights[g * n + i];
                oh.iter_mut().zip(v).for_each(|(o, v)| *o += w * v);
            }
        }
        for (oh, sum) in og.chunks_exact_mut(hd).zip(sums.iter()) {
            let inv = 1.0 / sum;
            oh.iter_mut().for_each(|o| *o *= inv);
        }
    }
}

/// The `hd` cached elements of position `p` from `at` on, as f32 (converted into `buf` from
/// an f16 cache, with `half`'s slice conversion: F16C eight at a time where the CPU has it,
/// exact as every f16 → f32 conversion is). Converting element by element (`f16::to_f32`,
/// a call each) took 23 % of the qwen4exp IQ3_XXS cut's pp4096 (BENCHMARKS.md, 40th session).
fn row_f32<'a>(rows: KvRows<'a>, p: usize, at: usize, hd: usize, buf: &'a mut [f32]) -> &'a [f32] {
    match rows {
        KvRows::F32(pg) => &pg.row(p)[at..at + hd],
        KvRows::F16(pg) => {
            let src: &[f16] = &pg.row(p)[at..at + hd];
            let dst = &mut buf[..hd];
            src.convert_to_f32_slice(dst);
            dst
        }
    }
}

mod select;
#[cfg(test)]
mod tests;
mod topk;

pub use select::sparse_positions;
use topk::torch_topk;
