//! Strata against llama.cpp on the tiny random dense checkpoints (scripts/make_tiny_models.sh
//! builds them into ~/.cache/strata/tiny; scripts/make_tiny_refs.py wrote
//! tests/data/tiny_refs/ with llama.cpp from llama-cpp-python): qwen3 (q/k norms), qwen2
//! (q/k/v biases), llama (NORM RoPE on permuted q/k) and gemma3 (windowed layers 0–4 with a
//! window of 8, global layer 5, sandwich norms, GeGLU, scaled embeddings).
//!
//! Bounds as in reference_tiny_moe.rs (see `common::tiny::check`): for every prompt position
//! max |Δlogit| ≤ 2e-3 (F32), 1e-2 (F16) or 1e-1 (BF16, whose activations are rounded to bf16,
//! with some position within 1e-4) over the whole vocabulary; for Q8_0 / Q4_K_M the same top-1
//! wherever llama.cpp's top-2 margin > 0.5. Greedy 16-token continuations are identical for
//! F32/F16 up to the first step whose llama.cpp margin is within twice the logit bound. The
//! prompts (27 and 6 tokens) plus continuations run past the window.

mod common;

use common::tiny::check;

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3_f32() {
    check("qwen3-tiny", "F32");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3_f16() {
    check("qwen3-tiny", "F16");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3_bf16() {
    check("qwen3-tiny", "BF16");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3_q8_0() {
    check("qwen3-tiny", "Q8_0");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3_q4_k_m() {
    check("qwen3-tiny", "Q4_K_M");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen2_f32() {
    check("qwen2-tiny", "F32");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen2_f16() {
    check("qwen2-tiny", "F16");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen2_bf16() {
    check("qwen2-tiny", "BF16");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen2_q8_0() {
    check("qwen2-tiny", "Q8_0");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen2_q4_k_m() {
    check("qwen2-tiny", "Q4_K_M");
}

#[test]
fn logits_and_greedy_match_llama_cpp_llama_f32() {
    check("llama-tiny", "F32");
}

#[test]
fn logits_and_greedy_match_llama_cpp_llama_f16() {
    check("llama-tiny", "F16");
}

#[test]
fn logits_and_greedy_match_llama_cpp_llama_bf16() {
    check("llama-tiny", "BF16");
}

#[test]
fn top1_and_greedy_match_llama_cpp_llama_q8_0() {
    check("llama-tiny", "Q8_0");
}

#[test]
fn top1_and_greedy_match_llama_cpp_llama_q4_k_m() {
    check("llama-tiny", "Q4_K_M");
}

#[test]
fn logits_and_greedy_match_llama_cpp_gemma3_f32() {
    check("gemma3-tiny", "F32");
}

#[test]
fn logits_and_greedy_match_llama_cpp_gemma3_f16() {
    check("gemma3-tiny", "F16");
}

#[test]
fn logits_and_greedy_match_llama_cpp_gemma3_bf16() {
    check("gemma3-tiny", "BF16");
}

#[test]
fn top1_and_greedy_match_llama_cpp_gemma3_q8_0() {
    check("gemma3-tiny", "Q8_0");
}

#[test]
fn top1_and_greedy_match_llama_cpp_gemma3_q4_k_m() {
    check("gemma3-tiny", "Q4_K_M");
}
