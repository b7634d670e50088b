//! The backend keeps one batch open across the ops of a forward and waits for the device only
//! where the host reads device data: one decode step of a tiny dense model and of
//! qwen3next-tiny counts its queue submissions (`Device::submissions`, each followed by a
//! fence wait) and holds them to a bound derived from those read-backs. Before the batch,
//! every op submitted and waited (a few hundred per step for these models).

mod common;

use std::path::PathBuf;

use strata_engine::backend::OnDevice;
use strata_engine::config::ModelConfig;
use strata_engine::{KvType, Model};
use strata_vulkan::Vulkan;

fn tiny(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("STRATA_TINY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/strata/tiny")
        });
    let p = dir.join(name).join(format!("{name}-F32.gguf"));
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing: run scripts/make_tiny_models.sh",
        p.display()
    );
    eprintln!("skipped: {} is missing", p.display());
    None
}

/// The most submissions one decode step (one token, one sequence, every layer on the
/// device) may take. The host reads device data at:
/// - each attention layer: its new keys and values, for the host KV cache (1);
/// - each MoE layer: the router logits (routed on the host) and the experts' outputs (summed
///   on the host) (2);
/// - the end: the recurrent state written back to the host (`sync_state`) and `finish`
///   after the layers (one wait together), the output row gathered through the host,
///   `finish` after the LM head, and the logits and hidden rows copied out (5).
///
/// The recurrent layers add none: their state stays on the device during the forward.
fn bound(cfg: &ModelConfig) -> usize {
    let recurrent = cfg
        .ssm
        .as_ref()
        .map_or(0, |s| s.recurrent.iter().filter(|r| **r).count());
    let attention = cfg.n_layer - recurrent;
    let moe = if cfg.moe.is_some() { cfg.n_layer } else { 0 };
    attention + 2 * moe + 5
}

/// Submissions of the second decode step of `name` (the first one after the prompt may
/// still upload small vectors at first use).
fn decode_submissions(name: &str) -> Option<(usize, usize)> {
    let path = tiny(name)?;
    let dev = common::device()?;
    let mut m = Model::load(&path).expect("load");
    let vk = Vulkan::on(&dev);
    vk.preload(&m.graph().device_matrices())
        .expect("weights on the device");
    m.set_device(Box::new(OnDevice::new(vk)));
    let tokens = m
        .tokenizer()
        .encode("The capital of France is", true, false);
    let mut s = m.new_session(64, KvType::F16);
    m.forward(&mut s, &tokens).expect("prompt");
    m.forward(&mut s, &[tokens[1]]).expect("decode");
    let before = dev.submissions();
    m.forward(&mut s, &[tokens[2]]).expect("decode");
    let n = (dev.submissions() - before) as usize;
    let b = bound(m.config());
    eprintln!(
        "{name}: {n} submissions for one decode step ({} layers; bound {b})",
        m.config().n_layer
    );
    Some((n, b))
}

#[test]
fn dense_decode_step_waits_once_per_layer_and_at_the_output() {
    if let Some((n, b)) = decode_submissions("qwen3-tiny") {
        assert!(n <= b, "{n} submissions, bound {b}");
    }
}

#[test]
fn qwen3next_decode_step_waits_only_for_host_reads() {
    if let Some((n, b)) = decode_submissions("qwen3next-tiny") {
        assert!(n <= b, "{n} submissions, bound {b}");
    }
}
