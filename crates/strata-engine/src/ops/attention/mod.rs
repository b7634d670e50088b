//! Causal multi-head attention with grouped KV heads over a [`LayerKv`] cache, with an
//! optional sliding window (Vaswani et al. 2017; GQA: Ainslie et al. 2023).
//!
//! Computed like FlashAttention (Dao et al. 2022), on the CPU: keys are visited in tiles of
//! [`K_TILE`] positions with an online softmax (running max and sum per query, `online.rs`),
//! so no `T × n` score matrix exists. Tasks are (KV head, block of [`Q_BLOCK`] tokens); a
//! batch of one block (decode, verify windows) also splits the keys in chunks
//! ([`key_split`]) whose partial softmaxes are merged at the end in a fixed order
//! (flash-decoding). Tile and chunk edges depend only on the shape, and every ISA path
//! performs the same float operations in the same order (`lanes.rs`), so results do not
//! depend on the worker count or on the CPU.
//!
//! Files: `kernel.rs` (one task), `lanes.rs` (dot products and f16 conversion, scalar
//! reference and dispatch), `x86.rs` (their AVX-512 and AVX2 versions),
//! `online.rs` (softmax state and the merge of chunks), `tests.rs`.

use std::cell::RefCell;

use crate::kv_cache::LayerKv;
use crate::pool::{self, Tiles};

mod kernel;
mod lanes;
mod online;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

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
/// Tasks a split batch aims at over all its KV heads: enough for an even share on a few
/// workers, few enough that the merge stays cheap.
const SPLIT_TASKS: usize = 24;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// Partial results `[T][split][head][m, l, o…]` of a split batch (caller thread).
    static PARTIALS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Attention of `T = q.len() / (n_head·head_dim)` queries at positions `pos0 .. pos0+T`
/// against the cache, whose keys/values for those positions are already written.
///
/// `q`: `[T][n_head·head_dim]`; `out`: same shape. With an f16 cache the query is rounded to
/// f16 before its products with the keys, as ggml's `mul_mat` does when its weight operand is
/// f16 (llama.cpp), so scores agree with llama.cpp's. Allocates nothing once the per-thread
/// buffers have grown to the largest shape seen.
pub fn attention(q: &[f32], kv: &LayerKv, pos0: usize, s: &AttnShape, out: &mut [f32]) {
    attention_on(Isa::detect(), q, kv, pos0, s, out)
}

/// [`attention`] on the kernels of `isa`, which this CPU must have.
fn attention_on(isa: Isa, q: &[f32], kv: &LayerKv, pos0: usize, s: &AttnShape, out: &mut [f32]) {
    let (hd, group) = (s.head_dim, s.n_head / s.n_kv_head);
    let width = s.n_head * hd;
    let t_n = q.len() / width;
    if t_n == 0 {
        return;
    }
    let n_keys = pos0 + t_n;
    let split = key_split(n_keys, s.n_kv_head);
    let n_splits = if t_n <= Q_BLOCK {
        n_keys.div_ceil(split)
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
    pool::with_current(|pool| {
        let r = if n_splits <= 1 {
            let tiles = Tiles::new(out, width, group * hd, Q_BLOCK);
            pool.for_each_tile(tiles, |tile| {
                let g = tile.cols.start / (group * hd);
                with_scratch(|sc| {
                    sc.attend(&job(g, tile.rows.clone(), 0..n_keys));
                    sc.st.write_normalized(tile, group, hd);
                });
                Ok::<(), ()>(())
            })
        } else {
            PARTIALS.with(|cell| {
                let mut part = cell.borrow_mut();
                let cell_w = hd + 2;
                part.resize(t_n * n_splits * s.n_head * cell_w, 0.0);
                let tiles =
                    Tiles::new(&mut part, n_splits * s.n_head * cell_w, group * cell_w, t_n);
                let r = pool.for_each_tile(tiles, |tile| {
                    let c = tile.cols.start / (group * cell_w);
                    let (sp, g) = (c / s.n_kv_head, c % s.n_kv_head);
                    let keys = sp * split..((sp + 1) * split).min(n_keys);
                    with_scratch(|sc| {
                        sc.attend(&job(g, tile.rows.clone(), keys));
                        sc.st.write_partial(tile, group, hd);
                    });
                    Ok::<(), ()>(())
                });
                online::merge_splits(&part, n_splits, s, out);
                r
            })
        };
        r.expect("attention tasks do not fail");
    });
}

/// Keys per chunk of a split batch: a multiple of [`K_TILE`] that cuts `n_keys` into about
/// [`SPLIT_TASKS`] / `n_kv_head` chunks. A function of the shape only, never of the worker
/// count, so the merge order (and the bits) are the same on any pool.
pub fn key_split(n_keys: usize, n_kv_head: usize) -> usize {
    let chunks = SPLIT_TASKS.div_ceil(n_kv_head.max(1));
    n_keys.div_ceil(chunks).div_ceil(K_TILE).max(1) * K_TILE
}

fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| f(&mut cell.borrow_mut()))
}
