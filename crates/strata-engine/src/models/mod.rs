//! Model graphs. `dense` covers the dense decoder family (llama, qwen2, qwen3, gemma3).

pub mod dense;
