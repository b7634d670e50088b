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

/// The cut of the real qwen4exp preset the tests write: 4 layers (3 DeltaNet with PLE on
/// layer 1, 1 QSA attention layer) at the real widths, 4 experts instead of 512, a byte
/// vocabulary of 1024 and a PLE table from primes >= 1000 (16 heads: 16,256 rows instead of
/// 320 M), Q4_0: about 250 MB.
const FLASH_NEXT_CUT: [&str; 14] = [
    "--preset",
    "qwen3.8-flash-next",
    "--layers",
    "4",
    "--experts",
    "4",
    "--experts-used",
    "2",
    "--vocab",
    "1024",
    "--ple-vocab-base",
    "1000",
    "--type",
    "q4_0",
];

/// `strata inspect`'s type of tensor `name`.
fn type_of<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
}

#[test]
fn synthesized_tiny_qwen4exp_is_loaded_and_run() {
    let dir = temp_dir("synth-q4e");
    for ty in ["f32", "q4_k_m"] {
        let args = ["--preset", "tiny-qwen4exp", "--vocab", "512", "--type", ty];
        let path = synth(&dir, &format!("q4e-{ty}.gguf"), &args);
        let p = path.to_str().unwrap();
        let info = stdout_of(&["inspect", p]);
        for want in [
            "qwen4exp.hyper_connection.count",
            "qwen4exp.attention.indexer.top_k",
            "qwen4exp.ple.layer_multipliers",
            "qwen4exp.ple.head_vocab_sizes",
            "\nexperts: 4 of 4 layers routed (+ 1 MTP draft layer), 8 experts per layer",
            "  MTP draft layer bytes: ",
        ] {
            assert!(info.contains(want), "{ty}: missing {want:?} in\n{info}");
        }
        // The 64-wide table rows are not whole Q4_K blocks: Q5_0, as llama-quantize falls back.
        let (table, indexer) = match ty {
            "f32" => ("F32", "F32"),
            _ => ("Q5_0", "F32"),
        };
        assert_eq!(
            type_of(&info, "per_layer_token_embd.weight"),
            Some(table),
            "{info}"
        );
        assert_eq!(
            type_of(&info, "blk.3.indexer.q_proj.weight"),
            Some(indexer),
            "{info}"
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
        assert!(out.status.success(), "{ty}: {stderr}");
        assert!(stderr.contains("decode: 6 tokens"), "{ty}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn qwen3_8_flash_next_is_planned_at_the_real_shape_and_a_cut_runs() {
    // The whole model only as a plan: 177 B parameters, the 28.8 GB table in Q4_0.
    let dir = temp_dir("synth-flash-next");
    let out = dir.join("full.gguf");
    let plan = stdout_of(&[
        "synth",
        "--preset",
        "qwen3.8-flash-next",
        "--type",
        "q4_0",
        "--dry-run",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!out.exists(), "--dry-run writes nothing");
    for want in [
        "per_layer_token_embd.weight Q4_0 [160, 320001536] 28800138240\n",
        "token_embd.weight Q4_0 [2560, 248320] ",
        "blk.47.ffn_down_exps.weight Q4_0 [640, 2560, 512] ",
        "blk.47.indexer.k_proj.weight Q4_0 [2560, 128] ",
        "blk.1.ple_key.weight Q4_0 [2560, 10240] ",
        // The MTP layer: [fc_embedding | fc_hidden] and a whole QSA attention + MoE layer.
        "blk.48.nextn.eh_proj.weight Q4_0 [5120, 2560] ",
        "blk.48.ffn_up_exps.weight Q4_0 [2560, 640, 512] ",
        "blk.48.indexer.k_proj.weight Q4_0 [2560, 128] ",
        "total 1256 tensors, 179551050368 params, 101227612672 bytes\n",
        // Dense + 10 of 512 experts a layer + 16 table rows of 90 bytes (no MTP layer).
        "bytes read per token: 3978086720\n",
    ] {
        assert!(plan.contains(want), "missing {want:?} in the plan");
    }
    assert!(
        !plan.contains("blk.48.ssm"),
        "the MTP layer is an attention layer"
    );

    let path = synth(&dir, "cut.gguf", &FLASH_NEXT_CUT);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 300 << 20, "{size} bytes");
    let p = path.to_str().unwrap();
    let info = stdout_of(&["inspect", p]);
    for want in [
        "qwen4exp.embedding_length_per_layer_input",
        "\nexperts: 4 of 4 layers routed (+ 1 MTP draft layer), 4 experts per layer, 2 used per token, expert FFN width 640, shared expert FFN width 640",
        // 3 Q4_0 matrices of 2560 x 640 an expert: 3 * 640 * 2560/32 * 18 bytes.
        "  0-3             4     640  Q4_0    Q4_0    Q4_0         2764800        11059200  2764800, Q4_0/Q4_0/Q4_0",
        // 16 heads of primes from 1000 (16,820 rows), padded to 128: rows of 160 in 5 blocks.
        "  PLE n-gram table: 16896 rows x 160, 90 bytes a row, 1520640 bytes",
        "; 16 rows a token",
        " + 2 experts per layer 22118400 + 16 PLE rows 1440 = ",
    ] {
        assert!(info.contains(want), "missing {want:?} in\n{info}");
    }
    let out = run_strata(&[
        "run",
        "-m",
        p,
        "-p",
        "Hello world",
        "-n",
        "3",
        "--temp",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("decode: 3 tokens"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn llama_cpp_loads_synthesized_qwen4exp_and_agrees_on_f32() {
    let Some(python) = python_with_llama_cpp() else {
        return;
    };
    let dir = temp_dir("synth-q4e-llama-cpp");
    // 4 + 8 positions stay under the tiny indexer's budget of 16, where QSA is dense and the
    // two implementations agree (docs/qwen4exp.md, disagreement 1).
    let prompt = [1u32, 2, 3, 4];
    let tokens = |v: &serde_json::Value| -> Vec<u32> {
        let t = v["tokens"].as_array().unwrap();
        t.iter().map(|t| t.as_u64().unwrap() as u32).collect()
    };
    // llama.cpp (as vendored in llama-cpp-python 0.3.36) has no qwen4exp MTP: its converter
    // drops `mtp.*` and its loader would take the MTP layer for a trunk layer, so the files
    // it reads are synthesized without one (--no-mtp).
    for ty in ["f32", "q4_k_m", "iq3_xxs"] {
        let args = [
            "--preset",
            "tiny-qwen4exp",
            "--vocab",
            "512",
            "--no-mtp",
            "--type",
            ty,
        ];
        let path = synth(&dir, &format!("q4e-{ty}.gguf"), &args);
        let theirs = llama_greedy(&python, &path, &prompt, 8);
        assert_eq!(theirs["n_vocab"], 512);
        let ours = strata_greedy(&path, &prompt, 8);
        eprintln!("{ty}: strata {ours:?}, llama.cpp {:?}", tokens(&theirs));
        if ty == "f32" {
            assert_eq!(ours, tokens(&theirs), "tiny-qwen4exp {ty}");
        }
    }
    // The real widths (PLE 16 x 160 = 2560, as llama.cpp requires).
    let cut = synth(
        &dir,
        "cut.gguf",
        &[&FLASH_NEXT_CUT[..], &["--no-mtp"]].concat(),
    );
    let theirs = llama_greedy(&python, &cut, &prompt, 2);
    assert_eq!(theirs["n_vocab"], 1024);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The MTP draft layer of a synthesized file runs as the draft head: the trunk's hidden rows
/// and the next tokens give finite draft logits, deterministic across runs, and the same as
/// drafting the rows one at a time (the draft head keeps its own KV, so a row's logits do not
/// depend on how the rows are fed). Without the layer (`--no-mtp`) drafting is an error.
#[test]
fn synthesized_qwen4exp_mtp_layer_drafts() {
    use strata_engine::{EngineError, KvType, Model, SeqInput, SeqOutput, Want};
    let dir = temp_dir("synth-q4e-mtp");
    let base = ["--preset", "tiny-qwen4exp", "--vocab", "512", "--type"];
    let tokens: Vec<u32> = (1..=12).map(|i| i * 37 % 512).collect();
    for ty in ["f32", "iq3_xxs"] {
        let mut args = base.to_vec();
        args.push(ty);
        let path = synth(&dir, &format!("q4e-{ty}.gguf"), &args);
        let model = Model::load(&path).unwrap();
        let (nv, width) = (model.config().n_vocab, model.config().residual_width());
        assert_eq!(model.config().n_mtp, 1, "{ty}");
        let draft = |rows_at_once: usize| -> Vec<f32> {
            let mut s = model.new_session(64, KvType::F32);
            let mut out = [SeqOutput::default()];
            let mut batch = [SeqInput {
                session: &mut s,
                tokens: &tokens,
                want: Want::All,
                hidden: true,
            }];
            model.forward_batch(&mut batch, &mut out).unwrap();
            let hidden = &out[0].hidden;
            let t = tokens.len() - 1;
            let mut logits = Vec::new();
            for p in (0..t).step_by(rows_at_once) {
                let n = rows_at_once.min(t - p);
                let mut d = SeqOutput::default();
                model
                    .mtp_draft(
                        &mut s,
                        p,
                        &hidden[p * width..(p + n) * width],
                        &tokens[p + 1..p + 1 + n],
                        &mut d,
                    )
                    .unwrap();
                logits.extend_from_slice(&d.logits);
            }
            logits
        };
        let all = draft(tokens.len());
        assert_eq!(all.len(), (tokens.len() - 1) * nv, "{ty}");
        assert!(
            all.iter().all(|x| x.is_finite()),
            "{ty}: finite draft logits"
        );
        assert!(all.iter().any(|x| *x != 0.0), "{ty}: nonzero draft logits");
        assert_eq!(all, draft(tokens.len()), "{ty}: deterministic");
        assert_eq!(
            all,
            draft(1),
            "{ty}: row by row = all rows at once, bit for bit"
        );
    }
    let path = synth(
        &dir,
        "q4e-nomtp.gguf",
        &[&base[..], &["f32", "--no-mtp"]].concat(),
    );
    let model = Model::load(&path).unwrap();
    let mut s = model.new_session(64, KvType::F32);
    let hidden = vec![0f32; model.config().residual_width()];
    let e = model.mtp_draft(&mut s, 0, &hidden, &[1], &mut SeqOutput::default());
    assert!(matches!(e, Err(EngineError::NoMtp)), "{:?}", e.err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `strata inspect`'s (name, type) of every tensor, sorted.
fn types_of(path: &Path) -> Vec<(String, String)> {
    let info = stdout_of(&["inspect", path.to_str().unwrap()]);
    let mut v: Vec<(String, String)> = info
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with('['))
        })
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap().into(), f.next().unwrap().into())
        })
        .collect();
    v.sort();
    v
}

/// synth's IQ3_XXS, IQ2_XS and Q4_K_M mixes give every tensor the type llama.cpp's quantizer
/// (scripts/llama_quantize.py, with an importance matrix) gives it when it quantizes the
/// synthesized F32 file of the same shape: the tiny shape (8 experts, which llama.cpp treats
/// specially) and an 8-layer one with 16 experts and 8 query heads per KV head (the real
/// model's branches: n_gqa >= 4, the first eighth of the ffn_down tensors).
#[test]
fn synth_mixes_choose_llama_quantize_types() {
    let Some(python) = python_with_llama_cpp() else {
        return;
    };
    let dir = temp_dir("synth-mixes");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/llama_quantize.py"
    );
    let shapes: [&[&str]; 2] = [
        &[],
        &[
            "--layers",
            "8",
            "--experts",
            "16",
            "--heads",
            "8",
            "--kv-heads",
            "1",
        ],
    ];
    for (k, extra) in shapes.iter().enumerate() {
        let base = [
            &["--preset", "tiny-qwen4exp", "--vocab", "512", "--no-mtp"],
            *extra,
        ]
        .concat();
        let f32 = synth(
            &dir,
            &format!("s{k}-f32.gguf"),
            &[&base[..], &["--type", "f32"]].concat(),
        );
        for (mix, ftype) in [("iq2_xs", 20), ("iq3_xxs", 23), ("q4_k_m", 15)] {
            let ours = synth(
                &dir,
                &format!("s{k}-{mix}.gguf"),
                &[&base[..], &["--type", mix]].concat(),
            );
            let theirs = dir.join(format!("s{k}-{mix}-llama.gguf"));
            let out = Command::new(&python)
                .arg(script)
                .arg(&f32)
                .arg(&theirs)
                .arg(ftype.to_string())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let (a, b) = (types_of(&ours), types_of(&theirs));
            assert_eq!(a.len(), b.len(), "shape {k} {mix}: tensor count");
            let differ: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
            assert!(
                differ.is_empty(),
                "shape {k} {mix}: (synth, llama-quantize) {differ:?}"
            );
            // And the mixed file runs.
            let out = run_strata(&[
                "run",
                "-m",
                ours.to_str().unwrap(),
                "-p",
                "Hi",
                "-n",
                "2",
                "--temp",
                "0",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
