//! The architecture registry: every supported name resolves, unknown ones are refused with the
//! list, and an architecture's tensor list (its loader run on a recorder) is exactly the set
//! of tensors real files hold, with their shapes — so `strata synth` writes what loads.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::tiny::tiny_dir;
use common::*;
use strata_engine::arch::{self, source::TensorKind};
use strata_engine::config::ModelConfig;
use strata_engine::EngineError;
use strata_gguf::GgufModel;

fn same_tensors_as_file(path: &Path) {
    assert!(
        path.exists(),
        "{} is missing: run .ci/run first",
        path.display()
    );
    let f = GgufModel::open(path).unwrap();
    let cfg = ModelConfig::from_metadata(f.metadata()).unwrap();
    let list = arch::tensor_list(&cfg).unwrap();
    let ours: BTreeMap<String, Vec<u64>> = list
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone()))
        .collect();
    assert_eq!(ours.len(), list.len(), "a tensor is listed twice");
    let mut ours = ours;
    if f.tensor("output.weight").is_none() {
        // Tied embeddings: the LM head is `token_embd` (the list names the untied form).
        ours.remove("output.weight");
    }
    let theirs: BTreeMap<String, Vec<u64>> = f
        .tensors()
        .map(|t| (t.info.name.clone(), t.info.shape.clone()))
        .collect();
    for (name, shape) in &ours {
        let found = theirs.get(name);
        // One-row weights may be stored as [cols] or [cols, 1].
        let same = found == Some(shape)
            || found.is_some_and(|f| f.len() == 2 && f[1] == 1 && f[0] == shape[0]);
        assert!(
            same,
            "{}: {name} listed as {shape:?}, file has {found:?}",
            path.display()
        );
    }
    for name in theirs.keys() {
        assert!(
            ours.contains_key(name),
            "{}: file tensor {name} is not listed",
            path.display()
        );
    }
    assert!(list.iter().any(|t| t.kind == TensorKind::Matrix));
}

#[test]
fn every_supported_name_resolves_and_others_are_refused() {
    for name in arch::supported() {
        assert!(arch::find(name).unwrap().names().contains(&name));
    }
    match arch::find("mamba9") {
        Err(EngineError::UnsupportedArch(name, list)) => {
            assert_eq!(name, "mamba9");
            assert!(
                list.contains("qwen3next") && list.contains("llama"),
                "{list}"
            );
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("mamba9 resolved"),
    }
}

#[test]
fn tensor_lists_match_the_real_models() {
    for (name, _) in MODELS {
        same_tensors_as_file(&model_path(name));
    }
}

#[test]
fn tensor_lists_match_the_tiny_models() {
    for name in [
        "qwen3moe-tiny",
        "qwen3next-tiny",
        "qwen3-tiny",
        "qwen2-tiny",
        "llama-tiny",
        "gemma3-tiny",
    ] {
        same_tensors_as_file(&tiny_dir().join(format!("{name}/{name}-F32.gguf")));
    }
}

/// The qwen4exp tiny files (scripts/make_tiny_qwen4exp.sh; a missing one fails under CI):
/// hyper-connection mixers, indexer tensors (also on the dense `-noidx` layer), the PLE table
/// and layer tensors exactly when the file has PLE; on the `-mtp-` files also the MTP layer
/// (`blk.<n_layer>.nextn.*` and its decoder layer at `blk.<n_layer>`).
#[test]
fn tensor_lists_match_the_tiny_qwen4exp_models() {
    for variant in common::qwen4exp::VARIANTS {
        let test = "tensor_lists_match_the_tiny_qwen4exp_models";
        for ty in ["F32", "mtp-F32"] {
            if let Some(path) = common::qwen4exp::gguf(variant, ty, test) {
                same_tensors_as_file(&path);
            }
        }
    }
}
