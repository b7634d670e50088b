//! Tensors of Qwen3-Next (`qwen3next`): per layer a Gated DeltaNet or a gated full-attention
//! mixer, then routed experts plus a gated shared expert. Names and shapes from llama.cpp's
//! `llama_model_qwen3next::load_arch_tensors`; the DeltaNet input projection is the split
//! pair `attn_qkv` + `attn_gate` (current converter), not the legacy fused `ssm_in`.

use super::shared_expert::SharedExpert;
use crate::arch::dense::weights::Loader;
use crate::arch::source::TensorSource;
use crate::config::{ModelConfig, SsmConfig};
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::MoeWeights;

/// A Gated DeltaNet mixer.
pub struct DeltaNetWeights {
    /// `[conv_dim][n_embd]` (`attn_qkv`): q, k (each `key_dim`), v (`value_dim`).
    pub wqkv: Matrix<'static>,
    /// `[value_dim][n_embd]` (`attn_gate`): z, the output gate.
    pub wgate: Matrix<'static>,
    /// `[2·n_v_heads][n_embd]` (`ssm_ba`): per key head, its value heads' β logits then α.
    pub wba: Matrix<'static>,
    /// Convolution taps `[conv_dim][d_conv]` (`ssm_conv1d`).
    pub conv: Vec<f32>,
    /// `[n_v_heads]` (`ssm_dt.bias`), added to α before the softplus.
    pub dt_bias: Vec<f32>,
    /// `[n_v_heads]` (`ssm_a`): −exp(A_log), the decay rate (negative).
    pub a: Vec<f32>,
    /// `[head_v_dim]` (`ssm_norm`): RMS norm weight of each head's output.
    pub norm: Vec<f32>,
    /// `[n_embd][value_dim]` (`ssm_out`).
    pub wout: Matrix<'static>,
}

/// A gated full-attention mixer.
pub struct GatedAttnWeights {
    /// `[n_head·2·head_dim][n_embd]` (`attn_q`): per head, the query then its output gate.
    pub wq: Matrix<'static>,
    pub wk: Matrix<'static>,
    pub wv: Matrix<'static>,
    /// `[n_embd][n_head·head_dim]`.
    pub wo: Matrix<'static>,
    /// `[head_dim]` RMS norm weights of q and k heads.
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
}

/// The sequence mixer of a layer.
pub enum Mixer {
    DeltaNet(DeltaNetWeights),
    Attention(GatedAttnWeights),
}

/// One Qwen3-Next layer.
pub struct HybridLayer {
    pub attn_norm: Vec<f32>,
    pub mixer: Mixer,
    /// Norm before the FFN (`post_attention_norm`).
    pub ffn_norm: Vec<f32>,
    pub moe: MoeWeights,
    pub shared: SharedExpert,
}

/// All weights of a Qwen3-Next model.
pub struct HybridWeights {
    pub token_embd: Matrix<'static>,
    pub output_norm: Vec<f32>,
    pub output: Matrix<'static>,
    pub layers: Vec<HybridLayer>,
}

impl HybridWeights {
    /// Looks up and checks every tensor of a `qwen3next` file.
    ///
    /// Errors: a missing tensor (files with only the legacy `ssm_in` projection report
    /// `attn_qkv` missing), a shape that disagrees with the metadata, an unsupported type.
    pub fn load(src: &dyn TensorSource, cfg: &ModelConfig) -> Result<HybridWeights, EngineError> {
        let l = Loader { src, cfg };
        let (token_embd, output_norm, output) = l.head()?;
        let layers = (0..l.cfg.n_layer)
            .map(|il| l.hybrid_layer(il))
            .collect::<Result<_, _>>()?;
        Ok(HybridWeights {
            token_embd,
            output_norm,
            output,
            layers,
        })
    }

    /// Layer `il`'s weight matrices (its mixer's projections, the router, the three whole
    /// expert tensors and the shared expert's four), for a device backend to upload at load.
    pub fn layer_matrices(&self, il: usize) -> Vec<&Matrix<'static>> {
        let l = &self.layers[il];
        let mut out = match &l.mixer {
            Mixer::DeltaNet(m) => vec![&m.wqkv, &m.wgate, &m.wba, &m.wout],
            Mixer::Attention(m) => vec![&m.wq, &m.wk, &m.wv, &m.wo],
        };
        let (moe, sh) = (&l.moe, &l.shared);
        out.extend([&moe.router, &moe.gate.all, &moe.up.all, &moe.down.all]);
        out.extend([&sh.gate, &sh.up, &sh.down, &sh.gate_inp]);
        out
    }
}

impl Loader<'_> {
    fn hybrid_layer(&self, il: usize) -> Result<HybridLayer, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |s: &str| format!("blk.{il}.{s}");
        let bad = |key: &str| EngineError::BadMetadata {
            key: format!("{}.{key}", c.arch.name()),
            reason: "required by qwen3next".into(),
        };
        let moe_cfg = c.moe.as_ref().ok_or_else(|| bad("expert_count"))?;
        let ssm = c.ssm.as_ref().ok_or_else(|| bad("ssm.inner_size"))?;
        let mixer = if ssm.recurrent[il] {
            Mixer::DeltaNet(self.delta_net(il, ssm)?)
        } else {
            let (d, hd) = (c.n_embd, c.head_dim);
            Mixer::Attention(GatedAttnWeights {
                wq: src.matrix(&n("attn_q.weight"), d, 2 * c.n_head * hd)?,
                wk: src.matrix(&n("attn_k.weight"), d, c.kv_row())?,
                wv: src.matrix(&n("attn_v.weight"), d, c.kv_row())?,
                wo: src.matrix(&n("attn_output.weight"), c.n_head * hd, d)?,
                q_norm: src.vector(&n("attn_q_norm.weight"), hd)?,
                k_norm: src.vector(&n("attn_k_norm.weight"), hd)?,
            })
        };
        let ff = moe_cfg.n_ff_shexp.unwrap_or(moe_cfg.n_ff_exp);
        Ok(HybridLayer {
            attn_norm: src.vector(&n("attn_norm.weight"), c.n_embd)?,
            mixer,
            ffn_norm: src.vector(&n("post_attention_norm.weight"), c.n_embd)?,
            moe: self.moe(il, moe_cfg)?,
            shared: SharedExpert {
                gate: src.matrix(&n("ffn_gate_shexp.weight"), c.n_embd, ff)?,
                up: src.matrix(&n("ffn_up_shexp.weight"), c.n_embd, ff)?,
                down: src.matrix(&n("ffn_down_shexp.weight"), ff, c.n_embd)?,
                gate_inp: src.row_vector(&n("ffn_gate_inp_shexp.weight"), c.n_embd)?,
            },
        })
    }

    fn delta_net(&self, il: usize, s: &SsmConfig) -> Result<DeltaNetWeights, EngineError> {
        let (d, src) = (self.cfg.n_embd, self.src);
        let n = |x: &str| format!("blk.{il}.{x}");
        let conv_shape = [s.d_conv as u64, s.conv_dim() as u64];
        Ok(DeltaNetWeights {
            wqkv: src.matrix(&n("attn_qkv.weight"), d, s.conv_dim())?,
            wgate: src.matrix(&n("attn_gate.weight"), d, s.value_dim())?,
            wba: src.matrix(&n("ssm_ba.weight"), d, 2 * s.n_v_heads)?,
            conv: src.floats(&n("ssm_conv1d.weight"), &conv_shape)?,
            dt_bias: src.vector(&n("ssm_dt.bias"), s.n_v_heads)?,
            a: src.vector(&n("ssm_a"), s.n_v_heads)?,
            norm: src.vector(&n("ssm_norm.weight"), s.head_v_dim)?,
            wout: src.matrix(&n("ssm_out.weight"), s.value_dim(), d)?,
        })
    }
}
