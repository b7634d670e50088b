//! `offload::plan` on the CPU alone (no device needed): which layers a budget holds, on the
//! tiny Qwen3-Next checkpoint (attention and Gated DeltaNet layers, scripts/make_tiny_models.sh)
//! and SmolLM2-135M (a tied embedding and LM head, counted once).

mod common;

use std::collections::HashSet;

use strata_engine::offload::{kv_layer_bytes, plan};
use strata_engine::KvType;
use strata_engine::Model;

fn load(path: std::path::PathBuf) -> Model {
    assert!(
        path.exists(),
        "{} is missing: run scripts/make_tiny_models.sh (or .ci/run)",
        path.display()
    );
    Model::load(&path).unwrap()
}

/// Bytes of the distinct matrices in `mats`, each (address, length) once.
fn distinct(
    mats: &[&strata_engine::ops::linear::Matrix<'static>],
    seen: &mut HashSet<(usize, usize)>,
) -> u64 {
    mats.iter()
        .filter(|m| seen.insert((m.data.as_ptr() as usize, m.data.len())))
        .map(|m| m.data.len() as u64)
        .sum()
}

#[test]
fn a_budget_holds_the_last_layers_that_fit_and_nothing_less() {
    let model = load(common::tiny::tiny_dir().join("qwen3next-tiny/qwen3next-tiny-F32.gguf"));
    let (graph, cfg) = (model.graph(), model.config());
    let n = cfg.n_layer;
    let n_ctx = 256;
    // The cost of the head and of the last k layers, as the module docs define it.
    let mut seen = HashSet::new();
    let mut cost = vec![distinct(&graph.head_matrices(), &mut seen)];
    for il in (0..n).rev() {
        let mut c = distinct(&graph.layer_matrices(il), &mut seen);
        if il == 0 {
            c += distinct(&graph.embedding_matrices(), &mut seen);
        }
        if !cfg.is_recurrent(il) {
            c += kv_layer_bytes(cfg, n_ctx, KvType::F16);
        }
        cost.push(cost.last().unwrap() + c);
    }
    for (k, &c) in cost.iter().enumerate().skip(1) {
        // Exactly the cost of k layers holds k; one byte less holds k - 1.
        let p = plan(graph, cfg, 99, c, (n_ctx, KvType::F16));
        assert_eq!(p.layers, n - k..n, "budget of {k} layers");
        assert_eq!(p.weight_bytes + p.kv_bytes, c);
        let p = plan(graph, cfg, 99, c - 1, (n_ctx, KvType::F16));
        assert_eq!(p.layers, n - (k - 1)..n, "a byte under {k} layers");
        assert_eq!(p.wanted, n);
    }
    // An f32 cache's mirrors take twice the bytes of an f16 one's.
    let f16 = plan(graph, cfg, 99, u64::MAX, (n_ctx, KvType::F16));
    let f32 = plan(graph, cfg, 99, u64::MAX, (n_ctx, KvType::F32));
    assert!(f16.kv_bytes > 0 && f32.kv_bytes == 2 * f16.kv_bytes);
    // Asking for fewer layers than fit places only those.
    let p = plan(graph, cfg, 1, u64::MAX, (n_ctx, KvType::F16));
    assert_eq!(p.layers, n - 1..n);
    assert_eq!(p.wanted, 1);
    // Below the head and one layer: nothing, and nothing to upload.
    let p = plan(graph, cfg, 99, cost[1] - 1, (n_ctx, KvType::F16));
    assert!(p.is_empty());
    assert!(p.matrices(graph).is_empty());
}

#[test]
fn a_tied_embedding_is_counted_once() {
    let model = load(common::model_path("smollm2-135m"));
    let (graph, cfg) = (model.graph(), model.config());
    let all = plan(graph, cfg, 99, u64::MAX, (0, KvType::F16));
    assert_eq!(all.layers, 0..cfg.n_layer);
    let mats = all.matrices(graph);
    let mut seen = HashSet::new();
    let want = distinct(&mats, &mut seen);
    assert_eq!(all.weight_bytes, want);
    assert!(
        mats.len() > seen.len(),
        "SmolLM2's embedding is its LM head: listed twice"
    );
}
