//! `strata synth` end to end: synthesized tiny files are read by `strata inspect` (with the
//! expert layout for MoE files), loaded and run by the engine, loaded by llama.cpp (through
//! llama-cpp-python and scripts/llama_greedy.py) with the same greedy tokens for F32 files,
//! and are deterministic in the seed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{python_with_llama_cpp, run_strata, smollm2, temp_dir};

/// Runs `strata synth ARGS -o DIR/NAME` and returns the path; panics with stderr on failure.
fn synth(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut all = vec!["synth", "-o", path.to_str().unwrap(), "--force"];
    all.extend_from_slice(args);
    let out = run_strata(&all);
    assert!(
        out.status.success(),
        "strata {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn stdout_of(args: &[&str]) -> String {
    let out = run_strata(args);
    assert!(
        out.status.success(),
        "strata {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The tiny qwen3moe / llama files of the tests: (name, synth args).
fn tiny_cases(smol: &str) -> Vec<(String, Vec<String>)> {
    let mut cases = Vec::new();
    for ty in ["f32", "q4_k"] {
        // A byte vocabulary (no file needed) for the MoE, SmolLM2's real one for llama.
        cases.push((
            format!("moe-{ty}.gguf"),
            vec!["--preset", "tiny-qwen3moe", "--vocab", "512", "--type", ty],
        ));
        cases.push((
            format!("llama-{ty}.gguf"),
            vec!["--preset", "tiny-llama", "--vocab-from", smol, "--type", ty],
        ));
    }
    cases
        .into_iter()
        .map(|(n, a)| (n, a.into_iter().map(String::from).collect()))
        .collect()
}

#[test]
fn synthesized_tiny_moe_and_llama_are_inspected_loaded_and_run() {
    let dir = temp_dir("synth-run");
    let smol = smollm2();
    for (name, args) in tiny_cases(smol.to_str().unwrap()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let path = synth(&dir, &name, &args);
        let p = path.to_str().unwrap();
        let info = stdout_of(&["inspect", p]);
        let moe = name.starts_with("moe");
        let arch = if moe { "qwen3moe" } else { "llama" };
        assert!(
            info.lines().any(|l| l.starts_with("  general.architecture")
                && l.ends_with(&format!("= \"{arch}\""))),
            "{name}: {info}"
        );
        assert_eq!(
            info.contains("\nexperts: 2 of 2 layers routed"),
            moe,
            "{name}: {info}"
        );
        let ty = if name.contains("q4_k") { "Q4_K" } else { "F32" };
        let up = if moe {
            "blk.1.ffn_up_exps.weight"
        } else {
            "blk.1.ffn_up.weight"
        };
        let line = info.lines().find(|l| l.trim_start().starts_with(up));
        assert!(
            line.is_some_and(|l| l.split_whitespace().nth(1) == Some(ty)),
            "{name}: {info}"
        );

        let out = run_strata(&[
            "run",
            "-m",
            p,
            "-p",
            "Hello world",
            "-n",
            "6",
            "--temp",
            "0",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(stderr.contains("decode: 6 tokens"), "{name}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_prints_the_expert_layout_of_moe_files() {
    let tiny = tiny_dir().join("qwen3moe-tiny/qwen3moe-tiny-F32.gguf");
    assert!(
        tiny.exists(),
        "{} is missing: run scripts/make_tiny_models.sh",
        tiny.display()
    );
    let info = stdout_of(&["inspect", tiny.to_str().unwrap()]);
    // 4 layers of 8 experts, FFN width 128 over width 256, F32: 3·256·128·4 bytes an expert.
    for want in [
        "experts: 4 of 4 layers routed, 8 experts per layer, 2 used per token, expert FFN width 128, shared expert FFN width none",
        "  0-3             8     128  F32     F32     F32           393216         3145728  -",
        "routed expert bytes: 12582912 (0.012 GiB, 72.5% of tensor bytes); dense bytes: 4762624",
        // Dense less the embedding table plus one of its rows (1 KiB), plus 2 experts a layer.
        "bytes read per token (one embedding row unless it is the LM head, + 2 experts per layer): 7122944",
    ] {
        assert!(info.contains(want), "missing {want:?} in:\n{info}");
    }

    let dir = temp_dir("synth-inspect");
    let p = synth(
        &dir,
        "next.gguf",
        &[
            "--preset",
            "tiny-qwen3next",
            "--vocab",
            "300",
            "--type",
            "q8_0",
        ],
    );
    let info = stdout_of(&["inspect", p.to_str().unwrap()]);
    // Experts 256 wide over width 256 in Q8_0 (272 bytes a row of 256): 3·256·272.
    for want in [
        "experts: 4 of 4 layers routed, 8 experts per layer, 2 used per token, expert FFN width 256, shared expert FFN width 256",
        "  0-3             8     256  Q8_0    Q8_0    Q8_0          208896         1671168  208896, Q8_0/Q8_0/Q8_0",
    ] {
        assert!(info.contains(want), "missing {want:?} in:\n{info}");
    }
    let dense = stdout_of(&["inspect", smollm2().to_str().unwrap()]);
    assert!(
        !dense.contains("\nexperts:"),
        "a dense model has no expert section"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_seed_gives_the_same_file() {
    let dir = temp_dir("synth-seed");
    let args = [
        "--arch", "qwen3moe", "--vocab", "300", "--layers", "1", "--type", "q4_0",
    ];
    let a = std::fs::read(synth(&dir, "a.gguf", &args)).unwrap();
    let b = std::fs::read(synth(&dir, "b.gguf", &args)).unwrap();
    let mut seeded = args.to_vec();
    seeded.extend(["--seed", "9"]);
    let c = std::fs::read(synth(&dir, "c.gguf", &seeded)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), c.len());
    assert_ne!(a, c);
    let out = run_strata(&[
        "synth",
        "--arch",
        "llama",
        "--vocab",
        "300",
        "-o",
        dir.join("a.gguf").to_str().unwrap(),
    ]);
    assert!(
        !out.status.success(),
        "an existing file is not replaced without --force"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `$STRATA_TINY_DIR` or `~/.cache/strata/tiny` (scripts/make_tiny_models.sh builds it).
fn tiny_dir() -> PathBuf {
    match std::env::var_os("STRATA_TINY_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/strata/tiny")
        }
    }
}

/// Greedy tokens of the engine after `prompt`.
fn strata_greedy(path: &Path, prompt: &[u32], n: usize) -> Vec<u32> {
    let model = strata_engine::Model::load(path).unwrap();
    let mut s = model.new_session(256, strata_engine::KvType::F16);
    let mut logits = model.forward(&mut s, prompt).unwrap().to_vec();
    let mut out = Vec::new();
    for _ in 0..n {
        let tok =
            (0..logits.len()).fold(0, |b, i| if logits[i] > logits[b] { i } else { b }) as u32;
        out.push(tok);
        logits = model.forward(&mut s, &[tok]).unwrap().to_vec();
    }
    out
}

/// scripts/llama_greedy.py's JSON for `path`, or a panic with llama.cpp's reason.
fn llama_greedy(python: &str, path: &Path, prompt: &[u32], n: usize) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/llama_greedy.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(path).arg(n.to_string());
    cmd.args(prompt.iter().map(u32::to_string));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "llama.cpp on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn llama_cpp_loads_synthesized_files_and_agrees_on_f32() {
    let Some(python) = python_with_llama_cpp() else {
        return;
    };
    let dir = temp_dir("synth-llama-cpp");
    let smol = smollm2();
    let prompt = [1u32, 2, 3, 4];
    for (name, args) in tiny_cases(smol.to_str().unwrap()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let path = synth(&dir, &name, &args);
        let ours = strata_greedy(&path, &prompt, 8);
        let theirs = llama_greedy(&python, &path, &prompt, 8);
        let theirs: Vec<u32> = theirs["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect();
        eprintln!("{name}: strata {ours:?}, llama.cpp {theirs:?}");
        assert_eq!(theirs.len(), 8, "{name}");
        if name.contains("f32") {
            assert_eq!(ours, theirs, "{name}: greedy tokens differ from llama.cpp");
        }
    }
    // qwen3next: llama.cpp accepts every key and tensor of the hybrid layout, and the engine
    // loads both files and decodes the F32 one as llama.cpp does.
    for ty in ["f32", "q4_k"] {
        let args = ["--preset", "tiny-qwen3next", "--vocab", "300", "--type", ty];
        let next = synth(&dir, &format!("next-{ty}.gguf"), &args);
        let v = llama_greedy(&python, &next, &prompt, 8);
        assert_eq!(v["n_vocab"], 300);
        let theirs: Vec<u32> = v["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect();
        if let Err(e) = strata_engine::Model::load(&next) {
            panic!("{}: {e}", next.display());
        }
        if ty == "f32" {
            assert_eq!(strata_greedy(&next, &prompt, 8), theirs, "qwen3next {ty}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
