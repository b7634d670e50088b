//! Batch invariance: the logits of a position are bit-identical however the tokens before it
//! were fed — in one call, one token at a time, in calls of random sizes (speculative verify
//! windows of 2–16 tokens, prefill chunks of any size), with a snapshot restored into a fresh
//! session in the middle, with small micro-batches (`--ubatch`), or beside two other sequences
//! in the same forward calls — on every CPU path this machine has (`STRATA_ISA`), for each
//! architecture family (dense, qwen3moe, qwen3next, qwen4exp; real and tiny).
//!
//! Each ISA runs in a child process of this test binary (the ISA is chosen once per process).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::tiny::tiny_dir;
use common::*;
use strata_engine::{KvType, Model, SeqInput, SeqOutput, Want};
use strata_quant::Isa;

/// Set in a child process: run the cases on this process's ISA instead of spawning.
const CHILD_ENV: &str = "STRATA_BATCH_INVARIANCE_CHILD";

/// Tokens of the sequence: more than one prefill chunk of the delta rule and past attention's
/// decode key split (256).
const N_TOKENS: usize = 320;

/// Call sizes that add up to `n`: mostly verify windows (1–16), sometimes a prefill chunk
/// (17–200).
fn random_cuts(seed: u64, n: usize) -> Vec<usize> {
    let mut rng = Rng(seed);
    let mut cuts = Vec::new();
    let mut left = n;
    while left > 0 {
        let size = if rng.below(4) == 0 {
            17 + rng.below(184)
        } else {
            1 + rng.below(16)
        };
        let size = size.min(left);
        cuts.push(size);
        left -= size;
    }
    cuts
}

/// Logits bits `[n][n_vocab]` of every position of `tokens`, fed in calls of `cuts` sizes.
fn logits_fed_as(model: &Model, tokens: &[u32], cuts: &[usize]) -> Vec<u32> {
    let mut session = model.new_session(tokens.len() + 1, KvType::F16);
    let (mut all, mut out, mut at) = (Vec::new(), Vec::new(), 0);
    for &c in cuts {
        model
            .forward_all(&mut session, &tokens[at..at + c], &mut out)
            .unwrap();
        all.extend(out.iter().map(|v| v.to_bits()));
        at += c;
    }
    all
}

/// [`logits_fed_as`], but after the first `at` tokens the session is snapshotted and the rest
/// is fed into a fresh session restored from the snapshot.
fn logits_across_restore(model: &Model, tokens: &[u32], at: usize) -> Vec<u32> {
    let mut first = model.new_session(tokens.len() + 1, KvType::F16);
    let mut out = Vec::new();
    model
        .forward_all(&mut first, &tokens[..at], &mut out)
        .unwrap();
    let mut all: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
    let snap = first.snapshot();
    assert_eq!(snap.pos(), at);
    assert!(snap.size_bytes() > 0);
    // Something else happens to the first session; the snapshot is independent of it.
    first.truncate(1);
    model.forward(&mut first, &tokens[at..at + 3]).unwrap();
    let mut second = model.new_session(tokens.len() + 1, KvType::F16);
    second.restore(&snap).unwrap();
    model
        .forward_all(&mut second, &tokens[at..], &mut out)
        .unwrap();
    all.extend(out.iter().map(|v| v.to_bits()));
    all
}

/// Logits bits of every position of three sequences fed together: each call carries a piece
/// of every unfinished sequence, the pieces cut at random.
fn logits_batched(model: &Model, seqs: &[Vec<u32>], seed: u64) -> Vec<Vec<u32>> {
    let mut sessions: Vec<_> = seqs
        .iter()
        .map(|t| model.new_session(t.len() + 1, KvType::F16))
        .collect();
    let cuts: Vec<Vec<usize>> = (0..seqs.len())
        .map(|i| random_cuts(seed * 10 + i as u64, seqs[i].len()))
        .collect();
    let mut got = vec![Vec::new(); seqs.len()];
    let mut at = vec![0usize; seqs.len()];
    let mut step = 0;
    loop {
        let mut batch = Vec::new();
        let mut which = Vec::new();
        for (i, s) in sessions.iter_mut().enumerate() {
            let Some(&c) = cuts[i].get(step) else {
                continue;
            };
            batch.push(SeqInput {
                session: s,
                tokens: &seqs[i][at[i]..at[i] + c],
                want: Want::All,
                hidden: false,
            });
            which.push(i);
            at[i] += c;
        }
        if batch.is_empty() {
            break;
        }
        let mut out = vec![SeqOutput::default(); batch.len()];
        model.forward_batch(&mut batch, &mut out).unwrap();
        for (o, i) in out.iter().zip(which) {
            got[i].extend(o.logits.iter().map(|v| v.to_bits()));
        }
        step += 1;
    }
    got
}

fn first_difference(want: &[u32], got: &[u32], n_vocab: usize) -> Option<usize> {
    if want.len() != got.len() {
        return Some(want.len().min(got.len()) / n_vocab);
    }
    want.chunks_exact(n_vocab)
        .zip(got.chunks_exact(n_vocab))
        .position(|(a, b)| a != b)
}

fn prompt(model: &Model) -> Vec<u32> {
    let text = std::fs::read_to_string(repo_root().join("tests/data/reference_text.txt")).unwrap();
    let mut tokens = model.tokenizer().encode(&text, true, false);
    assert!(tokens.len() >= N_TOKENS, "reference text is too short");
    tokens.truncate(N_TOKENS);
    tokens
}

/// The cases on this process's ISA: one call against one token at a time, three seeds of
/// random cuts, a snapshot restored in the middle, a micro-batch of 7 tokens, and three
/// sequences batched together.
fn check_model(name: &str, path: &Path) {
    assert!(
        path.exists(),
        "{} is missing: run .ci/run (strata pull, scripts/make_tiny_models.sh) first",
        path.display()
    );
    let model = Model::load(path).unwrap();
    let tokens = prompt(&model);
    let n_vocab = model.config().n_vocab;
    let isa = Isa::best();
    let want = logits_fed_as(&model, &tokens, &[tokens.len()]);
    let mut feeds = vec![("one token at a time".to_string(), vec![1; tokens.len()])];
    for seed in 1..=3 {
        feeds.push((
            format!("random cuts, seed {seed}"),
            random_cuts(seed, tokens.len()),
        ));
    }
    for (how, cuts) in feeds {
        let got = logits_fed_as(&model, &tokens, &cuts);
        if let Some(p) = first_difference(&want, &got, n_vocab) {
            panic!("{name} on {isa}: fed {how} ({cuts:?}), logits of position {p} differ from one call");
        }
    }
    for at in [1, 131, 257] {
        let got = logits_across_restore(&model, &tokens, at);
        if let Some(p) = first_difference(&want, &got, n_vocab) {
            panic!("{name} on {isa}: restored from a snapshot at {at}, position {p} differs");
        }
    }
    model.set_ubatch(7).unwrap();
    let got = logits_fed_as(&model, &tokens, &[tokens.len()]);
    model.set_ubatch(512).unwrap();
    if let Some(p) = first_difference(&want, &got, n_vocab) {
        panic!("{name} on {isa}: --ubatch 7, position {p} differs from --ubatch 512");
    }
    // Three sequences: the text, a later part of it, and a shorter start.
    let seqs = vec![
        tokens.clone(),
        tokens[40..].to_vec(),
        tokens[..100].to_vec(),
    ];
    let alone: Vec<Vec<u32>> = seqs
        .iter()
        .map(|t| logits_fed_as(&model, t, &[t.len()]))
        .collect();
    for seed in 1..=2 {
        for (i, got) in logits_batched(&model, &seqs, seed).iter().enumerate() {
            if let Some(p) = first_difference(&alone[i], got, n_vocab) {
                panic!("{name} on {isa}: sequence {i} batched with two others (seed {seed}), position {p} differs from alone");
            }
        }
    }
}

/// Which paths a test runs on.
#[derive(Clone, Copy, PartialEq)]
enum Paths {
    /// Every ISA this CPU has, the scalar reference included.
    All,
    /// The SIMD paths: a real model on the scalar path takes minutes (the tiny models cover it).
    Simd,
}

/// Runs `test` (this binary's test of that name) once per ISA this CPU has, each in a child
/// process with `STRATA_ISA` set; in a child, runs `body` instead.
fn on_every_isa(test: &str, paths: Paths, body: impl FnOnce()) {
    if std::env::var_os(CHILD_ENV).is_some() {
        return body();
    }
    let exe = std::env::current_exe().unwrap();
    let (mut ran, mut not_run) = (Vec::new(), Vec::new());
    for isa in Isa::ALL {
        if !isa.is_available() {
            not_run.push(format!("{} (this CPU lacks it)", isa.name()));
            continue;
        }
        if isa == Isa::Scalar && paths == Paths::Simd {
            not_run.push("scalar (too slow for a real model; the tiny models run it)".into());
            continue;
        }
        let out = Command::new(&exe)
            .args([test, "--exact", "--nocapture", "--test-threads", "1"])
            .env(CHILD_ENV, "1")
            .env(strata_quant::ISA_ENV, isa.name())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{test} on {}:\n{}{}",
            isa.name(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran.push(isa.name());
    }
    println!(
        "{test}: ran on {}; not run: {}",
        ran.join(", "),
        not_run.join(", ")
    );
}

fn tiny(name: &str, ty: &str) -> PathBuf {
    tiny_dir().join(format!("{name}/{name}-{ty}.gguf"))
}

#[test]
fn logits_independent_of_feeding_smollm2() {
    on_every_isa("logits_independent_of_feeding_smollm2", Paths::Simd, || {
        check_model("smollm2-135m", &model_path("smollm2-135m"))
    });
}

#[test]
fn logits_independent_of_feeding_qwen25() {
    on_every_isa("logits_independent_of_feeding_qwen25", Paths::Simd, || {
        check_model("qwen2.5-coder-0.5b", &model_path("qwen2.5-coder-0.5b"))
    });
}

#[test]
fn logits_independent_of_feeding_gemma3() {
    on_every_isa("logits_independent_of_feeding_gemma3", Paths::Simd, || {
        check_model("gemma3-270m", &model_path("gemma3-270m"))
    });
}

#[test]
fn logits_independent_of_feeding_tiny_qwen3moe() {
    on_every_isa(
        "logits_independent_of_feeding_tiny_qwen3moe",
        Paths::All,
        || {
            for ty in ["F32", "Q4_K_M"] {
                check_model("qwen3moe-tiny", &tiny("qwen3moe-tiny", ty));
            }
        },
    );
}

#[test]
fn logits_independent_of_feeding_tiny_qwen3next() {
    on_every_isa(
        "logits_independent_of_feeding_tiny_qwen3next",
        Paths::All,
        || {
            for ty in ["F32", "Q4_K_M"] {
                check_model("qwen3next-tiny", &tiny("qwen3next-tiny", ty));
            }
        },
    );
}

#[test]
fn logits_independent_of_feeding_tiny_gemma3() {
    on_every_isa(
        "logits_independent_of_feeding_tiny_gemma3",
        Paths::All,
        || check_model("gemma3-tiny", &tiny("gemma3-tiny", "Q4_K_M")),
    );
}

/// qwen4exp: the PLE n-gram window and dilated convolution history, the indexer keys of QSA
/// (320 tokens: far past the 16-token budget, so queries drop blocks) and the hyper-connection
/// streams, in all three tiny variants.
#[test]
fn logits_independent_of_feeding_tiny_qwen4exp() {
    on_every_isa(
        "logits_independent_of_feeding_tiny_qwen4exp",
        Paths::All,
        || {
            let test = "logits_independent_of_feeding_tiny_qwen4exp";
            for (variant, ty) in [
                ("qwen4exp-tiny", "F32"),
                ("qwen4exp-tiny", "Q4_K_M"),
                ("qwen4exp-tiny-nople", "F32"),
                ("qwen4exp-tiny-noidx", "F32"),
            ] {
                if let Some(path) = common::qwen4exp::gguf(variant, ty, test) {
                    check_model(variant, &path);
                }
            }
        },
    );
}
