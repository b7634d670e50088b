//! Strata against llama.cpp (through llama-cpp-python, run live in a child Python) on the tiny
//! qwen4exp F32 files of scripts/make_tiny_qwen4exp.sh, at the positions where llama.cpp agrees
//! with transformers (docs/qwen4exp.md, "Where transformers 5.23 and llama.cpp's qwen4exp.cpp
//! disagree", item 1):
//! - `qwen4exp-tiny-noidx` (no QSA): every position of the three `ref/` prompts;
//! - `qwen4exp-tiny` (QSA, ratio r = 4, budget 16): positions <= 18 (= budget + r - 2, where
//!   QSA is still dense) and later positions whose tail is exactly r - 1 = 3 tokens, where
//!   llama.cpp's extra cells are none. At two of those (prompt 2, positions 22 and 38)
//!   llama.cpp still differs from transformers, by 0.09 and 0.37: there the block scores tie
//!   at the budget boundary, all at exactly 0 after the ReLU (position 22: the 4th and 5th of
//!   5 blocks score 0 for 4 slots; position 38: 7 of 9 blocks score 0 for the last 2 slots;
//!   transformers 5.23 scores, measured), so which tied block is read is up to each top-k
//!   (llama.cpp's is per cell and may even mix cells of tied blocks). Hence a tail-3 position
//!   is compared only where llama.cpp is within [`LLAMA_VS_HF`] of transformers' `ref/` logits,
//!   and at most [`MAX_TAIL3_SKIPPED`] per file may be left out that way.
//!
//! Bounds on every compared position: every logit within [`TOL`] of llama.cpp's, and the same
//! top-1. Both sides use an f32 KV cache (llama.cpp `type_k = type_v = F32`, Strata
//! `KvType::F32`), one batch per prompt.
//!
//! A missing file, Python or llama-cpp-python fails under CI (`CI=true`) and is reported
//! "not run" elsewhere. The Python is `$STRATA_PYTHON` or `python3`.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use common::npy;
use common::qwen4exp::{gguf, require, variant_dir};
use strata_engine::sampling::argmax_logits;
use strata_engine::{KvType, Model};

/// Max |Δlogit| between Strata and llama.cpp at a compared position.
const TOL: f32 = 2e-3;
/// A tail-3 position of the QSA file counts as "llama.cpp agrees with transformers" within this.
const LLAMA_VS_HF: f32 = 1e-3;
/// Tail-3 positions of the QSA file that may be left out (measured: 2).
const MAX_TAIL3_SKIPPED: usize = 2;
/// QSA compress ratio and budget of `qwen4exp-tiny`.
const R: usize = 4;
const BUDGET: usize = 16;

/// Reads `{"model", "n_ctx", "prompts"}` on stdin; writes one JSON header line, then every
/// prompt's logits of every position as f32 little-endian. Exit 3: llama_cpp is missing.
const PY: &str = r#"
import json, os, sys
req = json.load(sys.stdin)
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr
try:
    import llama_cpp
    import numpy as np
except ImportError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
n_ctx = int(req["n_ctx"])
llm = llama_cpp.Llama(model_path=req["model"], n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                      n_threads=2, logits_all=True, verbose=False, seed=0,
                      type_k=0, type_v=0)
out.write((json.dumps({"n_vocab": llm.n_vocab(), "version": llama_cpp.__version__}) + "\n").encode())
for toks in req["prompts"]:
    llm.reset()
    llm.eval(toks)
    out.write(np.ascontiguousarray(llm.scores[: len(toks)], dtype="<f4").tobytes())
out.flush()
"#;

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A panic under CI, else "not run" on stderr.
fn not_run(test: &str, why: &str) {
    if under_ci() {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: not run: {why}");
}

/// llama.cpp's logits of every position of every prompt, or `None` (see [`not_run`]).
fn llama_cpp_logits(
    test: &str,
    model: &std::path::Path,
    prompts: &[Vec<u32>],
) -> Option<Vec<Vec<f32>>> {
    let python = std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".into());
    let n_ctx = prompts.iter().map(Vec::len).max().unwrap().max(16);
    let req = serde_json::json!({"model": model, "n_ctx": n_ctx, "prompts": prompts});
    let child = Command::new(&python)
        .args(["-c", PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            not_run(test, &format!("cannot start {python}: {e}"));
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    if status.code() == Some(3) {
        not_run(
            test,
            &format!("{python} has no llama_cpp (pip install llama-cpp-python numpy): {err}"),
        );
        return None;
    }
    assert!(status.success(), "{test}: llama.cpp helper failed: {err}");
    let nl = out.iter().position(|b| *b == b'\n').unwrap();
    let header: serde_json::Value = serde_json::from_slice(&out[..nl]).unwrap();
    let nv = header["n_vocab"].as_u64().unwrap() as usize;
    let mut floats = out[nl + 1..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
    let rows: Vec<Vec<f32>> = prompts
        .iter()
        .map(|p| floats.by_ref().take(p.len() * nv).collect())
        .collect();
    assert!(
        floats.next().is_none(),
        "{test}: extra logits from llama.cpp"
    );
    for (r, p) in rows.iter().zip(prompts) {
        assert_eq!(r.len(), p.len() * nv, "{test}: short llama.cpp output");
    }
    eprintln!("{test}: llama-cpp-python {}", header["version"]);
    Some(rows)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn check(variant: &str, qsa: bool) {
    let test = format!("{variant} F32 vs llama.cpp");
    let Some(path) = gguf(variant, "F32", &test) else {
        return;
    };
    let dir = variant_dir(variant).join("ref");
    let (mut prompts, mut hf) = (Vec::new(), Vec::new());
    for i in 0..3 {
        let Some(t) = require(dir.join(format!("prompt{i}.tokens.npy")), &test) else {
            return;
        };
        let Some(l) = require(dir.join(format!("prompt{i}.logits.npy")), &test) else {
            return;
        };
        prompts.push(
            npy::i32s(&t)
                .data
                .iter()
                .map(|x| *x as u32)
                .collect::<Vec<_>>(),
        );
        hf.push(npy::f32s(&l).data);
    }
    let Some(llama) = llama_cpp_logits(&test, &path, &prompts) else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let nv = model.config().n_vocab;
    let mut skipped = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let mut s = model.new_session(256, KvType::F32);
        let mut ours = Vec::new();
        model.forward_all(&mut s, p, &mut ours).unwrap();
        assert_eq!(ours.len(), p.len() * nv);
        let (mut worst, mut compared) = ((0.0f32, 0usize), 0usize);
        for pos in 0..p.len() {
            let row = pos * nv..(pos + 1) * nv;
            let (o, l) = (&ours[row.clone()], &llama[i][row.clone()]);
            if qsa && pos > BUDGET + R - 2 {
                if (pos + 1) % R != R - 1 {
                    continue;
                }
                let d_hf = max_abs_diff(l, &hf[i][row]);
                if d_hf > LLAMA_VS_HF {
                    skipped.push(format!(
                        "prompt{i} position {pos} (llama.cpp vs transformers {d_hf:.2e})"
                    ));
                    continue;
                }
            }
            compared += 1;
            let d = max_abs_diff(o, l);
            if d > worst.0 {
                worst = (d, pos);
            }
            assert_eq!(
                argmax_logits(o),
                argmax_logits(l),
                "{test} prompt{i} position {pos}: top-1 differs"
            );
        }
        eprintln!(
            "{test} prompt{i} ({} tokens): {compared} positions compared, max |Δlogit| {:.2e} (position {}), same top-1",
            p.len(),
            worst.0,
            worst.1
        );
        assert!(
            worst.0 <= TOL,
            "{test} prompt{i}: position {} differs by {} (bound {TOL})",
            worst.1,
            worst.0
        );
    }
    eprintln!("{test}: tail-3 positions left out: {skipped:?}");
    assert!(
        skipped.len() <= MAX_TAIL3_SKIPPED,
        "{test}: llama.cpp departs from transformers at {} tail-3 positions: {skipped:?}",
        skipped.len()
    );
}

#[test]
fn logits_match_llama_cpp_qwen4exp_tiny_noidx_f32() {
    check("qwen4exp-tiny-noidx", false);
}

#[test]
fn logits_match_llama_cpp_qwen4exp_tiny_f32_where_llama_cpp_matches_transformers() {
    check("qwen4exp-tiny", true);
}
