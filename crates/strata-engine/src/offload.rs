//! Which layers a device takes under a memory budget (`-ngl N`, `--vram-budget`).
//!
//! llama.cpp's convention: offloading N layers puts the LAST N on the device, with the output
//! norm and the LM head (where the residual stream ends); the CPU runs the embedding and the
//! first layers. Offloading every layer also puts the embedding on the device. [`plan`]
//! places layers from the last one backwards while their cost fits the budget. A layer's
//! cost is the bytes of its weight matrices plus, for an attention layer, its device KV
//! mirror at the session's full context (keys and values in the session cache's type:
//! `2·n_ctx·kv_row·2` bytes for f16, `·4` for f32);
//! layer 0 also carries the embedding. A matrix read by two parts (a tied embedding and LM
//! head) is counted once. Norm vectors (a few KiB a layer) are not counted.

use std::collections::HashSet;
use std::ops::Range;

use crate::arch::Graph;
use crate::config::ModelConfig;
use crate::kv_cache::KvType;
use crate::ops::linear::Matrix;

/// What [`plan`] placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The layers on the device (`first..n_layer`; empty when not even one fits).
    pub layers: Range<usize>,
    /// Bytes of the weight matrices to upload (placed layers, LM head, the embedding when
    /// every layer is placed).
    pub weight_bytes: u64,
    /// Bytes of the placed attention layers' KV mirrors at the full context.
    pub kv_bytes: u64,
    /// The layers asked for (at most the layer count): more than `layers` holds when the
    /// budget ran out first.
    pub wanted: usize,
}

impl Plan {
    /// No layer placed: the model stays on the CPU.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The matrices to upload for this plan: the embedding when every layer is placed, each
    /// placed layer's, and the LM head's (none for an empty plan).
    pub fn matrices<'g>(&self, graph: &'g Graph) -> Vec<&'g Matrix<'static>> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.layers.start == 0 {
            out.extend(graph.embedding_matrices());
        }
        for il in self.layers.clone() {
            out.extend(graph.layer_matrices(il));
        }
        out.extend(graph.head_matrices());
        out
    }
}

/// Bytes of a device KV mirror of one attention layer at `n_ctx` positions of a session
/// whose cache is `kv` (the device mirrors an f16 cache as f16, an f32 one as f32).
pub fn kv_layer_bytes(cfg: &ModelConfig, n_ctx: usize, kv: KvType) -> u64 {
    let elem = match kv {
        KvType::F16 => 2,
        KvType::F32 => 4,
    };
    2 * n_ctx as u64 * cfg.kv_row() as u64 * elem
}

/// Places up to `want` layers (≥ the layer count: all of them) of `graph` on a device that
/// may take `budget` bytes, for sessions of `n_ctx` positions with `kv` caches (see the
/// module docs).
pub fn plan(
    graph: &Graph,
    cfg: &ModelConfig,
    want: usize,
    budget: u64,
    (n_ctx, kv): (usize, KvType),
) -> Plan {
    let n_layer = cfg.n_layer;
    let wanted = want.min(n_layer);
    let mut seen = HashSet::new();
    let mut bytes = |mats: Vec<&Matrix<'static>>| -> u64 {
        mats.into_iter()
            .filter(|m| seen.insert((m.data.as_ptr() as usize, m.data.len())))
            .map(|m| m.data.len() as u64)
            .sum()
    };
    let head = bytes(graph.head_matrices());
    let (mut weight_bytes, mut kv_bytes) = (head, 0);
    let mut first = n_layer;
    while n_layer - first < wanted {
        let il = first - 1;
        let mut w = bytes(graph.layer_matrices(il));
        if il == 0 {
            w += bytes(graph.embedding_matrices());
        }
        let kv = if cfg.is_recurrent(il) {
            0
        } else {
            kv_layer_bytes(cfg, n_ctx, kv)
        };
        if weight_bytes + kv_bytes + w + kv > budget {
            break;
        }
        (weight_bytes, kv_bytes, first) = (weight_bytes + w, kv_bytes + kv, il);
    }
    if first == n_layer {
        return Plan {
            layers: n_layer..n_layer,
            weight_bytes: 0,
            kv_bytes: 0,
            wanted,
        };
    }
    Plan {
        layers: first..n_layer,
        weight_bytes,
        kv_bytes,
        wanted,
    }
}
