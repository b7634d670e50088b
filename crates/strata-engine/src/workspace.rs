//! The runner's scratch: activation buffers of one forward run, grown to the largest run and
//! then reused (no allocation per decoded token). They belong to the model's runner, not to a
//! sequence: any number of sessions share one workspace, and a run's memory is bounded by its
//! row count (the micro-batch, `--ubatch`), not by the prompt length.

use std::ops::Range;

use crate::arch::qwen3next::HybridScratch;
use crate::config::ModelConfig;
use crate::kv_cache::LayerKv;
use crate::ops::linear::Activations;
use crate::ops::moe::MoeScratch;
use crate::recurrent_state::RecurrentState;

/// Activation buffers of a run of `T` rows (the tokens of one or several sequences).
#[derive(Default)]
pub struct Workspace {
    /// Absolute position of each row `[T]` (RoPE).
    pub pos: Vec<usize>,
    /// Residual stream `[T][n_embd]`.
    pub x: Vec<f32>,
    /// Normed input of a block `[T][n_embd]`.
    pub xb: Activations,
    /// Block output before the residual add `[T][n_embd]`.
    pub xb2: Vec<f32>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    /// Attention output `[T][n_head·head_dim]`.
    pub att: Activations,
    /// FFN gate and up projections `[T][n_ff]`.
    pub hb: Activations,
    pub hb2: Vec<f32>,
    /// RoPE angles `[T][n_rot]` for full and windowed layers.
    pub rope_cs: Vec<f32>,
    pub rope_cs_swa: Vec<f32>,
    /// Logits `[rows][n_vocab]` of the rows asked for.
    pub logits: Vec<f32>,
    /// Final hidden states `[rows][n_embd]` of the rows asked for, when asked.
    pub hidden: Vec<f32>,
    /// Buffers of the routed-expert FFN (MoE models).
    pub moe: MoeScratch,
    /// Buffers of the Gated DeltaNet and gated attention layers (Qwen3-Next).
    pub hybrid: HybridScratch,
}

impl Workspace {
    /// Sizes every buffer for a run of `t` rows.
    pub fn prepare(&mut self, cfg: &ModelConfig, t: usize) {
        let q = cfg.n_head * cfg.head_dim;
        self.x.resize(t * cfg.n_embd, 0.0);
        self.xb.resize(t, cfg.n_embd);
        self.xb2.resize(t * cfg.n_embd, 0.0);
        self.q.resize(t * q, 0.0);
        self.k.resize(t * cfg.kv_row(), 0.0);
        self.v.resize(t * cfg.kv_row(), 0.0);
        self.att.resize(t, q);
        self.hb.resize(t, cfg.n_ff);
        self.hb2.resize(t * cfg.n_ff, 0.0);
        self.rope_cs.resize(t * cfg.rope.n_rot, 0.0);
        self.rope_cs_swa.resize(t * cfg.rope.n_rot, 0.0);
    }
}

/// One sequence's share of a run: its state, and the rows of the run that are its tokens.
pub struct SeqRun<'a> {
    /// The sequence's attention caches, one per attention layer in order.
    pub kv: &'a mut [LayerKv],
    /// Its recurrent state, for models that have recurrent layers.
    pub rec: Option<&'a mut RecurrentState>,
    /// Position of the first row.
    pub pos0: usize,
    /// The rows of the run's activations (`[T][…]`) that hold its tokens, in order.
    pub rows: Range<usize>,
}
