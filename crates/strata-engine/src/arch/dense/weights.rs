//! Tensors of a decoder (dense or MoE), by their GGUF names (`blk.N.attn_q.weight`, …) and
//! the shapes the configuration implies. Matrices stay in the memory-mapped file; only norm
//! vectors and biases (a few KB each) are copied out as f32.

use crate::arch::source::TensorSource;
use crate::config::{Arch, ModelConfig, MoeConfig};
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::MoeWeights;

/// Weights of one decoder layer. Optional parts exist only in some architectures.
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: Matrix<'static>,
    pub wk: Matrix<'static>,
    pub wv: Matrix<'static>,
    pub wo: Matrix<'static>,
    /// Qwen2 q/k/v biases.
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// Per-head RMS norms of q and k (Qwen3, Gemma 3), length head_dim.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// Gemma 3 sandwich norms after attention and after the FFN.
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// The feed-forward block of a layer.
pub enum Ffn {
    /// One gated FFN: gate and up `[n_ff][n_embd]`, down `[n_embd][n_ff]`.
    Dense {
        w_gate: Matrix<'static>,
        w_up: Matrix<'static>,
        w_down: Matrix<'static>,
    },
    /// Routed experts (`ffn_gate_inp`, `ffn_{gate,up,down}_exps`).
    Moe(MoeWeights),
}

/// All weights of a decoder.
pub struct Weights {
    /// `[n_vocab][n_embd]`.
    pub token_embd: Matrix<'static>,
    pub output_norm: Vec<f32>,
    /// `[n_vocab][n_embd]`; the embedding itself when the file ties them.
    pub output: Matrix<'static>,
    pub layers: Vec<LayerWeights>,
}

/// Builds weights from a [`TensorSource`] for one configuration (shared by the architectures:
/// the embedding, the LM head and the routed experts are named alike in all of them).
pub(crate) struct Loader<'a> {
    pub src: &'a dyn TensorSource,
    pub cfg: &'a ModelConfig,
}

impl Loader<'_> {
    pub(crate) fn moe(&self, il: usize, m: &MoeConfig) -> Result<MoeWeights, EngineError> {
        let c = self.cfg;
        let n = |s: &str| format!("blk.{il}.{s}");
        let (d, ff, ne) = (c.n_embd, m.n_ff_exp, m.n_expert);
        let src = self.src;
        Ok(MoeWeights {
            layer: il,
            router: src.matrix(&n("ffn_gate_inp.weight"), d, ne)?,
            gate: src.experts(&n("ffn_gate_exps.weight"), d, ff, ne)?,
            up: src.experts(&n("ffn_up_exps.weight"), d, ff, ne)?,
            down: src.experts(&n("ffn_down_exps.weight"), ff, d, ne)?,
            n_used: m.n_expert_used,
            norm_topk: m.norm_topk,
        })
    }

    /// The embedding, final norm and LM head (tied to the embedding when `output.weight` is
    /// absent).
    pub(crate) fn head(&self) -> Result<(Matrix<'static>, Vec<f32>, Matrix<'static>), EngineError> {
        let (c, src) = (self.cfg, self.src);
        let token_embd = src.matrix("token_embd.weight", c.n_embd, c.n_vocab)?;
        let output = match src.has("output.weight", true) {
            true => src.matrix("output.weight", c.n_embd, c.n_vocab)?,
            false => token_embd,
        };
        let output_norm = src.vector("output_norm.weight", c.n_embd)?;
        Ok((token_embd, output_norm, output))
    }

    fn layer(&self, il: usize) -> Result<LayerWeights, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |s: &str| format!("blk.{il}.{s}");
        let q_dim = c.n_head * c.head_dim;
        let kv = c.kv_row();
        let qk_norms = matches!(c.arch, Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma3);
        let gemma = c.arch == Arch::Gemma3;
        let biases = c.arch == Arch::Qwen2;
        let when = |on: bool, name: &str, len: usize| -> Result<Option<Vec<f32>>, EngineError> {
            match on {
                true => src.vector(&n(name), len).map(Some),
                false => Ok(None),
            }
        };
        Ok(LayerWeights {
            attn_norm: src.vector(&n("attn_norm.weight"), c.n_embd)?,
            wq: src.matrix(&n("attn_q.weight"), c.n_embd, q_dim)?,
            wk: src.matrix(&n("attn_k.weight"), c.n_embd, kv)?,
            wv: src.matrix(&n("attn_v.weight"), c.n_embd, kv)?,
            wo: src.matrix(&n("attn_output.weight"), q_dim, c.n_embd)?,
            bq: src.opt_vector(&n("attn_q.bias"), q_dim, biases)?,
            bk: src.opt_vector(&n("attn_k.bias"), kv, biases)?,
            bv: src.opt_vector(&n("attn_v.bias"), kv, biases)?,
            q_norm: when(qk_norms, "attn_q_norm.weight", c.head_dim)?,
            k_norm: when(qk_norms, "attn_k_norm.weight", c.head_dim)?,
            post_attn_norm: when(gemma, "post_attention_norm.weight", c.n_embd)?,
            ffn_norm: src.vector(&n("ffn_norm.weight"), c.n_embd)?,
            ffn: match &c.moe {
                Some(m) => Ffn::Moe(self.moe(il, m)?),
                None => Ffn::Dense {
                    w_gate: src.matrix(&n("ffn_gate.weight"), c.n_embd, c.n_ff)?,
                    w_up: src.matrix(&n("ffn_up.weight"), c.n_embd, c.n_ff)?,
                    w_down: src.matrix(&n("ffn_down.weight"), c.n_ff, c.n_embd)?,
                },
            },
            post_ffn_norm: when(gemma, "post_ffw_norm.weight", c.n_embd)?,
        })
    }
}

impl Weights {
    /// Looks up and checks every tensor the configuration needs.
    ///
    /// Errors: a missing tensor, a shape that disagrees with the metadata, or an
    /// unsupported ggml type — each naming the tensor.
    pub fn load(src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Weights, EngineError> {
        let l = Loader { src, cfg };
        let (token_embd, output_norm, output) = l.head()?;
        let layers = (0..cfg.n_layer)
            .map(|il| l.layer(il))
            .collect::<Result<_, _>>()?;
        Ok(Weights {
            token_embd,
            output_norm,
            output,
            layers,
        })
    }
}
