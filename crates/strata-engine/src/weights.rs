//! Tensors of a decoder (dense or MoE), looked up by their GGUF names (`blk.N.attn_q.weight`, …)
//! and checked against the configuration. Matrices stay in the memory-mapped file; only
//! norm vectors and biases (a few KB each) are copied out as f32.

use strata_gguf::{GgufModel, Tensor};

use crate::config::{Arch, ModelConfig, MoeConfig};
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::{ExpertTensor, MoeWeights};

mod qwen3next;

pub use qwen3next::{DeltaNetWeights, GatedAttnWeights, HybridLayer, HybridWeights, Mixer};

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

struct Loader<'a> {
    gguf: &'static GgufModel,
    cfg: &'a ModelConfig,
}

impl Loader<'_> {
    fn tensor(&self, name: &str) -> Result<Tensor<'static>, EngineError> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| EngineError::MissingTensor(name.to_string()))
    }

    fn matrix(&self, name: &str, cols: usize, rows: usize) -> Result<Matrix<'static>, EngineError> {
        let t = self.tensor(name)?;
        let expected = vec![cols as u64, rows as u64];
        if t.info.shape != expected {
            return Err(EngineError::BadShape {
                name: name.into(),
                expected,
                found: t.info.shape.clone(),
            });
        }
        self.typed_matrix(name, t, cols, rows)
    }

    /// `t` as `[rows][cols]` once its type is known to be supported.
    fn typed_matrix(
        &self,
        name: &str,
        t: Tensor<'static>,
        cols: usize,
        rows: usize,
    ) -> Result<Matrix<'static>, EngineError> {
        if !strata_quant::supports_dequantize(t.info.ggml_type) {
            return Err(EngineError::BadMetadata {
                key: name.into(),
                reason: format!("ggml type {} is not supported", t.info.ggml_type),
            });
        }
        Ok(Matrix {
            ty: t.info.ggml_type,
            rows,
            cols,
            data: t.data,
        })
    }

    /// A 3-D expert tensor, ggml `ne = [cols, rows, n_expert]`, viewed per expert.
    fn experts(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<ExpertTensor<'static>, EngineError> {
        let t = self.tensor(name)?;
        let expected = vec![cols as u64, rows as u64, n_expert as u64];
        if t.info.shape != expected {
            return Err(EngineError::BadShape {
                name: name.into(),
                expected,
                found: t.info.shape.clone(),
            });
        }
        let all = self.typed_matrix(name, t, cols, rows * n_expert)?;
        Ok(ExpertTensor::new(all, n_expert))
    }

    fn moe(&self, il: usize, m: &MoeConfig) -> Result<MoeWeights, EngineError> {
        let c = self.cfg;
        let n = |s: &str| format!("blk.{il}.{s}");
        let (d, ff, ne) = (c.n_embd, m.n_ff_exp, m.n_expert);
        Ok(MoeWeights {
            router: self.matrix(&n("ffn_gate_inp.weight"), d, ne)?,
            gate: self.experts(&n("ffn_gate_exps.weight"), d, ff, ne)?,
            up: self.experts(&n("ffn_up_exps.weight"), d, ff, ne)?,
            down: self.experts(&n("ffn_down_exps.weight"), ff, d, ne)?,
            n_used: m.n_expert_used,
            norm_topk: m.norm_topk,
        })
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, EngineError> {
        let t = self.tensor(name)?;
        if t.info.shape != [len as u64] {
            return Err(EngineError::BadShape {
                name: name.into(),
                expected: vec![len as u64],
                found: t.info.shape.clone(),
            });
        }
        let mut out = vec![0.0; len];
        strata_quant::dequantize(t.info.ggml_type, t.data, &mut out)?;
        Ok(out)
    }

    fn opt_vector(&self, name: &str, len: usize) -> Result<Option<Vec<f32>>, EngineError> {
        match self.gguf.tensor(name) {
            Some(_) => self.vector(name, len).map(Some),
            None => Ok(None),
        }
    }

    /// The embedding, final norm and LM head (tied to the embedding when `output.weight` is
    /// absent).
    fn head(&self) -> Result<(Matrix<'static>, Vec<f32>, Matrix<'static>), EngineError> {
        let c = self.cfg;
        let token_embd = self.matrix("token_embd.weight", c.n_embd, c.n_vocab)?;
        let output = match self.gguf.tensor("output.weight") {
            Some(_) => self.matrix("output.weight", c.n_embd, c.n_vocab)?,
            None => token_embd,
        };
        let output_norm = self.vector("output_norm.weight", c.n_embd)?;
        Ok((token_embd, output_norm, output))
    }

    fn layer(&self, il: usize) -> Result<LayerWeights, EngineError> {
        let c = self.cfg;
        let n = |s: &str| format!("blk.{il}.{s}");
        let q_dim = c.n_head * c.head_dim;
        let kv = c.kv_row();
        let qk_norms = matches!(c.arch, Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma3);
        let gemma = c.arch == Arch::Gemma3;
        Ok(LayerWeights {
            attn_norm: self.vector(&n("attn_norm.weight"), c.n_embd)?,
            wq: self.matrix(&n("attn_q.weight"), c.n_embd, q_dim)?,
            wk: self.matrix(&n("attn_k.weight"), c.n_embd, kv)?,
            wv: self.matrix(&n("attn_v.weight"), c.n_embd, kv)?,
            wo: self.matrix(&n("attn_output.weight"), q_dim, c.n_embd)?,
            bq: self.opt_vector(&n("attn_q.bias"), q_dim)?,
            bk: self.opt_vector(&n("attn_k.bias"), kv)?,
            bv: self.opt_vector(&n("attn_v.bias"), kv)?,
            q_norm: if qk_norms {
                Some(self.vector(&n("attn_q_norm.weight"), c.head_dim)?)
            } else {
                None
            },
            k_norm: if qk_norms {
                Some(self.vector(&n("attn_k_norm.weight"), c.head_dim)?)
            } else {
                None
            },
            post_attn_norm: if gemma {
                Some(self.vector(&n("post_attention_norm.weight"), c.n_embd)?)
            } else {
                None
            },
            ffn_norm: self.vector(&n("ffn_norm.weight"), c.n_embd)?,
            ffn: match &c.moe {
                Some(m) => Ffn::Moe(self.moe(il, m)?),
                None => Ffn::Dense {
                    w_gate: self.matrix(&n("ffn_gate.weight"), c.n_embd, c.n_ff)?,
                    w_up: self.matrix(&n("ffn_up.weight"), c.n_embd, c.n_ff)?,
                    w_down: self.matrix(&n("ffn_down.weight"), c.n_ff, c.n_embd)?,
                },
            },
            post_ffn_norm: if gemma {
                Some(self.vector(&n("post_ffw_norm.weight"), c.n_embd)?)
            } else {
                None
            },
        })
    }
}

impl Weights {
    /// Looks up and checks every tensor the configuration needs.
    ///
    /// Errors: a missing tensor, a shape that disagrees with the metadata, or an
    /// unsupported ggml type — each naming the tensor.
    pub fn load(gguf: &'static GgufModel, cfg: &ModelConfig) -> Result<Weights, EngineError> {
        let l = Loader { gguf, cfg };
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
