//! Strata against llama.cpp on the three real models (references made by
//! scripts/make_refs.py with llama.cpp from llama-cpp-python; see tests/data/refs/).
//!
//! Teacher-forced over a ≥ 400-token text:
//! - where llama.cpp has a clear winner (top-2 margin ≥ 0.5 logits), our top token is the
//!   same at ≥ 99 % of those positions;
//! - over all positions, same top token at least as often as llama.cpp agrees with itself
//!   (batched vs one token at a time, recorded by the script) minus 2 points;
//! - mean KL(llama.cpp ‖ ours) ≤ max(0.005, 1.25 × llama.cpp's own batched-vs-sequential KL);
//! - perplexity within 1 %.
//!
//! Why not "99 % of all positions": with quantized activations (Q8_0/Q8_1/Q8_K, as ggml
//! uses), any change of float summation order moves logits by ~0.15 and flips near-ties.
//! llama.cpp disagrees with itself at 3–5 % of positions (KL 0.003–0.006) between its own
//! batched and one-token paths on these models; the script measures and records that floor.
//! KL is computed on llama.cpp's top-32 tokens plus one bucket for the rest (a lower bound
//! of the full KL that is tight when the top 32 hold most of the mass).
//!
//! Greedy: on each prompt, every token we choose is within 0.5 logits of llama.cpp's best
//! (fed the same prefix), and tokens agree until llama.cpp's first near-tie (margin < 0.5),
//! where two correct engines may fork.

mod common;

use common::*;
use strata_engine::{KvType, Model};

const NEAR_TIE: f32 = 0.5;

fn teacher_forced(name: &str) {
    let r = load_reference(name);
    let path = model_path(name);
    let model = Model::load(&path).unwrap();
    let text = std::fs::read_to_string(repo_root().join("tests/data/reference_text.txt")).unwrap();
    assert_eq!(
        model.tokenizer().encode(&text, true, false),
        r.text_tokens,
        "tokenization of the text"
    );
    let n_vocab = model.config().n_vocab;
    let mut session = model.new_session(r.text_tokens.len(), KvType::F16);
    let mut logits = Vec::new();
    model
        .forward_all(&mut session, &r.text_tokens, &mut logits)
        .unwrap();

    let n = r.teacher_forced.len();
    assert!(n >= 400, "reference text has only {n} positions");
    let (mut same, mut kl_sum, mut nll_ours, mut nll_ref) = (0usize, 0.0f64, 0.0f64, 0.0f64);
    let (mut clear, mut clear_same) = (0usize, 0usize);
    let mut worst = (0.0f64, 0usize);
    for (i, row) in r.teacher_forced.iter().enumerate() {
        let ours = &logits[i * n_vocab..(i + 1) * n_vocab];
        let lse = log_sum_exp(ours);
        let top = strata_engine::sampling::argmax_logits(ours);
        same += (top == row.ids[0]) as usize;
        if row.logits[0] - row.logits[1] >= NEAR_TIE {
            clear += 1;
            clear_same += (top == row.ids[0]) as usize;
        }
        let (mut kl, mut p_in, mut q_in) = (0.0f64, 0.0f64, 0.0f64);
        for (id, l) in row.ids.iter().zip(&row.logits) {
            let lp = *l as f64 - row.lse;
            let lq = ours[*id as usize] as f64 - lse;
            kl += lp.exp() * (lp - lq);
            p_in += lp.exp();
            q_in += lq.exp();
        }
        let (p_rest, q_rest) = ((1.0 - p_in).max(0.0), (1.0 - q_in).max(1e-12));
        if p_rest > 1e-12 {
            kl += p_rest * (p_rest / q_rest).ln();
        }
        if kl > worst.0 {
            worst = (kl, i);
        }
        kl_sum += kl;
        let next = r.text_tokens[i + 1] as usize;
        nll_ours += lse - ours[next] as f64;
        nll_ref += row.lse - row.next_logit;
    }
    let same_pct = 100.0 * same as f64 / n as f64;
    let clear_pct = 100.0 * clear_same as f64 / clear as f64;
    let kl = kl_sum / n as f64;
    let (ppl_ours, ppl_ref) = ((nll_ours / n as f64).exp(), (nll_ref / n as f64).exp());
    let floor = &r.self_consistency;
    eprintln!(
        "{name}: {n} positions, same top-1 {same_pct:.2}% (llama.cpp vs itself {:.2}%), \
         clear-winner positions {clear_same}/{clear} ({clear_pct:.2}%), mean KL {kl:.6} \
         (llama.cpp vs itself {:.6}; worst {:.4} at {}), ppl ours {ppl_ours:.4} llama.cpp {ppl_ref:.4}",
        100.0 * floor.same_top1,
        floor.mean_kl,
        worst.0,
        worst.1
    );
    assert!(
        clear * 2 >= n,
        "fewer than half the positions have a clear winner: {clear}/{n}"
    );
    assert!(
        clear_pct >= 99.0,
        "same top token at {clear_pct:.2}% of clear-winner positions"
    );
    assert!(
        same_pct >= 100.0 * floor.same_top1 - 2.0,
        "same top token at {same_pct:.2}% of positions, llama.cpp agrees with itself at {:.2}%",
        100.0 * floor.same_top1
    );
    let kl_bound = f64::max(0.005, 1.25 * floor.mean_kl);
    assert!(kl <= kl_bound, "mean KL {kl} > {kl_bound}");
    assert!(
        (ppl_ours / ppl_ref - 1.0).abs() <= 0.01,
        "perplexity {ppl_ours} vs {ppl_ref}"
    );
}

fn greedy(name: &str) {
    let r = load_reference(name);
    let model = Model::load(&model_path(name)).unwrap();
    for case in &r.greedy {
        assert_eq!(
            model.tokenizer().encode(&case.prompt, true, false),
            case.prompt_tokens,
            "{:?}",
            case.prompt
        );
        let mut session = model.new_session(256, KvType::F16);
        let mut logits = model
            .forward(&mut session, &case.prompt_tokens)
            .unwrap()
            .to_vec();
        let mut agreed = 0;
        for (step, reference) in case.steps.iter().enumerate() {
            let ours = strata_engine::sampling::argmax_logits(&logits);
            let best = reference.logits[0];
            let pos = reference.ids.iter().position(|id| *id == ours);
            let ref_logit = pos.map(|p| reference.logits[p]);
            assert!(
                ref_logit.is_some_and(|l| l >= best - NEAR_TIE),
                "{name} {:?} step {step}: we chose {ours}, llama.cpp's best is {} ({best}); ours has {:?} there",
                case.prompt,
                reference.ids[0],
                ref_logit
            );
            if ours != reference.ids[0] {
                // Only reachable at a near-tie: llama.cpp's top two are within NEAR_TIE.
                break;
            }
            agreed = step + 1;
            logits = model.forward(&mut session, &[ours]).unwrap().to_vec();
        }
        let first_tie = case
            .steps
            .iter()
            .position(|s| s.logits[0] - s.logits[1] < NEAR_TIE)
            .unwrap_or(case.steps.len());
        eprintln!(
            "{name} {:?}: {agreed}/{} tokens identical (llama.cpp's first near-tie at {first_tie})",
            case.prompt,
            case.steps.len()
        );
        assert!(
            agreed >= first_tie,
            "diverged at {agreed} before the first near-tie {first_tie}"
        );
    }
}

#[test]
fn reference_files_match_models_and_script() {
    let script = sha256_file(&repo_root().join("scripts/make_refs.py"));
    for (name, file) in MODELS {
        let r = load_reference(name);
        assert_eq!(r.model, name);
        assert_eq!(r.model_file, file);
        assert_eq!(
            r.script_sha256, script,
            "{name}: tests/data/refs was made by another version of scripts/make_refs.py; rerun it"
        );
        assert_eq!(
            sha256_file(&model_path(name)),
            r.model_sha256,
            "{name}: model file differs from the one the reference used"
        );
        assert!(!r.llama_cpp_python_version.is_empty());
    }
}

#[test]
fn teacher_forced_matches_llama_cpp_smollm2() {
    teacher_forced("smollm2-135m");
}

#[test]
fn teacher_forced_matches_llama_cpp_gemma3() {
    teacher_forced("gemma3-270m");
}

#[test]
fn teacher_forced_matches_llama_cpp_qwen25() {
    teacher_forced("qwen2.5-coder-0.5b");
}

#[test]
fn greedy_tokens_match_llama_cpp_smollm2() {
    greedy("smollm2-135m");
}

#[test]
fn greedy_tokens_match_llama_cpp_gemma3() {
    greedy("gemma3-270m");
}

#[test]
fn greedy_tokens_match_llama_cpp_qwen25() {
    greedy("qwen2.5-coder-0.5b");
}
