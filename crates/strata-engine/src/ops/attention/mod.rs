//! Causal multi-head attention with grouped KV heads over a [`LayerKv`] cache, with an
//! optional sliding window (Vaswani et al. 2017; GQA: Ainslie et al. 2023).
//!
//! Computed like FlashAttention (Dao et al. 2022), on the CPU: keys are visited in tiles of
//! [`K_TILE`] positions with an online softmax (running max and sum per query, `online.rs`),
//! so no `T × n` score matrix exists. Tiles lie at absolute positions (multiples of
//! [`K_TILE`]) and are grouped in segments of [`SEGMENT`] positions: a query's softmax is
//! folded tile by tile within a segment and the segments are merged in order
//! (`online.rs`). Tasks are (KV head, block of [`Q_BLOCK`] tokens); a batch of one block
//! (decode, verify windows) instead runs each (KV head, segment) as a task and merges the
//! segments at the end (flash-decoding) with the same merge. So a query's result depends only
//! on its position and the cache, never on how many tokens came in the same call (batch
//! invariance), on the worker count, or on the CPU: every ISA path performs the same float
//! operations in the same order (`lanes.rs`).
//!
//! Files: `kernel.rs` (one task), `listed.rs` (each query over its own list of positions:
//! QSA's kept tokens), `lanes.rs` (dot products and f16 conversion, scalar reference and
//! dispatch), `x86.rs` (their AVX-512 and AVX2 versions), `online.rs` (softmax state and the
//! merge of chunks), `tests.rs`.

use std::cell::RefCell;

use crate::kv_cache::LayerKv;
use crate::pool::{Pool, Tiles};

mod kernel;
mod lanes;
mod listed;
mod online;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use listed::attention_listed;

use kernel::{Job, Scratch};
use lanes::Isa;

/// Shape and masking of one attention layer.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax (usually 1/√head_dim).
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at positions > p − window
    /// (llama.cpp `LLAMA_SWA_TYPE_STANDARD`); `None` = full causal attention.
    pub window: Option<usize>,
}

/// Keys scored together and folded into the softmax at once.
pub const K_TILE: usize = 64;
/// Query tokens per task.
pub const Q_BLOCK: usize = 16;
/// Key positions per segment: tiles of a segment are folded into one online softmax, segments
/// are merged. A constant (never a function of the batch or the context length), so a
/// query's arithmetic is the same in a prefill batch and in a decode step.
pub const SEGMENT: usize = 4 * K_TILE;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// Partial results `[T][split][head][m, l, o…]` of a split batch (caller thread).
    static PARTIALS: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, whose keys/values for those positions are already written.
///
/// `q`: `[T][n_head·head_dim]`; `out`: same shape. With an f16 cache the query is rounded to
/// f16 before its products with the keys, as ggml's `mul_mat` does when its weight operand is
/// f16 (llama.cpp), so scores agree with llama.cpp's. Allocates nothing once the per-thread
/// buffers have grown to the largest shape seen.
pub fn attention(
    pool: &Pool,
    q: &[f32],
    kv: &LayerKv,
    pos0: usize,
    s: &AttnShape,
    out: &mut [f32],
) {
    attention_on(pool, Isa::detect(), q, kv, pos0, s, out)
}

/// [`attention`] on the kernels of `isa`, which this CPU must have.
fn attention_on(
    pool: &Pool,
    isa: Isa,
    q: &[f32],
    kv: &LayerKv,
    pos0: usize,
    s: &AttnShape,
    out: &mut [f32],
) {
    let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
    let width = s.n_head * hd;
    let t_n = q.len() / width;
    if t_n == 0 {
        return;
    }
    let n_keys = pos0 + t_n;
    let n_splits = if t_n <= Q_BLOCK {
        n_keys.div_ceil(SEGMENT)
    } else {
        1
    };
    let job = |g: usize, toks: std::ops::Range<usize>, keys: std::ops::Range<usize>| Job {
        q,
        k: kv.k_rows(),
        v: kv.v_rows(),
        row: kv.row_len(),
        pos0,
        s,
        g,
        toks,
        keys,
        isa,
    };
    {
        let r = if n_splits <= 1 {
            let tiles = Tiles::new(out, width, group * hd, Q_BLOCK);
            pool.for_each_tile(tiles, |tile| {
                let g = tile.cols.start / (group * hd);
                with_scratch(|sc| {
                    sc.attend(&job(g, tile.rows.clone(), 0..n_keys));
                    sc.st.seal(hd);
                    sc.st.write_normalized(tile, group, hd);
                });
                Ok::<(), ()>(())
            })
        } else {
            PARTIALS.with(|cell| {
                let (part, acc) = &mut *cell.borrow_mut();
                let cell_w = hd + 2;
                part.resize(t_n * n_splits * s.n_head * cell_w, 0.0);
                let tiles = Tiles::new(part, n_splits * s.n_head * cell_w, group * cell_w, t_n);
                let r = pool.for_each_tile(tiles, |tile| {
                    let c = tile.cols.start / (group * cell_w);
                    let (sp, g) = (c / s.n_kv_head, c % s.n_kv_head);
                    let keys = sp * SEGMENT..((sp + 1) * SEGMENT).min(n_keys);
                    with_scratch(|sc| {
                        sc.attend(&job(g, tile.rows.clone(), keys));
                        sc.st.write_partial(tile, group, hd);
                    });
                    Ok::<(), ()>(())
                });
                online::merge_splits(part, n_splits, s, acc, out);
                r
            })
        };
        r.expect("attention tasks do not fail");
    }
}

fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| f(&mut cell.borrow_mut()))
}
