//! `strata run` end to end on the default model: the greedy completion of "The capital of
//! France is" starts with the text of llama.cpp's greedy tokens for the same prompt
//! (tests/data/refs/smollm2-135m.json, made by scripts/make_refs.py), and the run ends with
//! the speed line on stderr.

use std::process::Command;

#[test]
fn run_prints_llama_cpp_greedy_start_and_speed_line() {
    let refs = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/refs/smollm2-135m.json"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(refs).unwrap()).unwrap();
    let case = &r["greedy"][0];
    assert_eq!(case["prompt"], "The capital of France is");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "run",
            "-p",
            "The capital of France is",
            "-n",
            "2",
            "--temp",
            "0",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // llama.cpp's first two greedy tokens (" Paris", ".") decoded by the same vocabulary.
    let ids: Vec<u64> = case["tokens"].as_array().unwrap()[..2]
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(
        stdout.starts_with(" Paris."),
        "stdout: {stdout:?} (llama.cpp tokens {ids:?})"
    );
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("prompt: 5 tokens,") && last.contains("decode: 2 tokens"),
        "{stderr}"
    );
}
