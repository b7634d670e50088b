//! The runner's scratch: activation buffers of one forward run, grown to the largest run and
//! then reused (no allocation per decoded token). They belong to the model's runner, not to a
//! sequence: any number of sessions share one workspace, and a run's memory is bounded by its
//! row count (the micro-batch, `--ubatch`), not by the prompt length. The buffers are the
//! backend's ([`Memory`]): host vectors for the CPU, device memory for a GPU.

use std::ops::Range;

use crate::arch::qwen3next::HybridScratch;
use crate::backend::Memory;
use crate::kv_cache::LayerKv;
use crate::recurrent_state::{DeltaState, RecurrentState};

/// Activation buffers of a run of `T` rows (the tokens of one or several sequences). Every op
/// sizes its outputs, so buffers need no preparation.
#[derive(Default)]
pub struct Workspace<M: Memory> {
    /// Absolute position of each row `[T]` (RoPE), in host memory.
    pub pos: Vec<usize>,
    /// Residual stream `[T][n_embd]`.
    pub x: M::Buf,
    /// Normed input of a block `[T][n_embd]`.
    pub xb: M::Buf,
    /// Block output before the residual add `[T][n_embd]`.
    pub xb2: M::Buf,
    pub q: M::Buf,
    pub k: M::Buf,
    pub v: M::Buf,
    /// Attention output `[T][n_head·head_dim]`.
    pub att: M::Buf,
    /// FFN gate and up projections `[T][n_ff]`.
    pub hb: M::Buf,
    pub hb2: M::Buf,
    /// RoPE angles `[T][n_rot]` for full and windowed layers.
    pub rope_cs: M::Buf,
    pub rope_cs_swa: M::Buf,
    /// Logits `[rows][n_vocab]` of the rows asked for.
    pub logits: M::Buf,
    /// Final hidden states `[rows][n_embd]` of the rows asked for, when asked.
    pub hidden: M::Buf,
    /// Buffers of the routed-expert FFN (MoE models).
    pub moe: M::MoeScratch,
    /// Buffers of the Gated DeltaNet and gated attention layers (Qwen3-Next).
    pub hybrid: HybridScratch<M>,
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

impl SeqRun<'_> {
    /// The sequence's state of recurrent layer `layer`.
    ///
    /// Panics if the sequence has no recurrent state: sessions of a model with recurrent
    /// layers always have it ([`RecurrentState::new`]).
    pub fn delta_state(&mut self, layer: usize) -> &mut DeltaState {
        let rec = self
            .rec
            .as_mut()
            .expect("sessions of a model with recurrent layers have recurrent state");
        &mut rec.layers[layer]
    }
}
