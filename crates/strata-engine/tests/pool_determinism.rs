//! Greedy output is identical for any pool size: the same prompt forwarded (batched prefill,
//! then token-by-token decode past the attention key split) on pools of 1, 2 and 3 workers
//! gives the same logits bit for bit, on the three real models and the tiny Qwen3-Next
//! checkpoint (chunked then recurrent delta rule, heads split over workers).

mod common;

use std::path::Path;

use common::tiny::tiny_dir;
use common::*;
use strata_engine::pool::{Pool, PoolOptions};
use strata_engine::{KvType, Model};

/// Prefill logits of every position, then the logits of 4 greedy decode steps.
fn logits_on(pool: &Pool, model: &Model, prompt: &[u32]) -> Vec<u32> {
    pool.install(|| {
        let mut session = model.new_session(prompt.len() + 8, KvType::F16);
        let mut all = Vec::new();
        model.forward_all(&mut session, prompt, &mut all).unwrap();
        let n_vocab = model.config().n_vocab;
        let mut next = strata_engine::sampling::argmax_logits(&all[all.len() - n_vocab..]);
        for _ in 0..4 {
            let l = model.forward(&mut session, &[next]).unwrap().to_vec();
            next = strata_engine::sampling::argmax_logits(&l);
            all.extend_from_slice(&l);
        }
        all.iter().map(|v| v.to_bits()).collect()
    })
}

fn same_logits_for_any_pool_size(name: &str, path: &Path) {
    assert!(
        path.exists(),
        "{} is missing: run scripts/make_tiny_models.sh (or .ci/run) first",
        path.display()
    );
    let model = Model::load(path).unwrap();
    let text = std::fs::read_to_string(repo_root().join("tests/data/reference_text.txt")).unwrap();
    let mut prompt = model.tokenizer().encode(&text, true, false);
    // Past the attention key split (256 positions) so decode merges partial softmaxes.
    prompt.truncate(300);
    assert!(prompt.len() > 256, "reference text is too short");
    let pools: Vec<Pool> = (1..=3)
        .map(|n| {
            Pool::new(PoolOptions {
                workers: n,
                ..PoolOptions::default()
            })
        })
        .collect();
    let want = logits_on(&pools[0], &model, &prompt);
    for pool in &pools[1..] {
        let got = logits_on(pool, &model, &prompt);
        let diff = want.iter().zip(&got).filter(|(a, b)| a != b).count();
        assert_eq!(
            diff,
            0,
            "{name}: {} workers change {diff} logits",
            pool.workers()
        );
    }
}

#[test]
fn logits_identical_for_1_2_3_workers_smollm2() {
    same_logits_for_any_pool_size("smollm2-135m", &model_path("smollm2-135m"));
}

#[test]
fn logits_identical_for_1_2_3_workers_gemma3() {
    same_logits_for_any_pool_size("gemma3-270m", &model_path("gemma3-270m"));
}

#[test]
fn logits_identical_for_1_2_3_workers_qwen25() {
    same_logits_for_any_pool_size("qwen2.5-coder-0.5b", &model_path("qwen2.5-coder-0.5b"));
}

#[test]
fn logits_identical_for_1_2_3_workers_qwen3next_tiny() {
    let path = tiny_dir().join("qwen3next-tiny/qwen3next-tiny-F32.gguf");
    same_logits_for_any_pool_size("qwen3next-tiny", &path);
}
