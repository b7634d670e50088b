//! The decoder family: llama, qwen2, qwen3, gemma3 and qwen3moe share one layer whose optional
//! parts (q/k/v biases, q/k norms, sandwich norms, windowed layers, GeGLU, routed experts)
//! are present exactly when the architecture has them. Hyper-parameters here, tensors in
//! `weights.rs`, the forward pass in `graph.rs`.

pub mod graph;
pub mod weights;

use strata_gguf::Metadata;

use super::source::TensorSource;
use super::{Architecture, Graph};
use crate::config::{moe_config, Arch, ModelConfig};
use crate::error::EngineError;
use crate::ops::rope::{Rope, RopeStyle};
use weights::Weights;

/// The dense decoder family (and qwen3moe, whose FFN is routed experts).
pub struct Dense;

impl Architecture for Dense {
    fn names(&self) -> &'static [&'static str] {
        &["llama", "qwen2", "qwen3", "gemma3", "qwen3moe"]
    }

    fn configure(&self, meta: &Metadata, cfg: &mut ModelConfig) -> Result<(), EngineError> {
        cfg.require_n_ff(meta)?;
        let a = cfg.arch.name();
        let key = |k: &str| format!("{a}.{k}");
        if cfg.arch == Arch::Llama {
            // The GGUF converter permutes llama's q/k rows for adjacent-pair rotation.
            cfg.rope.style = RopeStyle::Normal;
            cfg.rope_swa = cfg.rope;
        }
        if cfg.arch == Arch::Qwen3Moe {
            cfg.moe = Some(moe_config(meta, a, cfg.n_ff)?);
        }
        if cfg.arch != Arch::Gemma3 {
            return Ok(());
        }
        cfg.embd_scale = (cfg.n_embd as f32).sqrt();
        cfg.final_logit_softcap = meta
            .opt_f32(&key("final_logit_softcapping"))?
            .filter(|c| *c != 0.0);
        if let Some(w) = meta
            .opt_u64(&key("attention.sliding_window"))?
            .filter(|w| *w > 0)
        {
            cfg.sliding_window = Some(w as usize);
            // Every `pattern`-th layer is global, the rest windowed (llama.cpp default 6).
            let pattern = meta
                .opt_u64(&key("attention.sliding_window_pattern"))
                .ok()
                .flatten()
                .unwrap_or(6);
            for (il, s) in cfg.swa_layers.iter_mut().enumerate() {
                *s = pattern == 0 || (il as u64 % pattern) < pattern - 1;
            }
            let base_swa = meta.opt_f32(&key("rope.freq_base_swa"))?.unwrap_or(10000.0);
            cfg.rope_swa = Rope {
                freq_base: base_swa,
                freq_scale: 1.0,
                ..cfg.rope
            };
        }
        // gemma_pytorch: query scaled by 1/√query_pre_attn_scalar, = head_dim except at 27B.
        if cfg.n_layer == 62 {
            cfg.attn_scale = 1.0 / ((cfg.n_embd / cfg.n_head) as f32).sqrt();
        }
        Ok(())
    }

    fn load(&self, src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Graph, EngineError> {
        Ok(Graph::Dense(Weights::load(src, cfg)?))
    }
}
