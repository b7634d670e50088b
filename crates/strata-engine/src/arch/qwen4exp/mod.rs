//! Qwen3.8-Flash-Next (`qwen4exp`): Qwen3-Next's Gated DeltaNet and gated attention layers
//! and routed experts with a gated shared expert, plus hyper-connections (the residual is
//! several streams, read and written by low-rank gated mixers instead of norms and adds),
//! QSA sparse attention (an indexer picks the blocks of tokens a query reads) and PLE n-gram
//! hash embeddings on one layer. docs/qwen4exp.md is the reference.
//!
//! Hyper-parameters here (`configure`), tensors in `weights.rs`, the forward pass in
//! `graph.rs` with its parts: `hyper.rs` (mixers), `gated_delta_net.rs`, `attention.rs`
//! (gated attention with QSA), `ple.rs` and `ngram.rs` (PLE). Sequence state: KV (plus raw
//! indexer keys on QSA layers) on attention layers, conv + delta-rule state on DeltaNet layers,
//! and the PLE n-gram window and convolution history
//! ([`crate::recurrent_state::PleState`]). The MTP draft layer (`blk.<n_layer>.*`, `nextn.*`)
//! of files that have it: weights in `weights.rs` ([`weights::MtpWeights`]), the draft step in
//! `graph.rs` ([`graph::mtp`], behind [`Graph::mtp`]); its KV (and indexer keys) is the
//! session's KV layer after the trunk's attention layers.

mod attention;
mod gated_delta_net;
pub mod graph;
mod hyper;
mod ngram;
mod ple;
pub mod weights;

use strata_gguf::Metadata;

use super::source::TensorSource;
use super::{Architecture, Graph};
use crate::config::{moe_config, HyperConfig, ModelConfig, PleConfig, QsaConfig, SsmConfig};
use crate::error::EngineError;
pub use graph::Qwen4ExpScratch;
use weights::Qwen4ExpWeights;

/// Qwen3.8-Flash-Next.
pub struct Qwen4Exp;

impl Architecture for Qwen4Exp {
    fn names(&self) -> &'static [&'static str] {
        &["qwen4exp"]
    }

    /// Reads the MoE, `ssm.*`, `hyper_connection.*`, `attention.indexer.*` /
    /// `attention.compress_ratios` and `ple.*` keys. RoPE is NeoX on `rope.dimension_count`
    /// dims (for text, the interleaved M-RoPE sections all carry the token position). A file
    /// with `nextn_predict_layers` > 0 gets `n_mtp = 1`: its first MTP layer is loaded.
    fn configure(&self, meta: &Metadata, cfg: &mut ModelConfig) -> Result<(), EngineError> {
        let a = cfg.arch.name();
        cfg.moe = Some(moe_config(meta, a, cfg.n_ff)?);
        let ssm = SsmConfig::from_metadata(meta, a, cfg.n_layer)?;
        let hyper = HyperConfig::from_metadata(meta, a)?;
        if hyper.n_streams < 2 {
            // transformers (Qwen4ExpTextConfig) and llama.cpp refuse it too.
            return Err(EngineError::BadMetadata {
                key: format!("{a}.hyper_connection.count"),
                reason: format!(
                    "{} stream: hyper-connections need at least 2",
                    hyper.n_streams
                ),
            });
        }
        // The MTP layer (`nextn_predict_layers`; the real model has one, reused for every draft
        // step): one is run, more are not.
        let nextn = meta
            .opt_u64(&format!("{a}.nextn_predict_layers"))?
            .map_or(0, |v| v as usize);
        if nextn > 1 {
            tracing::warn!("{nextn} MTP layers: only the first one is loaded and run");
        }
        cfg.n_mtp = nextn.min(1);
        cfg.qsa = QsaConfig::from_metadata(meta, a, &ssm.recurrent, cfg.rope.n_rot, cfg.n_mtp)?;
        cfg.ple = PleConfig::from_metadata(meta, a, cfg.n_layer, cfg.n_vocab)?;
        if let Some(p) = cfg.ple.as_ref().filter(|p| !ssm.recurrent[p.layer]) {
            // transformers (validate_architecture) and llama.cpp refuse it too.
            return Err(EngineError::BadMetadata {
                key: format!("{a}.ple.layers"),
                reason: format!("PLE layer {} is not a linear-attention layer", p.layer),
            });
        }
        cfg.ssm = Some(ssm);
        cfg.hyper = Some(hyper);
        Ok(())
    }

    fn load(&self, src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Graph, EngineError> {
        Ok(Graph::Qwen4Exp(Box::new(Qwen4ExpWeights::load(src, cfg)?)))
    }
}
