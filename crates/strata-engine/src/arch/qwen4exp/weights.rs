//! Tensors of Qwen3.8-Flash-Next (`qwen4exp`), by GGUF name and the shapes the configuration
//! implies (docs/qwen4exp.md, "Tensors"; llama.cpp `llama_model_qwen4exp::load_arch_tensors`).
//! There are no layer norms: every block reads the residual streams through a
//! hyper-connection mixer (`hc_attn_*`, `hc_ffn_*`), and the final mixer (`output_hc_*`)
//! stands in for the output norm.

use crate::arch::dense::weights::Loader;
use crate::arch::qwen3next::shared_expert::SharedExpert;
use crate::arch::qwen3next::weights::GatedAttnWeights;
use crate::arch::source::TensorSource;
use crate::config::{ModelConfig, PleConfig, SsmConfig};
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::ops::moe::MoeWeights;

/// One hyper-connection mixer (`hc = n_streams`, `H = n_embd`).
pub struct HcWeights {
    /// `[hc·H]` grouped RMS norm gamma (`1 + w` folded by the converter).
    pub norm: Vec<f32>,
    /// `[rank][hc·H]` (`*_down`) and `[hc·H][rank]` (`*_up`): the low-rank stream gates.
    pub down: Matrix<'static>,
    pub up: Matrix<'static>,
    /// `[hc][hc·H]` (`*_inject`): per-stream weights of the block output; `None` for the
    /// final mixer, which writes nothing back.
    pub inject: Option<Matrix<'static>>,
}

/// A Gated DeltaNet mixer, its value heads in the converter's tiled order (value head `j`
/// reads key head `j mod n_k_heads`).
pub struct DeltaNetWeights {
    /// `[conv_dim][H]` (`attn_qkv`): q, k (each `key_dim`), v (`value_dim`).
    pub wqkv: Matrix<'static>,
    /// `[value_dim][H]` (`attn_gate`): z, the output gate.
    pub wgate: Matrix<'static>,
    /// `[n_v_heads][H]` (`ssm_beta`, `ssm_alpha`): β and α logits.
    pub wbeta: Matrix<'static>,
    pub walpha: Matrix<'static>,
    /// Convolution taps `[conv_dim][d_conv]` (`ssm_conv1d`).
    pub conv: Vec<f32>,
    /// `[n_v_heads]` (`ssm_dt.bias`), added to α before the softplus.
    pub dt_bias: Vec<f32>,
    /// `[n_v_heads]` (`ssm_a`): −exp(A_log).
    pub a: Vec<f32>,
    /// `[head_v_dim]` (`ssm_norm`): RMS norm weight of each head's output (not folded).
    pub norm: Vec<f32>,
    /// `[H][value_dim]` (`ssm_out`).
    pub wout: Matrix<'static>,
}

/// The QSA indexer of an attention layer.
pub struct IndexerWeights {
    /// `[ni·di][H]` (`indexer.q_proj`) and `[di][H]` (`indexer.k_proj`).
    pub wq: Matrix<'static>,
    pub wk: Matrix<'static>,
    /// `[di]` RMS norm gammas of the queries and the pooled block keys (folded).
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
}

/// A gated attention mixer and, on QSA layers, its indexer.
pub struct AttnWeights {
    pub attn: GatedAttnWeights,
    /// Present when the file has the indexer tensors; used on layers with a compress ratio.
    pub indexer: Option<IndexerWeights>,
}

/// The sequence mixer of a layer.
pub enum Mixer {
    DeltaNet(DeltaNetWeights),
    Attention(AttnWeights),
}

/// The PLE injection of the PLE layer.
pub struct PleWeights {
    /// `[hc·H][ple_embed_dim]` (`ple_key`) and `[H][ple_embed_dim]` (`ple_value`).
    pub key: Matrix<'static>,
    pub value: Matrix<'static>,
    /// `[hc·H]` grouped RMS norm gammas (folded) of the key, the query (the residual) and
    /// the convolution input.
    pub norm_key: Vec<f32>,
    pub norm_query: Vec<f32>,
    pub norm_conv: Vec<f32>,
    /// Dilated convolution taps `[hc·H][K]` (`ple_conv1d`).
    pub conv: Vec<f32>,
}

/// One qwen4exp layer.
pub struct Layer {
    pub ple: Option<PleWeights>,
    pub hc_attn: HcWeights,
    pub mixer: Mixer,
    pub hc_ffn: HcWeights,
    pub moe: MoeWeights,
    pub shared: SharedExpert,
}

/// The MTP draft layer (`blk.M.*`, M = `n_layer`; docs/qwen4exp.md, "The MTP layer"):
///
/// ```text
/// X_s    = eh_proj · [enorm(token_embd[t]); hnorm(R)_s]      every stream s of R [hc·H]
/// X      = layer(X)                                          QSA attention + MoE, no PLE
/// logits = output · hc_mix(X, hc_head)
/// ```
pub struct MtpWeights {
    /// `[H][2·H]` (`nextn.eh_proj`): `[fc_embedding | fc_hidden]` along the input, the
    /// embedding half first.
    pub eh_proj: Matrix<'static>,
    /// `[H]` RMS norm gamma of the token embedding (`nextn.enorm`, `1 + w` folded).
    pub enorm: Vec<f32>,
    /// `[hc·H]` RMS norm gamma of the input residual (`nextn.hnorm`, folded): ONE norm over
    /// the whole hc-wide row, not per stream.
    pub hnorm: Vec<f32>,
    /// The MTP's own final mixer (`nextn.hc_head_{norm,down,up}`, no injection).
    pub hc_head: HcWeights,
    /// The decoder layer, under the trunk's tensor names at `blk.M`: a (QSA) attention layer.
    pub layer: Layer,
}

/// All weights of a qwen4exp model.
pub struct Qwen4ExpWeights {
    /// `[n_vocab][H]`.
    pub token_embd: Matrix<'static>,
    /// `[n_vocab][H]`; the embedding itself when the file ties them.
    pub output: Matrix<'static>,
    /// The final mixer (no injection).
    pub output_hc: HcWeights,
    /// The n-gram table `[n_rows][row]` (`per_layer_token_embd`), read in place.
    pub ple_table: Option<Matrix<'static>>,
    pub layers: Vec<Layer>,
    /// The MTP draft layer, when the configuration has one (`cfg.n_mtp`).
    pub mtp: Option<MtpWeights>,
}

impl Qwen4ExpWeights {
    /// Layer `il`'s weight matrices, for a device backend to upload at load: hyper-connection
    /// gates, DeltaNet or attention and its indexer, router, whole expert tensors, shared
    /// expert, and on the PLE layer its projections and the n-gram table. (The MTP draft
    /// layer runs on the CPU.)
    pub fn layer_matrices(&self, il: usize) -> Vec<&Matrix<'static>> {
        let l = &self.layers[il];
        let mut out = Vec::new();
        if let Some(p) = &l.ple {
            out.extend(&self.ple_table);
            out.extend([&p.key, &p.value]);
        }
        for hc in [&l.hc_attn, &l.hc_ffn] {
            out.extend([&hc.down, &hc.up]);
            out.extend(&hc.inject);
        }
        match &l.mixer {
            Mixer::DeltaNet(m) => out.extend([&m.wqkv, &m.wgate, &m.wbeta, &m.walpha, &m.wout]),
            Mixer::Attention(m) => {
                let a = &m.attn;
                out.extend([&a.wq, &a.wk, &a.wv, &a.wo]);
                if let Some(ix) = &m.indexer {
                    out.extend([&ix.wq, &ix.wk]);
                }
            }
        }
        let (moe, sh) = (&l.moe, &l.shared);
        out.extend([&moe.router, &moe.gate.all, &moe.up.all, &moe.down.all]);
        out.extend([&sh.gate, &sh.up, &sh.down, &sh.gate_inp]);
        out
    }

    /// Looks up and checks every tensor of a `qwen4exp` file.
    ///
    /// Errors: a missing tensor, a shape that disagrees with the metadata, an unsupported
    /// type, each naming the tensor.
    pub fn load(src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Self, EngineError> {
        let l = Loader { src, cfg };
        let (d, v) = (cfg.n_embd, cfg.n_vocab);
        let token_embd = src.matrix("token_embd.weight", d, v)?;
        let output = match src.has("output.weight", true) {
            true => src.matrix("output.weight", d, v)?,
            false => token_embd,
        };
        let output_hc = l.hc("output_hc", false)?;
        let ple_table = match &cfg.ple {
            Some(p) => Some(ple_table(src, cfg, p)?),
            None => None,
        };
        let layers = (0..cfg.n_layer)
            .map(|il| l.qwen4exp_layer(il))
            .collect::<Result<_, _>>()?;
        let mtp = match cfg.n_mtp {
            0 => None,
            _ => Some(l.mtp(cfg.n_layer)?),
        };
        Ok(Qwen4ExpWeights {
            token_embd,
            output,
            output_hc,
            ple_table,
            layers,
            mtp,
        })
    }
}

/// The n-gram table `[n_rows][row]`. A table too short for the rows `ple.head_offsets` and
/// `ple.head_vocab_sizes` give the heads is an error naming `ple.head_offsets` (the head
/// that runs past it); any other shape mismatch is the table's [`EngineError::BadShape`].
fn ple_table(
    src: &dyn TensorSource,
    cfg: &ModelConfig,
    p: &PleConfig,
) -> Result<Matrix<'static>, EngineError> {
    const NAME: &str = "per_layer_token_embd.weight";
    src.matrix(NAME, p.row, p.n_rows).map_err(|e| {
        let EngineError::BadShape { found, .. } = &e else {
            return e;
        };
        let [cols, rows] = found[..] else { return e };
        // PleConfig::from_metadata checked that these sums fit u64.
        let past =
            (p.offsets.iter().zip(&p.vocab_sizes).enumerate()).find(|(_, (o, v))| *o + *v > rows);
        match past {
            Some((h, (o, v))) if cols == p.row as u64 => EngineError::BadMetadata {
                key: format!("{}.ple.head_offsets", cfg.arch.name()),
                reason: format!(
                    "head {h}'s rows {o}..{} run past the {rows} rows of {NAME}",
                    o + v
                ),
            },
            _ => e,
        }
    })
}

/// What qwen4exp's configure fills in; its absence is a bug in the caller's configuration.
fn required<'c, T>(v: &'c Option<T>, key: &str, c: &ModelConfig) -> Result<&'c T, EngineError> {
    v.as_ref().ok_or_else(|| EngineError::BadMetadata {
        key: format!("{}.{key}", c.arch.name()),
        reason: "required by qwen4exp".into(),
    })
}

impl Loader<'_> {
    /// The mixer `{prefix}_{norm,down,up}` (and `_inject` when `inject`).
    fn hc(&self, prefix: &str, inject: bool) -> Result<HcWeights, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let hc = required(&c.hyper, "hyper_connection.count", c)?;
        let (wide, n) = (c.residual_width(), hc.n_streams);
        let name = |s: &str| format!("{prefix}_{s}.weight");
        Ok(HcWeights {
            norm: src.vector(&name("norm"), wide)?,
            down: src.matrix(&name("down"), wide, hc.rank)?,
            up: src.matrix(&name("up"), hc.rank, wide)?,
            inject: match inject {
                true => Some(src.matrix(&name("inject"), wide, n)?),
                false => None,
            },
        })
    }

    /// The MTP layer at `blk.{il}` (`il = n_layer`).
    fn mtp(&self, il: usize) -> Result<MtpWeights, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |s: &str| format!("blk.{il}.nextn.{s}");
        let d = c.n_embd;
        Ok(MtpWeights {
            eh_proj: src.matrix(&n("eh_proj.weight"), 2 * d, d)?,
            enorm: src.vector(&n("enorm.weight"), d)?,
            hnorm: src.vector(&n("hnorm.weight"), c.residual_width())?,
            hc_head: self.hc(&n("hc_head"), false)?,
            layer: self.qwen4exp_layer(il)?,
        })
    }

    /// Trunk layer `il`, or the MTP decoder layer (`il >= n_layer`: attention, no PLE).
    fn qwen4exp_layer(&self, il: usize) -> Result<Layer, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |s: &str| format!("blk.{il}.{s}");
        let moe_cfg = required(&c.moe, "expert_count", c)?;
        let ssm = required(&c.ssm, "ssm.inner_size", c)?;
        let ple = match &c.ple {
            Some(p) if p.layer == il => Some(self.ple(il, p)?),
            _ => None,
        };
        let hc_attn = self.hc(&n("hc_attn"), true)?;
        let mixer = if ssm.recurrent.get(il).copied().unwrap_or(false) {
            Mixer::DeltaNet(self.q4e_delta_net(il, ssm)?)
        } else {
            Mixer::Attention(self.q4e_attention(il)?)
        };
        let ff = moe_cfg.n_ff_shexp.unwrap_or(moe_cfg.n_ff_exp);
        Ok(Layer {
            ple,
            hc_attn,
            mixer,
            hc_ffn: self.hc(&n("hc_ffn"), true)?,
            moe: self.moe(il, moe_cfg)?,
            shared: SharedExpert {
                gate: src.matrix(&n("ffn_gate_shexp.weight"), c.n_embd, ff)?,
                up: src.matrix(&n("ffn_up_shexp.weight"), c.n_embd, ff)?,
                down: src.matrix(&n("ffn_down_shexp.weight"), ff, c.n_embd)?,
                gate_inp: src.row_vector(&n("ffn_gate_inp_shexp.weight"), c.n_embd)?,
            },
        })
    }

    fn q4e_attention(&self, il: usize) -> Result<AttnWeights, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |s: &str| format!("blk.{il}.{s}");
        let (d, hd) = (c.n_embd, c.head_dim);
        let attn = GatedAttnWeights {
            wq: src.matrix(&n("attn_q.weight"), d, 2 * c.n_head * hd)?,
            wk: src.matrix(&n("attn_k.weight"), d, c.kv_row())?,
            wv: src.matrix(&n("attn_v.weight"), d, c.kv_row())?,
            wo: src.matrix(&n("attn_output.weight"), c.n_head * hd, d)?,
            q_norm: src.vector(&n("attn_q_norm.weight"), hd)?,
            k_norm: src.vector(&n("attn_k_norm.weight"), hd)?,
        };
        // Files with indexer keys carry the indexer on every attention layer, also where the
        // compress ratio is 0 (dense); a QSA layer cannot do without it.
        let indexer = match &c.qsa {
            Some(q) if q.is_sparse(il) || src.has(&n("indexer.q_proj.weight"), true) => {
                let di = q.head_dim;
                Some(IndexerWeights {
                    wq: src.matrix(&n("indexer.q_proj.weight"), d, q.n_head * di)?,
                    wk: src.matrix(&n("indexer.k_proj.weight"), d, di)?,
                    q_norm: src.vector(&n("indexer.q_norm.weight"), di)?,
                    k_norm: src.vector(&n("indexer.k_norm.weight"), di)?,
                })
            }
            _ => None,
        };
        Ok(AttnWeights { attn, indexer })
    }

    fn q4e_delta_net(&self, il: usize, s: &SsmConfig) -> Result<DeltaNetWeights, EngineError> {
        let (d, src) = (self.cfg.n_embd, self.src);
        let n = |x: &str| format!("blk.{il}.{x}");
        let conv_shape = [s.d_conv as u64, s.conv_dim() as u64];
        Ok(DeltaNetWeights {
            wqkv: src.matrix(&n("attn_qkv.weight"), d, s.conv_dim())?,
            wgate: src.matrix(&n("attn_gate.weight"), d, s.value_dim())?,
            wbeta: src.matrix(&n("ssm_beta.weight"), d, s.n_v_heads)?,
            walpha: src.matrix(&n("ssm_alpha.weight"), d, s.n_v_heads)?,
            conv: src.floats(&n("ssm_conv1d.weight"), &conv_shape)?,
            dt_bias: src.vector(&n("ssm_dt.bias"), s.n_v_heads)?,
            a: src.vector(&n("ssm_a"), s.n_v_heads)?,
            norm: src.vector(&n("ssm_norm.weight"), s.head_v_dim)?,
            wout: src.matrix(&n("ssm_out.weight"), s.value_dim(), d)?,
        })
    }

    fn ple(&self, il: usize, p: &PleConfig) -> Result<PleWeights, EngineError> {
        let (c, src) = (self.cfg, self.src);
        let n = |x: &str| format!("blk.{il}.{x}");
        let (wide, e) = (c.residual_width(), p.embed_dim());
        Ok(PleWeights {
            key: src.matrix(&n("ple_key.weight"), e, wide)?,
            value: src.matrix(&n("ple_value.weight"), e, c.n_embd)?,
            norm_key: src.vector(&n("ple_norm_key.weight"), wide)?,
            norm_query: src.vector(&n("ple_norm_query.weight"), wide)?,
            norm_conv: src.vector(&n("ple_norm_conv.weight"), wide)?,
            conv: src.floats(
                &n("ple_conv1d.weight"),
                &[p.conv_kernel as u64, wide as u64],
            )?,
        })
    }
}
