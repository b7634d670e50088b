//! Helpers of the real-model tests: where models and llama.cpp references live.

#![allow(dead_code)]

use std::path::PathBuf;

use serde::Deserialize;

pub mod npy;
pub mod qwen4exp;
mod rng;
pub mod tiny;

// Not every test binary that includes `common` draws random numbers.
#[allow(unused_imports)]
pub use rng::Rng;

/// The three real models, by known name and file name (see scripts/make_refs.py).
pub const MODELS: [(&str, &str); 3] = [
    ("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3-270m", "gemma-3-270m-q4_k_m.gguf"),
    (
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
    ),
];

/// `$STRATA_MODELS_DIR` or `~/.cache/strata/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("STRATA_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/strata/models"),
    }
}

/// Path of a real model; panics with instructions when it is missing.
pub fn model_path(name: &str) -> PathBuf {
    let file = MODELS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("known model")
        .1;
    let p = models_dir().join(file);
    assert!(
        p.exists(),
        "{} is missing: run `strata pull {name}` (or .ci/run) first",
        p.display()
    );
    p
}

/// Repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Deserialize)]
pub struct TopK {
    pub ids: Vec<u32>,
    pub logits: Vec<f32>,
}

#[derive(Deserialize)]
pub struct TeacherForcedRow {
    pub ids: Vec<u32>,
    pub logits: Vec<f32>,
    pub lse: f64,
    pub next_logit: f64,
}

#[derive(Deserialize)]
pub struct GreedyCase {
    pub prompt: String,
    pub prompt_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
    pub steps: Vec<TopK>,
}

/// llama.cpp batched against llama.cpp one token at a time on the same text.
#[derive(Deserialize)]
pub struct SelfConsistency {
    pub same_top1: f64,
    pub mean_kl: f64,
    pub ppl_ratio: f64,
}

/// One file written by scripts/make_refs.py.
#[derive(Deserialize)]
pub struct Reference {
    pub model: String,
    pub model_file: String,
    pub model_sha256: String,
    pub llama_cpp_python_version: String,
    pub script_sha256: String,
    pub text_tokens: Vec<u32>,
    pub self_consistency: SelfConsistency,
    pub teacher_forced: Vec<TeacherForcedRow>,
    pub greedy: Vec<GreedyCase>,
}

pub fn load_reference(name: &str) -> Reference {
    let p = repo_root().join(format!("tests/data/refs/{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("reference JSON parses")
}

/// Hex sha256 of a file.
pub fn sha256_file(path: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// log-softmax normaliser of a row, in f64.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    m + row.iter().map(|l| (*l as f64 - m).exp()).sum::<f64>().ln()
}
