//! Tokenization of the three test models must equal llama.cpp's, case for case.
//!
//! The expected ids and detokenized text come from `scripts/make_tokenizer_refs.py`
//! (llama-cpp-python, `llama_tokenize` / `llama_detokenize`) and live in
//! `tests/data/tokenizer/refs_<model>.json` with the sha256 of the model file they were made
//! from. Models are found in `STRATA_MODELS_DIR` (default `~/.cache/strata/models`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};
use strata_engine::tokenizer::Tokenizer;
use strata_gguf::GgufFile;

fn models_dir() -> PathBuf {
    match std::env::var_os("STRATA_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/strata/models")
        }
    }
}

fn refs(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tokenizer")
        .join(format!("refs_{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("refs json")
}

/// The sha256 of `path`: its `.sha256` sidecar when there is one, else computed.
fn sha256(path: &Path) -> String {
    let sidecar = PathBuf::from(format!("{}.sha256", path.display()));
    if let Ok(s) = std::fs::read_to_string(&sidecar) {
        if let Some(h) = s.split_whitespace().next() {
            return h.to_lowercase();
        }
    }
    let bytes = std::fs::read(path).expect("read model");
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn load(refs: &Value) -> Tokenizer {
    let file = refs["model_file"].as_str().expect("model_file");
    let path = models_dir().join(file);
    assert!(
        path.exists(),
        "model {} is missing: put it in STRATA_MODELS_DIR (default ~/.cache/strata/models)",
        path.display()
    );
    assert_eq!(
        sha256(&path),
        refs["model_sha256"].as_str().unwrap(),
        "{} is not the file the references were made from; rerun scripts/make_tokenizer_refs.py",
        path.display()
    );
    let gguf = GgufFile::open(&path).expect("open model");
    Tokenizer::from_metadata(gguf.metadata()).expect("tokenizer loads")
}

fn check(name: &str) {
    let refs = refs(name);
    let tok = load(&refs);
    let cases = refs["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let (add, parse) = (
            c["add_special"].as_bool().unwrap(),
            c["parse_special"].as_bool().unwrap(),
        );
        let want: Vec<u32> = c["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let got = tok.encode(text, add, parse);
        if got != want {
            failures.push(format!(
                "encode({text:?}, add_special={add}, parse_special={parse})\n  want {want:?}\n  got  {got:?}"
            ));
            continue;
        }
        let decoded = tok.decode(&want);
        if decoded != c["decoded"].as_str().unwrap() {
            failures.push(format!(
                "decode({want:?})\n  want {:?}\n  got  {decoded:?}",
                c["decoded"]
            ));
        }
        let special = String::from_utf8_lossy(&tok.detokenize(&want, false, true)).into_owned();
        if special != c["decoded_special"].as_str().unwrap() {
            failures.push(format!(
                "detokenize({want:?}, unparse_special)\n  want {:?}\n  got  {special:?}",
                c["decoded_special"]
            ));
        }
        let mut stream = tok.stream_decoder();
        let mut streamed: String = want.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.finish());
        if streamed != decoded {
            failures.push(format!(
                "stream decode of {want:?} gave {streamed:?}, not {decoded:?}"
            ));
        }
    }
    eprintln!(
        "{name}: {}/{} cases match llama.cpp {}",
        cases.len() - failures.len(),
        cases.len(),
        refs["llama_cpp_python"]
    );
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[test]
fn tokens_match_llama_cpp_smollm2() {
    check("smollm2");
}

#[test]
fn tokens_match_llama_cpp_gemma3() {
    check("gemma3");
}

#[test]
fn tokens_match_llama_cpp_qwen25_coder() {
    check("qwen2.5-coder");
}

/// About 32K tokens of mixed prose, code, CJK and chat markup.
fn long_prompt(tok: &Tokenizer) -> String {
    let unit = "<|im_start|>user\nThe quick brown fox jumps over the lazy dog; 1234567 times! \
                你好，世界。Ünïcödé 🦙🚀\n\tdef f(x):\n        return x ** 2  # comment\n<|im_end|>\n";
    let per_unit = tok.encode(unit, false, true).len();
    unit.repeat(32_768 / per_unit + 1)
}

/// Encoding a 32K-token prompt takes well under a second (best of three runs, so that other
/// work on the machine does not decide the result).
#[test]
fn encodes_32k_tokens_under_a_second() {
    for name in ["qwen2.5-coder", "gemma3", "smollm2"] {
        let tok = load(&refs(name));
        let text = long_prompt(&tok);
        let mut best = f64::INFINITY;
        let mut n = 0;
        for _ in 0..3 {
            let t = Instant::now();
            n = tok.encode(&text, true, true).len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        eprintln!("{name}: {n} tokens in {:.1} ms", best * 1e3);
        assert!(n >= 32_000, "{name}: only {n} tokens");
        assert!(best < 1.0, "{name}: {n} tokens took {best:.3} s");
    }
}
