//! Strata against llama.cpp on the tiny random MoE checkpoints (scripts/make_tiny_models.sh
//! builds them into ~/.cache/strata/tiny; scripts/make_tiny_refs.py wrote
//! tests/data/tiny_refs/ with llama.cpp from llama-cpp-python).
//!
//! For every prompt position: max |Δlogit| ≤ 2e-3 (F32), 1e-2 (F16) or 1e-1 (BF16, whose
//! activations are rounded to bf16, with some position within 1e-4; see `common::tiny::check`)
//! over the whole vocabulary; for quantized types the same top-1 wherever llama.cpp's top-2
//! margin > 0.5. Greedy 16-token continuations are identical for F32/F16 up to the first step
//! whose llama.cpp margin is within twice the logit bound; for BF16 and
//! quantized types every token we choose is within 0.5 logits of llama.cpp's best, up to
//! llama.cpp's first near-tie.

mod common;

use common::tiny::check;

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3moe_f32() {
    check("qwen3moe-tiny", "F32");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3moe_f16() {
    check("qwen3moe-tiny", "F16");
}

#[test]
fn logits_and_greedy_match_llama_cpp_qwen3moe_bf16() {
    check("qwen3moe-tiny", "BF16");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3moe_q8_0() {
    check("qwen3moe-tiny", "Q8_0");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3moe_q6_k() {
    check("qwen3moe-tiny", "Q6_K");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3moe_q4_k_m() {
    check("qwen3moe-tiny", "Q4_K_M");
}

#[test]
fn top1_and_greedy_match_llama_cpp_qwen3moe_q4_0() {
    check("qwen3moe-tiny", "Q4_0");
}
