//! Strata against transformers 5.23 (`Qwen4ExpForCausalLM`, float32, eager attention, no
//! cache) on the tiny random qwen4exp checkpoints of scripts/make_tiny_qwen4exp.sh: three
//! variants (PLE + QSA, QSA only, PLE only), three prompts each (7 tokens; 20 with an EOS at 9;
//! 64 with an EOS at 40, past the QSA budget of 16 tokens + a 3-token tail, so blocks are
//! dropped). Every prompt is teacher-forced in one call and every position's logits are
//! compared with transformers' (`ref/promptI.logits.npy`); then 16 greedy tokens are decoded
//! one at a time against `ref/promptI.greedy16.npy`.
//!
//! Bounds: F32 max |Δlogit| ≤ 1e-3 over every logit of every position, and the greedy tokens
//! identical. Other types: the same top-1 as transformers at every position whose reference
//! top-2 margin exceeds 0.5 (all of them for F16, BF16 and Q8_0; at least 90 % for Q4_K_M,
//! 4-bit weights on 256-wide rows), greedy agreement reported. The KV cache is f32.
//!
//! A missing checkpoint fails under CI (`CI=true`) and is reported "not run" elsewhere.

mod common;

use common::npy;
use common::qwen4exp::{gguf, require, variant_dir};
use strata_engine::sampling::argmax_logits;
use strata_engine::{KvType, Model};

/// A reference position's top-1 counts only when its top-2 margin exceeds this.
const NEAR_TIE: f32 = 0.5;

/// One prompt of `ref/`: its tokens, transformers' logits `[T][n_vocab]` and greedy tokens.
struct Prompt {
    tokens: Vec<u32>,
    logits: Vec<f32>,
    greedy: Vec<u32>,
}

fn prompts(variant: &str, test: &str) -> Option<Vec<Prompt>> {
    let dir = variant_dir(variant).join("ref");
    let mut out = Vec::new();
    for i in 0..3 {
        let p = |what: &str| dir.join(format!("prompt{i}.{what}.npy"));
        let ids = |path: std::path::PathBuf| -> Vec<u32> {
            npy::i32s(&path).data.iter().map(|t| *t as u32).collect()
        };
        let logits = npy::f32s(&require(p("logits"), test)?);
        let tokens = ids(require(p("tokens"), test)?);
        assert_eq!(logits.shape, [tokens.len(), logits.shape[1]]);
        out.push(Prompt {
            tokens,
            logits: logits.data,
            greedy: ids(require(p("greedy16"), test)?),
        });
    }
    Some(out)
}

/// What one file must meet.
#[derive(Clone, Copy)]
enum Bound {
    /// Max |Δlogit| over every logit, and identical greedy tokens.
    Logits(f32),
    /// Share of the clear positions (reference margin > [`NEAR_TIE`]) with the same top-1.
    Top1(f64),
}

fn top2_margin(row: &[f32]) -> f32 {
    let (mut a, mut b) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &x in row {
        if x > a {
            (a, b) = (x, a);
        } else if x > b {
            b = x;
        }
    }
    a - b
}

fn check(variant: &str, ty: &str, bound: Bound) {
    let test = format!("{variant} {ty}");
    let (Some(path), Some(prompts)) = (gguf(variant, ty, &test), prompts(variant, &test)) else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let nv = model.config().n_vocab;
    let (mut same, mut clear) = (0usize, 0usize);
    for (i, p) in prompts.iter().enumerate() {
        let mut s = model.new_session(256, KvType::F32);
        let mut logits = Vec::new();
        model.forward_all(&mut s, &p.tokens, &mut logits).unwrap();
        assert_eq!(logits.len(), p.logits.len());
        let mut worst = (0.0f32, 0);
        for (pos, (ours, want)) in logits
            .chunks_exact(nv)
            .zip(p.logits.chunks_exact(nv))
            .enumerate()
        {
            let d = ours
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            if d > worst.0 {
                worst = (d, pos);
            }
            if top2_margin(want) > NEAR_TIE {
                clear += 1;
                same += usize::from(argmax_logits(ours) == argmax_logits(want));
            }
        }
        // Greedy continuation, one token at a time after the teacher-forced prompt.
        let mut row = logits[logits.len() - nv..].to_vec();
        let mut agreed = 0;
        for want in &p.greedy {
            let t = argmax_logits(&row);
            if t != *want {
                break;
            }
            agreed += 1;
            row = model.forward(&mut s, &[t]).unwrap().to_vec();
        }
        eprintln!(
            "{test} prompt{i} ({} tokens): max |Δlogit| {:.2e} (position {}), greedy {agreed}/{}",
            p.tokens.len(),
            worst.0,
            worst.1,
            p.greedy.len()
        );
        if let Bound::Logits(tol) = bound {
            assert!(
                worst.0 <= tol,
                "{test} prompt{i}: position {} differs by {} (bound {tol})",
                worst.1,
                worst.0
            );
            assert_eq!(
                agreed,
                p.greedy.len(),
                "{test} prompt{i}: greedy tokens differ"
            );
        }
    }
    let rate = same as f64 / clear.max(1) as f64;
    eprintln!("{test}: same top-1 at {same}/{clear} clear positions");
    if let Bound::Top1(min) = bound {
        assert!(rate >= min, "{test}: top-1 agreement {rate:.3} < {min}");
    }
}

#[test]
fn logits_and_greedy_match_transformers_qwen4exp_tiny_f32() {
    check("qwen4exp-tiny", "F32", Bound::Logits(1e-3));
}

#[test]
fn logits_and_greedy_match_transformers_qwen4exp_nople_f32() {
    check("qwen4exp-tiny-nople", "F32", Bound::Logits(1e-3));
}

#[test]
fn logits_and_greedy_match_transformers_qwen4exp_noidx_f32() {
    check("qwen4exp-tiny-noidx", "F32", Bound::Logits(1e-3));
}

#[test]
fn top1_matches_transformers_qwen4exp_f16_bf16_q8_0() {
    for variant in common::qwen4exp::VARIANTS {
        for ty in ["F16", "BF16", "Q8_0"] {
            check(variant, ty, Bound::Top1(1.0));
        }
    }
}

#[test]
fn top1_mostly_matches_transformers_qwen4exp_q4_k_m() {
    for variant in common::qwen4exp::VARIANTS {
        check(variant, "Q4_K_M", Bound::Top1(0.9));
    }
}

/// IQ3_XXS is too coarse for a top-1 bound at this size (docs/qwen4exp.md): the file loads
/// and runs to finite logits.
#[test]
fn iq3_xxs_files_load_and_run() {
    for variant in common::qwen4exp::VARIANTS {
        let Some(path) = gguf(variant, "IQ3_XXS", variant) else {
            continue;
        };
        let model = Model::load(&path).unwrap();
        let mut s = model.new_session(64, KvType::F16);
        let toks: Vec<u32> = (0..40).map(|i| (i * 37 % 700) as u32).collect();
        let logits = model.forward(&mut s, &toks).unwrap();
        assert!(logits.iter().all(|l| l.is_finite()), "{variant} IQ3_XXS");
    }
}

/// Cutting a session back (to its recurrent checkpoint: DeltaNet and PLE state, with the KV
/// and indexer keys cut positionally) and feeding the same tokens again reproduces the
/// logits bit for bit, past the QSA budget and across the prompt's EOS.
#[test]
fn truncate_and_refeed_reproduce_logits_qwen4exp() {
    let test = "truncate_and_refeed_reproduce_logits_qwen4exp";
    for variant in common::qwen4exp::VARIANTS {
        let (Some(path), Some(prompts)) = (gguf(variant, "F32", test), prompts(variant, test))
        else {
            continue;
        };
        let model = Model::load(&path).unwrap();
        let toks = &prompts[2].tokens;
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut s = model.new_session(128, KvType::F16);
        model.forward(&mut s, &toks[..30]).unwrap();
        let at50 = bits(model.forward(&mut s, &toks[30..50]).unwrap());
        let at64 = bits(model.forward(&mut s, &toks[50..]).unwrap());
        s.truncate(55);
        assert_eq!(
            s.pos(),
            50,
            "{variant}: back to the checkpoint after the second call"
        );
        assert_eq!(
            bits(model.forward(&mut s, &toks[50..]).unwrap()),
            at64,
            "{variant}"
        );
        s.truncate(40);
        assert_eq!(s.pos(), 30, "{variant}");
        assert_eq!(
            bits(model.forward(&mut s, &toks[30..50]).unwrap()),
            at50,
            "{variant}"
        );
    }
}
