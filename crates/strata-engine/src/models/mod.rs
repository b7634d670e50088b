//! Model graphs. `dense` covers the dense decoder family (llama, qwen2, qwen3, gemma3) and
//! qwen3moe; `qwen3next` the hybrid Gated DeltaNet + gated attention MoE.

pub mod dense;
pub mod qwen3next;
