//! The runner's scratch: activation buffers of one forward run, grown to the largest run and
//! then reused (no allocation per decoded token). They belong to the model's runner, not to a
//! sequence: any number of sessions share one workspace, and a run's memory is bounded by its
//! row count (the micro-batch, `--ubatch`), not by the prompt length. The buffers are the
//! backend's ([`Memory`]): host vectors for the CPU, device memory for a GPU.

use crate::arch::qwen3next::HybridScratch;
use crate::arch::qwen4exp::Qwen4ExpScratch;
use crate::backend::Memory;

/// Activation buffers of a run of `T` rows (the tokens of one or several sequences). Every op
/// sizes its outputs, so buffers need no preparation.
#[derive(Default)]
pub struct Workspace<M: Memory> {
    /// Absolute position of each row `[T]` (RoPE), in host memory.
    pub pos: Vec<usize>,
    /// Residual stream `[T][n_embd]` (`[T][hc·n_embd]` with hyper-connections).
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
    /// Final residual rows `[rows][residual width]` of the rows asked for (after
    /// `Graph::mtp`: the MTP layer's output residual of every row).
    pub hidden: M::Buf,
    /// Buffers of the routed-expert FFN (MoE models).
    pub moe: M::MoeScratch,
    /// Buffers of the Gated DeltaNet and gated attention layers (Qwen3-Next).
    pub hybrid: HybridScratch<M>,
    /// Buffers of the qwen4exp layers (hyper-connections, PLE, QSA).
    pub qwen4exp: Qwen4ExpScratch<M>,
}
