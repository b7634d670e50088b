//! Hyper-parameters of a model, read from GGUF metadata (`{arch}.block_count`,
//! `{arch}.attention.head_count`, …; key names from llama.cpp's `src/llama-arch.cpp`): the keys
//! every architecture has are read here, an architecture's own keys by its module
//! ([`crate::arch::Architecture::configure`]). A missing required key is a load error naming
//! the key.

use strata_gguf::Metadata;

use crate::error::EngineError;
use crate::ops::rope::{Rope, RopeStyle};

mod hyper;
mod ple;
mod qsa;
mod ssm;

pub use hyper::HyperConfig;
pub use ple::{PleConfig, PLE_ROW_PADDING};
pub use qsa::QsaConfig;
pub use ssm::SsmConfig;

/// Architectures whose graphs this engine implements (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama 1–3, SmolLM2.
    Llama,
    /// Qwen2 / Qwen2.5: q/k/v biases.
    Qwen2,
    /// Qwen3 dense: per-head q/k RMS norms.
    Qwen3,
    /// Gemma 3: sliding-window layers, sandwich norms, GeGLU, scaled embeddings.
    Gemma3,
    /// Qwen3-MoE: Qwen3 attention, routed SwiGLU experts in every layer.
    Qwen3Moe,
    /// Qwen3-Next: Gated DeltaNet layers and gated full-attention layers, routed experts
    /// plus a gated shared expert in every layer.
    Qwen3Next,
    /// Qwen3.8-Flash-Next: Qwen3-Next's layers with hyper-connection residual streams, QSA
    /// sparse attention and per-layer n-gram hash embeddings (PLE).
    Qwen4Exp,
}

impl Arch {
    /// Parses `general.architecture`.
    pub fn from_name(name: &str) -> Result<Arch, EngineError> {
        match name {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "qwen3" => Ok(Arch::Qwen3),
            "gemma3" => Ok(Arch::Gemma3),
            "qwen3moe" => Ok(Arch::Qwen3Moe),
            "qwen3next" => Ok(Arch::Qwen3Next),
            "qwen4exp" => Ok(Arch::Qwen4Exp),
            other => Err(EngineError::UnsupportedArch(
                other.to_string(),
                crate::arch::supported().join(", "),
            )),
        }
    }

    /// The GGUF key prefix and `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen3Next => "qwen3next",
            Arch::Qwen4Exp => "qwen4exp",
        }
    }
}

/// Routed experts of an MoE architecture (keys from llama.cpp's `llama-arch.cpp`).
#[derive(Clone, Copy, Debug)]
pub struct MoeConfig {
    /// Experts per layer (`{arch}.expert_count`).
    pub n_expert: usize,
    /// Experts each token uses (`{arch}.expert_used_count`).
    pub n_expert_used: usize,
    /// Hidden width of one expert (`{arch}.expert_feed_forward_length`; llama.cpp's fallback
    /// is `n_ff / n_expert_used`; never 0).
    pub n_ff_exp: usize,
    /// Renormalise the top-k weights to sum 1 (`{arch}.expert_weights_norm`; llama.cpp's
    /// qwen3moe graph always does, whatever the file says).
    pub norm_topk: bool,
    /// Hidden width of the shared expert (`{arch}.expert_shared_feed_forward_length`), for
    /// architectures that have one (Qwen3-Next); `None` otherwise.
    pub n_ff_shexp: Option<usize>,
}

/// Shapes and constants of one model.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub arch: Arch,
    pub n_layer: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Key/query head width (`attention.key_length`, default n_embd / n_head).
    pub head_dim: usize,
    /// Hidden width of the feed-forward block (`feed_forward_length`; 0 when the file has
    /// none, which only architectures without a dense FFN accept).
    pub n_ff: usize,
    pub n_vocab: usize,
    /// Training context (`context_length`): the default session size.
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    /// Rotation of full-attention layers.
    pub rope: Rope,
    /// Rotation of sliding-window layers (Gemma 3 uses base 10 000 there).
    pub rope_swa: Rope,
    /// Sliding-window width, if the model has windowed layers.
    pub sliding_window: Option<usize>,
    /// Per layer: true if it is a sliding-window layer.
    pub swa_layers: Vec<bool>,
    /// Multiplier of q·k (1/√head_dim unless the architecture says otherwise).
    pub attn_scale: f32,
    /// Multiplier of the token embedding (√n_embd for Gemma, 1 otherwise).
    pub embd_scale: f32,
    /// `tanh` soft cap of the final logits, if any.
    pub final_logit_softcap: Option<f32>,
    /// Routed experts, for MoE architectures.
    pub moe: Option<MoeConfig>,
    /// Gated DeltaNet shapes and the layer pattern, for hybrid architectures (Qwen3-Next).
    pub ssm: Option<SsmConfig>,
    /// Hyper-connection residual streams (qwen4exp): the residual row is
    /// `n_streams · n_embd` wide.
    pub hyper: Option<HyperConfig>,
    /// QSA sparse attention (qwen4exp files with an indexer).
    pub qsa: Option<QsaConfig>,
    /// Per-layer n-gram hash embeddings (qwen4exp files with PLE).
    pub ple: Option<PleConfig>,
    /// Multi-token-prediction draft layers the graph loads and runs (model layers
    /// `n_layer .. n_layer + n_mtp`, after the trunk): 0 unless the architecture implements
    /// MTP (qwen4exp) and the file has the layer (`nextn_predict_layers`). Each keeps its own
    /// KV cache in the session, after the trunk's attention layers ([`Self::n_kv_layers`]).
    pub n_mtp: usize,
}

impl ModelConfig {
    /// Reads the configuration of an architecture this engine supports.
    ///
    /// Errors: unsupported architecture, a missing required key, or inconsistent shapes.
    pub fn from_metadata(meta: &Metadata) -> Result<ModelConfig, EngineError> {
        let arch = Arch::from_name(meta.str("general.architecture")?)?;
        let a = arch.name();
        let key = |k: &str| format!("{a}.{k}");
        let usize_of = |k: &str| -> Result<usize, EngineError> { Ok(meta.u64(&key(k))? as usize) };
        // block_count includes multi-token-prediction (MTP) draft blocks, which come after the
        // trunk and are not part of the forward pass (llama.cpp `n_layer_all − n_layer_nextn`).
        let n_nextn = meta
            .opt_u64(&key("nextn_predict_layers"))?
            .map_or(0, |v| v as usize);
        let n_layer = usize_of("block_count")?.saturating_sub(n_nextn);
        let n_embd = usize_of("embedding_length")?;
        let n_head = usize_of("attention.head_count")?;
        let n_head_kv = meta
            .opt_u64(&key("attention.head_count_kv"))?
            .map_or(n_head, |v| v as usize);
        // Absent from qwen4exp files (every FFN is routed experts + a shared expert, with
        // their own width keys); the architectures that need it require it (`configure`).
        let n_ff = meta
            .opt_u64(&key("feed_forward_length"))?
            .map_or(0, |v| v as usize);
        if n_layer == 0 || n_embd == 0 || n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(EngineError::BadMetadata {
                key: key("attention.head_count"),
                reason: format!(
                    "inconsistent shape: {n_layer} layers, width {n_embd}, {n_head} heads, {n_head_kv} KV heads"
                ),
            });
        }
        let head_dim = meta
            .opt_u64(&key("attention.key_length"))?
            .map_or(n_embd / n_head, |v| v as usize);
        let n_ctx_train = meta
            .opt_u64(&key("context_length"))?
            .map_or(4096, |v| v as usize);
        let rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        let n_vocab = match meta.opt_u64(&key("vocab_size"))? {
            Some(v) => v as usize,
            None => meta.string_array("tokenizer.ggml.tokens")?.len(),
        };

        // NEOX pairs unless the architecture says otherwise (`configure`).
        let style = RopeStyle::Neox;
        let n_rot = meta
            .opt_u64(&key("rope.dimension_count"))?
            .map_or(head_dim, |v| v as usize);
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(EngineError::BadMetadata {
                key: key("rope.dimension_count"),
                reason: format!("{n_rot} rotated dims for head dim {head_dim}"),
            });
        }
        let freq_base = meta.opt_f32(&key("rope.freq_base"))?.unwrap_or(10000.0);
        let freq_scale = rope_freq_scale(meta, a)?;
        let rope = Rope {
            style,
            n_rot,
            freq_base,
            freq_scale,
        };

        let mut cfg = ModelConfig {
            arch,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx_train,
            rms_eps,
            rope,
            rope_swa: rope,
            sliding_window: None,
            swa_layers: vec![false; n_layer],
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            embd_scale: 1.0,
            final_logit_softcap: None,
            moe: None,
            ssm: None,
            hyper: None,
            qsa: None,
            ple: None,
            n_mtp: 0,
        };
        crate::arch::find(a)?.configure(meta, &mut cfg)?;
        Ok(cfg)
    }
    /// Fails with the missing-key error of `{arch}.feed_forward_length` when the file has no
    /// dense FFN width: for the architectures that need one.
    pub(crate) fn require_n_ff(&self, meta: &Metadata) -> Result<(), EngineError> {
        if self.n_ff == 0 {
            meta.u64(&format!("{}.feed_forward_length", self.arch.name()))?;
        }
        Ok(())
    }

    /// Elements of one position's K (or V) row: `n_head_kv · head_dim`.
    pub fn kv_row(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// True if layer `il` is a recurrent (Gated DeltaNet) layer rather than attention (MTP
    /// layers, `il >= n_layer`, are attention).
    pub fn is_recurrent(&self, il: usize) -> bool {
        self.ssm
            .as_ref()
            .is_some_and(|s| s.recurrent.get(il).copied().unwrap_or(false))
    }

    /// Width of a residual row: `n_embd`, times the stream count with hyper-connections.
    pub fn residual_width(&self) -> usize {
        self.n_embd * self.hyper.map_or(1, |h| h.n_streams)
    }

    /// Per KV layer ([`Self::n_kv_layers`]: the trunk's attention layers, then the MTP
    /// layers), in order: elements of the indexer key cached per position (the indexer head
    /// width on QSA layers, 0 on dense ones).
    pub fn index_key_widths(&self) -> Vec<usize> {
        (0..self.n_layer + self.n_mtp)
            .filter(|il| !self.is_recurrent(*il))
            .map(|il| match &self.qsa {
                Some(q) if q.is_sparse(il) => q.head_dim,
                _ => 0,
            })
            .collect()
    }

    /// Trunk layers that keep keys and values: all of them, less the recurrent ones.
    pub fn n_attn_layers(&self) -> usize {
        self.state_slots(self.n_layer).0
    }

    /// The session slots of layer `il` (`il <= n_layer`): its KV layer if it is an attention
    /// layer and its recurrent state if it is a recurrent one, i.e. the attention and the
    /// recurrent layers before it, `(attn, rec)`. A forward starting at `il` counts from here.
    pub fn state_slots(&self, il: usize) -> (usize, usize) {
        let rec = (0..il).filter(|l| self.is_recurrent(*l)).count();
        (il - rec, rec)
    }

    /// Layers of a session's KV cache: the trunk's attention layers, then the MTP layers
    /// (KV layer `n_attn_layers() + j` is MTP layer `j`).
    pub fn n_kv_layers(&self) -> usize {
        self.n_attn_layers() + self.n_mtp
    }
}

/// Expert counts and width (`{a}.expert_*`); errors name the missing or inconsistent key.
pub(crate) fn moe_config(meta: &Metadata, a: &str, n_ff: usize) -> Result<MoeConfig, EngineError> {
    let n_expert = meta.u64(&format!("{a}.expert_count"))? as usize;
    let n_expert_used = meta.u64(&format!("{a}.expert_used_count"))? as usize;
    if n_expert == 0 || n_expert_used == 0 || n_expert_used > n_expert {
        return Err(EngineError::BadMetadata {
            key: format!("{a}.expert_used_count"),
            reason: format!("{n_expert_used} experts used of {n_expert}"),
        });
    }
    let n_ff_exp = meta
        .opt_u64(&format!("{a}.expert_feed_forward_length"))?
        .map_or(n_ff / n_expert_used, |v| v as usize);
    if n_ff_exp == 0 {
        return Err(EngineError::BadMetadata {
            key: format!("{a}.expert_feed_forward_length"),
            reason: "missing (and no feed_forward_length to derive it from)".into(),
        });
    }
    // llama.cpp's qwen3moe graph passes norm_w = true unconditionally.
    let norm_topk = meta
        .opt_bool(&format!("{a}.expert_weights_norm"))?
        .unwrap_or(true);
    let n_ff_shexp = meta
        .opt_u64(&format!("{a}.expert_shared_feed_forward_length"))?
        .map(|v| v as usize);
    Ok(MoeConfig {
        n_expert,
        n_expert_used,
        n_ff_exp,
        norm_topk,
        n_ff_shexp,
    })
}

/// `1 / rope.scaling.factor` for linear scaling; yarn and other kinds are rejected.
fn rope_freq_scale(meta: &Metadata, a: &str) -> Result<f32, EngineError> {
    let kind = meta
        .opt_str(&format!("{a}.rope.scaling.type"))?
        .unwrap_or("none");
    let factor = meta
        .opt_f32(&format!("{a}.rope.scaling.factor"))?
        .unwrap_or(0.0);
    match kind {
        "none" => Ok(1.0),
        "linear" if factor > 0.0 => Ok(1.0 / factor),
        "linear" => Ok(1.0),
        other => Err(EngineError::BadMetadata {
            key: format!("{a}.rope.scaling.type"),
            reason: format!("RoPE scaling '{other}' is not supported yet"),
        }),
    }
}
