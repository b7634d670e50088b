//! llama.cpp's own tokenizer test vectors (`models/ggml-vocab-*.gguf` with `.inp` / `.out`,
//! run by llama.cpp `tests/test-tokenizer-0.cpp` with add_special = false and
//! parse_special = false): every case must give exactly llama.cpp's ids.
//!
//! The files come from the `llama-cpp-python==0.3.36` source package; `scripts/fetch_llama_vocab.sh`
//! puts them in `~/.cache/strata/llama-vocab` (override with `STRATA_LLAMA_VOCAB_DIR`).

use std::path::PathBuf;

use strata_engine::tokenizer::Tokenizer;
use strata_gguf::GgufFile;

fn vocab_dir() -> PathBuf {
    match std::env::var_os("STRATA_LLAMA_VOCAB_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/strata/llama-vocab"),
    }
}

/// The cases of `ggml-vocab-<name>.gguf.inp/.out`, split as test-tokenizer-0 splits them.
fn cases(name: &str) -> (Tokenizer, Vec<(String, Vec<u32>)>) {
    let dir = vocab_dir();
    let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
    let read = |ext: &str| {
        let p = PathBuf::from(format!("{}.{ext}", gguf.display()));
        std::fs::read_to_string(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\nrun scripts/fetch_llama_vocab.sh (or set STRATA_LLAMA_VOCAB_DIR)",
                p.display()
            )
        })
    };
    let (inp, out) = (read("inp"), read("out"));
    let file = GgufFile::open(&gguf).unwrap_or_else(|e| {
        panic!("{e}\nrun scripts/fetch_llama_vocab.sh (or set STRATA_LLAMA_VOCAB_DIR)")
    });
    let tok = Tokenizer::from_metadata(file.metadata()).expect("vocab loads");

    const SEP: &str = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut rest = inp.as_str();
    while !rest.is_empty() {
        match rest.find(SEP) {
            Some(i) => {
                inputs.push(rest[..i].to_string());
                rest = &rest[i + SEP.len()..];
            }
            None => {
                inputs.push(rest.to_string());
                break;
            }
        }
    }
    let outputs: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("token id"))
                .collect()
        })
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{name}: .inp and .out disagree"
    );
    (tok, inputs.into_iter().zip(outputs).collect())
}

/// Runs every case; returns (passed, total, failure report).
fn run(name: &str) -> (usize, usize, String) {
    let (tok, cases) = cases(name);
    let mut report = String::new();
    let mut passed = 0;
    for (text, want) in &cases {
        let got = tok.encode(text, false, false);
        if &got == want {
            passed += 1;
        } else {
            report.push_str(&format!(
                "  {text:?}\n    want {want:?}\n    got  {got:?}\n"
            ));
        }
    }
    eprintln!(
        "ggml-vocab-{name}: {passed}/{} cases match llama.cpp",
        cases.len()
    );
    (passed, cases.len(), report)
}

fn check(name: &str) {
    let (passed, total, report) = run(name);
    assert_eq!(passed, total, "ggml-vocab-{name}: mismatches:\n{report}");
}

#[test]
fn llama_cpp_vectors_gpt2() {
    check("gpt-2");
}

#[test]
fn llama_cpp_vectors_llama_bpe() {
    check("llama-bpe");
}

#[test]
fn llama_cpp_vectors_llama_spm() {
    check("llama-spm");
}

#[test]
fn llama_cpp_vectors_qwen2() {
    check("qwen2");
}

#[test]
fn llama_cpp_vectors_qwen35() {
    check("qwen35");
}

/// The other BPE and SPM vocabularies shipped with test vectors (pre-tokenizers starcoder,
/// refact, command-r, mpt, falcon, deepseek-coder, deepseek-llm; phi-3's rstrip rule).
#[test]
fn llama_cpp_vectors_other_vocabs() {
    let mut report = String::new();
    for name in [
        "starcoder",
        "refact",
        "command-r",
        "mpt",
        "falcon",
        "deepseek-coder",
        "deepseek-llm",
        "phi-3",
    ] {
        let (passed, total, r) = run(name);
        if passed != total {
            report.push_str(&format!("ggml-vocab-{name}:\n{r}"));
        }
    }
    assert!(report.is_empty(), "mismatches:\n{report}");
}
