//! The tensor directory of a synthetic model: every GGUF tensor name, shape (ggml order,
//! `shape[0]` = row length), storage type and how its values are drawn. Names and shapes are
//! the ones llama.cpp's model loader expects (`src/llama-model.cpp`), as the tiny checkpoints
//! converted by llama.cpp show them.

use anyhow::{bail, Result};
use strata_gguf::GgmlType;

use super::spec::{Spec, SynthArch};

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// A weight matrix: rows from the shared pool of encoded random rows, each element
    /// ~ N(0, 1/row_len) before quantization (see `rows.rs`).
    Pooled,
    /// Every element drawn on its own: `mean + std·N(0, 1)` (norms, biases, router, SSM
    /// parameters; all small and stored as F32).
    Direct { mean: f32, std: f32 },
}

/// One tensor to write.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub name: String,
    /// ggml order: `shape[0]` is the row length.
    pub shape: Vec<u64>,
    pub ty: GgmlType,
    pub fill: Fill,
}

impl Planned {
    /// Elements in the tensor.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Rows of `shape[0]` elements.
    pub fn rows(&self) -> u64 {
        self.elements() / self.shape[0]
    }
}

/// The storage type asked for with `--type`: one ggml type for every matrix, or a
/// Q4_K_M-like mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeChoice {
    Pure(GgmlType),
    /// Q4_K, with Q6_K for `output.weight` and for `attn_v` / `ffn_down*` in the layers
    /// llama.cpp's Q4_K_M gives more bits (the first and last eighth, every third between).
    Q4KM,
}

impl TypeChoice {
    /// Parses a ggml type name (`q4_k`, `Q8_0`, `f16`, …) or `q4_k_m`.
    ///
    /// Errors: an unknown name, or a type strata-quant cannot produce or llama.cpp cannot
    /// store as weights.
    pub fn parse(s: &str) -> Result<TypeChoice> {
        if s.eq_ignore_ascii_case("q4_k_m") {
            return Ok(TypeChoice::Q4KM);
        }
        let Some(ty) = GgmlType::from_name(s) else {
            bail!("unknown type '{s}' (try f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m)");
        };
        if !strata_quant::supports_quantize(ty) || matches!(ty, GgmlType::Q8_1 | GgmlType::Q8_K) {
            bail!("{ty} cannot be synthesized: strata-quant cannot quantize it to a weight type");
        }
        Ok(TypeChoice::Pure(ty))
    }

    /// `general.file_type` (llama.cpp's `llama_ftype`).
    pub fn file_type(self) -> u32 {
        use GgmlType as T;
        match self {
            TypeChoice::Q4KM => 15,
            TypeChoice::Pure(ty) => match ty {
                T::F32 => 0,
                T::F16 => 1,
                T::Q4_0 => 2,
                T::Q4_1 => 3,
                T::Q8_0 => 7,
                T::Q5_0 => 8,
                T::Q5_1 => 9,
                T::Q4_K => 14,
                T::Q5_K => 16,
                T::Q6_K => 18,
                T::BF16 => 32,
                _ => 0,
            },
        }
    }

    /// The type of a matrix with rows of `row_len`, given the layer (None outside layers)
    /// and whether it is one llama.cpp's mixes give more bits. Rows that are not a whole
    /// number of blocks fall back to Q8_0, or F16 (llama.cpp falls back likewise).
    fn matrix_type(self, row_len: u64, more_bits: bool) -> GgmlType {
        let ty = match self {
            TypeChoice::Pure(t) => t,
            TypeChoice::Q4KM if more_bits => GgmlType::Q6_K,
            TypeChoice::Q4KM => GgmlType::Q4_K,
        };
        if row_len.is_multiple_of(ty.block_size() as u64) {
            ty
        } else if row_len.is_multiple_of(32) && ty.is_quantized() {
            GgmlType::Q8_0
        } else {
            GgmlType::F16
        }
    }
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third
/// layer between.
fn use_more_bits(il: usize, n_layer: usize) -> bool {
    il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2
}

/// Builds the list in file order, pushing through `push` so the layout reads like the model.
struct Plan<'a> {
    spec: &'a Spec,
    types: TypeChoice,
    out: Vec<Planned>,
}

impl Plan<'_> {
    fn matrix(&mut self, name: String, shape: &[usize], more_bits: bool) {
        let ty = self.types.matrix_type(shape[0] as u64, more_bits);
        self.push(name, shape, ty, Fill::Pooled);
    }

    fn f32(&mut self, name: String, shape: &[usize], mean: f32, std: f32) {
        self.push(name, shape, GgmlType::F32, Fill::Direct { mean, std });
    }

    fn norm(&mut self, name: String, len: usize) {
        self.f32(name, &[len], 1.0, 0.02);
    }

    fn push(&mut self, name: String, shape: &[usize], ty: GgmlType, fill: Fill) {
        let shape = shape.iter().map(|&d| d as u64).collect();
        self.out.push(Planned {
            name,
            shape,
            ty,
            fill,
        });
    }

    fn attention(&mut self, il: usize, more: bool) {
        let s = self.spec;
        let n = |t: &str| format!("blk.{il}.{t}");
        let (d, hd) = (s.n_embd, s.head_dim);
        let q = s.n_head * hd;
        let kv = s.n_head_kv * hd;
        // qwen3next's full-attention q projection also carries the output gate.
        let q_rows = if s.arch == SynthArch::Qwen3next {
            2 * q
        } else {
            q
        };
        self.matrix(n("attn_q.weight"), &[d, q_rows], false);
        self.matrix(n("attn_k.weight"), &[d, kv], false);
        self.matrix(n("attn_v.weight"), &[d, kv], more);
        self.matrix(n("attn_output.weight"), &[q, d], false);
        if s.arch == SynthArch::Qwen2 {
            self.f32(n("attn_q.bias"), &[q], 0.0, 0.02);
            self.f32(n("attn_k.bias"), &[kv], 0.0, 0.02);
            self.f32(n("attn_v.bias"), &[kv], 0.0, 0.02);
        }
        if !matches!(s.arch, SynthArch::Llama | SynthArch::Qwen2) {
            self.norm(n("attn_q_norm.weight"), hd);
            self.norm(n("attn_k_norm.weight"), hd);
        }
    }

    /// qwen3next's Gated DeltaNet mixer (llama.cpp `LLM_ARCH_QWEN3NEXT` tensors).
    fn delta_net(&mut self, il: usize) {
        let s = self.spec;
        let ssm = s.ssm.expect("qwen3next has ssm dims");
        let n = |t: &str| format!("blk.{il}.{t}");
        let d = s.n_embd;
        let key_dim = ssm.state_size * ssm.group_count;
        let value_dim = ssm.inner_size;
        let conv_dim = 2 * key_dim + value_dim;
        let n_v = ssm.time_step_rank;
        self.f32(n("ssm_a"), &[n_v], -1.0, 0.1);
        let conv_std = 1.0 / (ssm.conv_kernel as f32).sqrt();
        self.f32(
            n("ssm_conv1d.weight"),
            &[ssm.conv_kernel, conv_dim],
            0.0,
            conv_std,
        );
        self.f32(n("ssm_dt.bias"), &[n_v], 1.0, 0.1);
        self.matrix(n("ssm_ba.weight"), &[d, 2 * n_v], false);
        self.matrix(n("attn_qkv.weight"), &[d, conv_dim], false);
        self.matrix(n("attn_gate.weight"), &[d, value_dim], false);
        self.norm(n("ssm_norm.weight"), value_dim / n_v);
        self.matrix(n("ssm_out.weight"), &[value_dim, d], false);
    }

    fn ffn(&mut self, il: usize, more: bool) {
        let s = self.spec;
        let n = |t: &str| format!("blk.{il}.{t}");
        let d = s.n_embd;
        if !s.arch.is_moe() {
            self.matrix(n("ffn_gate.weight"), &[d, s.n_ff], false);
            self.matrix(n("ffn_up.weight"), &[d, s.n_ff], false);
            self.matrix(n("ffn_down.weight"), &[s.n_ff, d], more);
            return;
        }
        let (ne, ff) = (s.n_expert, s.n_ff_exp);
        let router_std = 1.0 / (d as f32).sqrt();
        self.f32(n("ffn_gate_inp.weight"), &[d, ne], 0.0, router_std);
        self.matrix(n("ffn_gate_exps.weight"), &[d, ff, ne], false);
        self.matrix(n("ffn_up_exps.weight"), &[d, ff, ne], false);
        self.matrix(n("ffn_down_exps.weight"), &[ff, d, ne], more);
        if s.n_ff_shexp > 0 {
            let sh = s.n_ff_shexp;
            self.f32(n("ffn_gate_inp_shexp.weight"), &[d], 0.0, router_std);
            self.matrix(n("ffn_gate_shexp.weight"), &[d, sh], false);
            self.matrix(n("ffn_up_shexp.weight"), &[d, sh], false);
            self.matrix(n("ffn_down_shexp.weight"), &[sh, d], more);
        }
    }

    fn layer(&mut self, il: usize) {
        let s = self.spec;
        let more = use_more_bits(il, s.n_layer);
        let n = |t: &str| format!("blk.{il}.{t}");
        self.norm(n("attn_norm.weight"), s.n_embd);
        if s.is_recurrent(il) {
            self.delta_net(il);
        } else {
            self.attention(il, more);
        }
        match s.arch {
            SynthArch::Gemma3 => {
                self.norm(n("post_attention_norm.weight"), s.n_embd);
                self.norm(n("ffn_norm.weight"), s.n_embd);
                self.ffn(il, more);
                self.norm(n("post_ffw_norm.weight"), s.n_embd);
            }
            // qwen3next names its pre-FFN norm `post_attention_norm`.
            SynthArch::Qwen3next => {
                self.norm(n("post_attention_norm.weight"), s.n_embd);
                self.ffn(il, more);
            }
            _ => {
                self.norm(n("ffn_norm.weight"), s.n_embd);
                self.ffn(il, more);
            }
        }
    }
}

/// Every tensor of `spec` stored as `types` asks: token embedding, the layers, final norm and
/// an untied output matrix. Vectors, the router and SSM parameters stay F32 as llama.cpp
/// keeps them.
pub fn plan(spec: &Spec, types: TypeChoice) -> Vec<Planned> {
    let mut p = Plan {
        spec,
        types,
        out: Vec::new(),
    };
    let (d, v) = (spec.n_embd, spec.n_vocab);
    p.matrix("token_embd.weight".into(), &[d, v], false);
    for il in 0..spec.n_layer {
        p.layer(il);
    }
    p.norm("output_norm.weight".into(), d);
    p.matrix("output.weight".into(), &[d, v], true);
    p.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_30b_a3b_has_30b_parameters_and_q4_k_experts() {
        let mut s = Spec::preset("qwen3-30b-a3b").unwrap();
        s.n_vocab = 151_936;
        let t = plan(&s, TypeChoice::parse("q4_k").unwrap());
        let params: u64 = t.iter().map(Planned::elements).sum();
        assert!((30.0e9..31.0e9).contains(&(params as f64)), "{params}");
        let down = t
            .iter()
            .find(|t| t.name == "blk.47.ffn_down_exps.weight")
            .unwrap();
        assert_eq!(down.shape, [768, 2048, 128]);
        assert_eq!(down.ty, GgmlType::Q4_K);
        let router = t
            .iter()
            .find(|t| t.name == "blk.0.ffn_gate_inp.weight")
            .unwrap();
        assert_eq!(
            (router.ty, router.shape.clone()),
            (GgmlType::F32, vec![2048, 128])
        );
    }

    #[test]
    fn rows_that_are_not_whole_blocks_fall_back() {
        let q4k = TypeChoice::Pure(GgmlType::Q4_K);
        assert_eq!(q4k.matrix_type(512, false), GgmlType::Q4_K);
        assert_eq!(q4k.matrix_type(64, false), GgmlType::Q8_0);
        assert_eq!(q4k.matrix_type(40, false), GgmlType::F16);
        assert_eq!(TypeChoice::Q4KM.matrix_type(512, true), GgmlType::Q6_K);
        assert!(TypeChoice::parse("q2_k").is_err());
        assert!(TypeChoice::parse("nope").is_err());
    }

    #[test]
    fn qwen3next_layers_match_llama_cpp_names() {
        let mut s = Spec::tiny(SynthArch::Qwen3next);
        s.n_vocab = 768;
        let t = plan(&s, TypeChoice::Pure(GgmlType::F32));
        let shape = |n: &str| t.iter().find(|t| t.name == n).unwrap().shape.clone();
        // As in the llama.cpp-converted tiny checkpoint.
        assert_eq!(shape("blk.0.attn_qkv.weight"), [256, 512]);
        assert_eq!(shape("blk.0.ssm_conv1d.weight"), [4, 512]);
        assert_eq!(shape("blk.0.ssm_ba.weight"), [256, 8]);
        assert_eq!(shape("blk.0.ssm_norm.weight"), [64]);
        assert_eq!(shape("blk.3.attn_q.weight"), [256, 512]);
        assert!(!t.iter().any(|t| t.name == "blk.3.ssm_a"));
        assert_eq!(shape("blk.3.ffn_down_shexp.weight"), [256, 256]);
    }
}
