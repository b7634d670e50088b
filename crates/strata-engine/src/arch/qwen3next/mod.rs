//! Qwen3-Next (`qwen3next`): Gated DeltaNet and gated full-attention layers, routed experts
//! plus a gated shared expert. Hyper-parameters here (the `ssm.*` keys and the layer pattern in
//! `config/ssm.rs`), tensors in `weights.rs`, the forward pass in `graph.rs` with its two
//! mixers. State layout: attention layers keep KV, DeltaNet layers keep conv + delta-rule state
//! ([`crate::config::SsmConfig::recurrent`]).

mod gated_attention;
mod gated_delta_net;
pub mod graph;
pub mod shared_expert;
pub mod weights;

use strata_gguf::Metadata;

use super::source::TensorSource;
use super::{Architecture, Graph};
use crate::config::{moe_config, ModelConfig, SsmConfig};
use crate::error::EngineError;
pub use graph::HybridScratch;
use weights::HybridWeights;

/// Qwen3-Next.
pub struct Qwen3Next;

impl Architecture for Qwen3Next {
    fn names(&self) -> &'static [&'static str] {
        &["qwen3next"]
    }

    fn configure(&self, meta: &Metadata, cfg: &mut ModelConfig) -> Result<(), EngineError> {
        cfg.require_n_ff(meta)?;
        let a = cfg.arch.name();
        cfg.moe = Some(moe_config(meta, a, cfg.n_ff)?);
        cfg.ssm = Some(SsmConfig::from_metadata(meta, a, cfg.n_layer)?);
        Ok(())
    }

    fn load(&self, src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Graph, EngineError> {
        Ok(Graph::Qwen3Next(HybridWeights::load(src, cfg)?))
    }
}
