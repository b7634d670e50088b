//! The tensor directory of a synthetic model: every GGUF tensor name, shape (ggml order,
//! `shape[0]` = row length), storage type and how its values are drawn. Names and shapes come
//! from the engine's architecture modules (the same code that loads a file), which follow
//! llama.cpp's model loader (`src/llama-model.cpp`) and are tested against converted files.

use anyhow::{bail, Result};
use strata_engine::arch::{self, source::TensorKind, source::TensorSpec};
use strata_engine::config::ModelConfig;
use strata_gguf::GgmlType;

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

/// The storage type asked for with `--type`: one ggml type for every matrix, or one of
/// llama-quantize's mixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeChoice {
    Pure(GgmlType),
    /// Q4_K, with Q6_K for `output.weight` and for `attn_v` / `ffn_down*` in the layers
    /// llama.cpp's Q4_K_M gives more bits (the first and last eighth, every third between).
    Q4KM,
    /// llama-quantize's IQ3_XXS (with an importance matrix, which it requires).
    Iq3Xxs,
    /// llama-quantize's IQ2_XS (with an importance matrix, which it requires).
    Iq2Xs,
}

/// What `llama_tensor_get_type` (llama.cpp `src/llama-quant.cpp`) needs to know of a matrix.
#[derive(Clone, Copy, Debug)]
struct Site<'a> {
    name: &'a str,
    /// `blk.N` of the name.
    layer: Option<usize>,
    /// Layers with MTP layers (`block_count`, llama.cpp's `n_layer_all`).
    n_layer: usize,
    /// Query heads per KV head (`n_gqa`).
    n_gqa: usize,
    n_expert: usize,
    /// The quantizer's running counters as (index of this tensor, count in the file): over
    /// `attn_v`-like tensors (`attn_v`, `attn_qkv`) and over `ffn_down*` tensors (whose
    /// count llama.cpp takes as `n_layer_all`).
    attn_v: (usize, usize),
    ffn_down: (usize, usize),
}

/// llama.cpp's `category_is_attn_v`.
fn is_attn_v(name: &str) -> bool {
    name.contains("attn_v.weight") || name.contains("attn_qkv.weight")
}

impl TypeChoice {
    /// Parses a ggml type name (`q4_k`, `Q8_0`, `f16`, …) or one of the mixes `q4_k_m`,
    /// `iq3_xxs`, `iq2_xs` (named as llama-quantize names them).
    ///
    /// Errors: an unknown name, or a type synth cannot produce or llama.cpp cannot store as
    /// weights.
    pub fn parse(s: &str) -> Result<TypeChoice> {
        for (name, mix) in [
            ("q4_k_m", TypeChoice::Q4KM),
            ("iq3_xxs", TypeChoice::Iq3Xxs),
            ("iq2_xs", TypeChoice::Iq2Xs),
        ] {
            if s.eq_ignore_ascii_case(name) {
                return Ok(mix);
            }
        }
        let Some(ty) = GgmlType::from_name(s) else {
            bail!(
                "unknown type '{s}' (try f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m, iq3_xxs, iq2_xs)"
            );
        };
        let drawn = super::blocks::supports(ty);
        if !(strata_quant::supports_quantize(ty) || drawn)
            || matches!(ty, GgmlType::Q8_1 | GgmlType::Q8_K)
        {
            bail!("{ty} cannot be synthesized: not a weight type synth can produce");
        }
        Ok(TypeChoice::Pure(ty))
    }

    /// `general.file_type` (llama.cpp's `llama_ftype`).
    pub fn file_type(self) -> u32 {
        use GgmlType as T;
        match self {
            TypeChoice::Q4KM => 15,
            TypeChoice::Iq2Xs => 20,
            TypeChoice::Iq3Xxs => 23,
            TypeChoice::Pure(ty) => match ty {
                T::F32 => 0,
                T::F16 => 1,
                T::Q4_0 => 2,
                T::Q4_1 => 3,
                T::Q8_0 => 7,
                T::Q5_0 => 8,
                T::Q5_1 => 9,
                T::Q2_K => 10,
                T::Q3_K => 11,
                T::Q4_K => 14,
                T::Q5_K => 16,
                T::Q6_K => 18,
                T::IQ2_XXS => 19,
                T::IQ2_XS => 20,
                T::IQ3_XXS => 23,
                T::IQ1_S => 24,
                T::IQ4_NL => 25,
                T::IQ3_S => 26,
                T::IQ2_S => 28,
                T::IQ4_XS => 30,
                T::BF16 => 32,
                _ => 0,
            },
        }
    }

    /// The mix's type for a matrix before the shape fallback: llama.cpp's
    /// `llama_tensor_get_type_impl` for these mixes, with an importance matrix.
    fn mix_type(self, s: Site<'_>) -> GgmlType {
        use GgmlType as T;
        let n = s.name;
        let (attn_v, ffn_down) = (is_attn_v(n), n.contains("ffn_down"));
        let more_bits = match s.layer {
            Some(il) if ffn_down => use_more_bits(il, s.n_layer),
            Some(_) if attn_v => use_more_bits(s.attn_v.0, s.attn_v.1),
            _ => false,
        };
        let early = s.ffn_down.0 < s.ffn_down.1 / 8;
        let embd = n == "token_embd.weight" || n == "per_layer_token_embd.weight";
        let (attn_k, attn_q, attn_out) = (
            n.contains("attn_k.weight"),
            n.contains("attn_q.weight"),
            n.contains("attn_output.weight"),
        );
        // llama.cpp special-cases models of exactly 8 experts (Mixtral's shape).
        let eight = s.n_expert == 8;
        match self {
            TypeChoice::Pure(t) => t,
            TypeChoice::Q4KM => match () {
                _ if n == "output.weight" => T::Q6_K,
                _ if (attn_v || attn_k) && eight => T::Q8_0,
                _ if attn_out && eight => T::Q5_K,
                _ if more_bits => T::Q6_K,
                _ => T::Q4_K,
            },
            TypeChoice::Iq3Xxs => match () {
                _ if n == "output.weight" => T::Q5_K,
                _ if embd => T::IQ3_S,
                _ if (attn_v || attn_k) && eight => T::Q8_0,
                _ if attn_v && s.n_gqa >= 4 => T::Q4_K,
                _ if attn_k || attn_q => T::IQ2_S,
                _ if attn_out && eight => T::Q5_K,
                _ if attn_out => T::IQ3_S,
                _ => T::IQ3_XXS,
            },
            TypeChoice::Iq2Xs => match () {
                _ if n == "output.weight" => T::Q5_K,
                _ if embd => T::Q2_K,
                _ if attn_v && (s.n_gqa >= 4 || s.n_expert >= 4) => T::Q4_K,
                _ if attn_v => T::Q2_K,
                _ if attn_k && eight => T::Q4_K,
                _ if ffn_down && early => T::Q2_K,
                _ if attn_out && eight => T::Q5_K,
                _ => T::IQ2_XS,
            },
        }
    }

    /// The type of a matrix with rows of `row_len`. Rows that are not a whole number of
    /// blocks fall back as llama.cpp's quantizer does (`tensor_type_fallback`: the 256-wide
    /// i-quants to IQ4_NL, Q2_K/Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), or
    /// to F16.
    fn matrix_type(self, site: Site<'_>, row_len: u64) -> GgmlType {
        let ty = self.mix_type(site);
        let fits = |t: GgmlType| row_len.is_multiple_of(t.block_size() as u64);
        if fits(ty) {
            return ty;
        }
        use GgmlType as T;
        let fallback = match ty {
            T::IQ1_S
            | T::IQ1_M
            | T::IQ2_XXS
            | T::IQ2_XS
            | T::IQ2_S
            | T::IQ3_XXS
            | T::IQ3_S
            | T::IQ4_XS => T::IQ4_NL,
            T::Q2_K | T::Q3_K => T::Q4_0,
            T::Q4_K => T::Q5_0,
            T::Q5_K => T::Q5_1,
            T::Q6_K => T::Q8_0,
            t if t.is_quantized() => T::Q8_0,
            _ => T::F16,
        };
        if fits(fallback) {
            fallback
        } else {
            T::F16
        }
    }
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third
/// layer between.
fn use_more_bits(il: usize, n_layer: usize) -> bool {
    il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2
}

/// How a synthetic file stores and fills a tensor of the engine's list: weight matrices in
/// the asked type from the shared row pool; the router, vectors and SSM parameters as F32
/// drawn one by one (llama.cpp keeps them F32 too), with the mean and spread of a trained
/// model's (norms near 1, the decay rate negative, convolution taps ~ 1/√kernel).
fn planned(t: TensorSpec, types: TypeChoice, cfg: &ModelConfig, counters: &Counters) -> Planned {
    let name = t.name;
    let layer = name
        .strip_prefix("blk.")
        .and_then(|r| r.split('.').next())
        .and_then(|i| i.parse::<usize>().ok());
    let direct = |mean: f32, std: f32| (GgmlType::F32, Fill::Direct { mean, std });
    let router_std = 1.0 / (t.shape[0] as f32).sqrt();
    let mixed = !matches!(types, TypeChoice::Pure(_));
    let (ty, fill) = match t.kind {
        _ if name.ends_with("ffn_gate_inp.weight") => direct(0.0, router_std),
        TensorKind::RowVector => direct(0.0, router_std),
        // llama-quantize keeps qwen4exp's QSA indexer in F32.
        TensorKind::Matrix if mixed && name.contains(".indexer.") => (GgmlType::F32, Fill::Pooled),
        TensorKind::Matrix | TensorKind::Experts => {
            let n_layer = cfg.n_layer + cfg.n_mtp;
            let site = Site {
                name: &name,
                layer,
                n_layer,
                n_gqa: cfg.n_head / cfg.n_head_kv.max(1),
                n_expert: cfg.moe.as_ref().map_or(0, |m| m.n_expert),
                attn_v: counters.attn_v(&name),
                ffn_down: (counters.ffn_down(&name), n_layer),
            };
            (types.matrix_type(site, t.shape[0]), Fill::Pooled)
        }
        // llama-quantize quantizes this 2-D tensor, and its 4-wide rows fall back to F16.
        TensorKind::Floats if mixed && name.ends_with("ple_conv1d.weight") => (
            GgmlType::F16,
            Fill::Direct {
                mean: 1.0,
                std: 0.02,
            },
        ),
        TensorKind::Floats if name.ends_with("ssm_a") => direct(-1.0, 0.1),
        TensorKind::Floats if name.ends_with("ssm_dt.bias") => direct(1.0, 0.1),
        TensorKind::Floats if name.ends_with("ssm_conv1d.weight") => {
            direct(0.0, 1.0 / (t.shape[0] as f32).sqrt())
        }
        TensorKind::Floats if name.ends_with(".bias") => direct(0.0, 0.02),
        TensorKind::Floats => direct(1.0, 0.02),
    };
    Planned {
        name,
        shape: t.shape,
        ty,
        fill,
    }
}

/// Every tensor a model of `cfg` holds — the engine's own list for the architecture
/// ([`strata_engine::arch::tensor_list`], so a synthesized file has exactly what the loader
/// reads) — stored as `types` asks, with an untied output matrix.
///
/// Errors: a configuration the architecture rejects.
pub fn plan(cfg: &ModelConfig, types: TypeChoice) -> Result<Vec<Planned>> {
    let list = arch::tensor_list(cfg)?;
    let counters = Counters::new(&list);
    Ok(list
        .into_iter()
        .map(|t| planned(t, types, cfg, &counters))
        .collect())
}

/// llama-quantize's running counters: it visits the tensors in name order (its loader's
/// `weights_map` is a sorted map), counting `attn_v`-like and `ffn_down` tensors as it goes.
struct Counters {
    /// Names of each kind, sorted: a tensor's counter value is its index here.
    attn_v: Vec<String>,
    ffn_down: Vec<String>,
}

impl Counters {
    fn new(list: &[TensorSpec]) -> Counters {
        let sorted = |keep: &dyn Fn(&str) -> bool| {
            let mut v: Vec<String> = (list.iter().map(|t| &t.name))
                .filter(|n| keep(n))
                .cloned()
                .collect();
            v.sort();
            v
        };
        Counters {
            attn_v: sorted(&is_attn_v),
            ffn_down: sorted(&|n: &str| n.contains("ffn_down")),
        }
    }

    /// (index of `name` among the tensors of its kind, count of that kind).
    fn attn_v(&self, name: &str) -> (usize, usize) {
        let i = self.attn_v.binary_search_by(|n| n.as_str().cmp(name));
        (i.unwrap_or(0), self.attn_v.len())
    }

    fn ffn_down(&self, name: &str) -> usize {
        let i = self.ffn_down.binary_search_by(|n| n.as_str().cmp(name));
        i.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{Spec, SynthArch};
    use super::*;

    /// The configuration the engine reads from `spec`'s metadata (with a `n_vocab` vocabulary).
    fn config(spec: &Spec) -> ModelConfig {
        let mut w = strata_gguf::GgufWriter::new();
        spec.write_metadata(&mut w, 0);
        let a = spec.arch.name();
        w.set(format!("{a}.vocab_size"), spec.n_vocab as u32);
        ModelConfig::from_metadata(w.metadata()).unwrap()
    }

    #[test]
    fn qwen3_30b_a3b_has_30b_parameters_and_q4_k_experts() {
        let mut s = Spec::preset("qwen3-30b-a3b").unwrap();
        s.n_vocab = 151_936;
        let t = plan(&config(&s), TypeChoice::parse("q4_k").unwrap()).unwrap();
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

    /// The run size each preset's model loads with (`strata_engine::model::default_ubatch`):
    /// 2048 where 512-token runs give a routed expert about 10 tokens (512 experts, top-10),
    /// 512 for dense models and for Qwen3-30B-A3B (128 experts, top-8: 32 an expert); 512 for
    /// every model whose layers run on a device.
    #[test]
    fn moe_models_with_many_experts_a_token_default_to_larger_runs() {
        use strata_engine::model::default_ubatch;
        for (preset, want) in [
            ("qwen3-next-80b-a3b", 2048),
            ("qwen3.8-flash-next", 2048),
            ("qwen3-30b-a3b", 512),
            ("tiny-llama", 512),
            ("tiny-qwen3moe", 512),
        ] {
            let mut s = Spec::preset(preset).unwrap();
            s.n_vocab = s.n_vocab.max(256);
            let c = config(&s);
            assert_eq!(default_ubatch(&c, false), want, "{preset}");
            assert_eq!(default_ubatch(&c, true), 512, "{preset} on a device");
        }
    }

    /// A matrix `name` of a 48-layer model with 12 query heads per KV head and 512 experts.
    /// (As if each layer had one `attn_v`-like and one `ffn_down` tensor.)
    fn site(name: &str) -> Site<'_> {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next()?.parse().ok());
        let il = layer.unwrap_or(0);
        Site {
            name,
            layer,
            n_layer: 48,
            n_gqa: 12,
            n_expert: 512,
            attn_v: (il, 48),
            ffn_down: (il, 48),
        }
    }

    #[test]
    fn rows_that_are_not_whole_blocks_fall_back() {
        let q4k = TypeChoice::Pure(GgmlType::Q4_K);
        let w = site("blk.10.ffn_up.weight");
        assert_eq!(q4k.matrix_type(w, 512), GgmlType::Q4_K);
        assert_eq!(q4k.matrix_type(w, 64), GgmlType::Q5_0);
        assert_eq!(q4k.matrix_type(w, 160), GgmlType::Q5_0);
        assert_eq!(
            TypeChoice::Q4KM.matrix_type(site("output.weight"), 128),
            GgmlType::Q8_0
        );
        let q40 = TypeChoice::parse("q4_0").unwrap();
        assert_eq!(q40.matrix_type(w, 160), GgmlType::Q4_0);
        assert_eq!(q4k.matrix_type(w, 40), GgmlType::F16);
        assert_eq!(
            TypeChoice::Q4KM.matrix_type(site("output.weight"), 512),
            GgmlType::Q6_K
        );
        // 256-wide i-quants fall back to IQ4_NL, Q2_K to Q4_0 (llama.cpp's tensor_type_fallback).
        let iq3 = TypeChoice::Iq3Xxs;
        assert_eq!(iq3.matrix_type(w, 160), GgmlType::IQ4_NL);
        assert_eq!(
            TypeChoice::Iq2Xs.matrix_type(site("token_embd.weight"), 160),
            GgmlType::Q4_0
        );
        assert_eq!(
            TypeChoice::parse("q2_k").unwrap(),
            TypeChoice::Pure(GgmlType::Q2_K)
        );
        assert_eq!(
            TypeChoice::parse("IQ4_NL").unwrap(),
            TypeChoice::Pure(GgmlType::IQ4_NL)
        );
        assert!(TypeChoice::parse("iq1_m").is_err());
        assert!(TypeChoice::parse("q8_k").is_err());
        assert!(TypeChoice::parse("nope").is_err());
    }

    #[test]
    fn iq_mixes_follow_llama_quantize() {
        let t = |mix: TypeChoice, name: &str| mix.matrix_type(site(name), 2560);
        let iq3 = TypeChoice::Iq3Xxs;
        assert_eq!(t(iq3, "output.weight"), GgmlType::Q5_K);
        assert_eq!(t(iq3, "token_embd.weight"), GgmlType::IQ3_S);
        assert_eq!(t(iq3, "blk.0.attn_qkv.weight"), GgmlType::Q4_K);
        assert_eq!(t(iq3, "blk.3.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(t(iq3, "blk.3.attn_q.weight"), GgmlType::IQ2_S);
        assert_eq!(t(iq3, "blk.3.attn_k.weight"), GgmlType::IQ2_S);
        assert_eq!(t(iq3, "blk.3.attn_output.weight"), GgmlType::IQ3_S);
        assert_eq!(t(iq3, "blk.0.ffn_down_exps.weight"), GgmlType::IQ3_XXS);
        assert_eq!(t(iq3, "blk.20.ffn_up_exps.weight"), GgmlType::IQ3_XXS);
        let iq2 = TypeChoice::Iq2Xs;
        assert_eq!(t(iq2, "output.weight"), GgmlType::Q5_K);
        assert_eq!(t(iq2, "token_embd.weight"), GgmlType::Q2_K);
        assert_eq!(t(iq2, "blk.0.attn_qkv.weight"), GgmlType::Q4_K);
        assert_eq!(t(iq2, "blk.0.ffn_down_exps.weight"), GgmlType::Q2_K);
        assert_eq!(t(iq2, "blk.6.ffn_down_exps.weight"), GgmlType::IQ2_XS);
        assert_eq!(t(iq2, "blk.3.attn_output.weight"), GgmlType::IQ2_XS);
        assert_eq!(t(iq2, "blk.20.ffn_gate_exps.weight"), GgmlType::IQ2_XS);
        assert_eq!((iq3.file_type(), iq2.file_type()), (23, 20));
    }

    #[test]
    fn qwen3next_layers_match_llama_cpp_names() {
        let mut s = Spec::tiny(SynthArch::Qwen3next);
        s.n_vocab = 768;
        let t = plan(&config(&s), TypeChoice::Pure(GgmlType::F32)).unwrap();
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

    #[test]
    fn qwen3_8_flash_next_matches_the_documented_shapes() {
        let mut s = Spec::preset("qwen3.8-flash-next").unwrap();
        s.n_vocab = 248_320;
        let t = plan(&config(&s), TypeChoice::parse("q4_0").unwrap()).unwrap();
        let get = |n: &str| {
            let t = t.iter().find(|t| t.name == n);
            t.unwrap_or_else(|| panic!("{n} missing")).clone()
        };
        let shape = |n: &str| get(n).shape;
        // docs/qwen4exp.md, "Tensors" (the real model's sizes).
        assert_eq!(shape("token_embd.weight"), [2560, 248_320]);
        assert_eq!(shape("output_hc_norm.weight"), [10240]);
        assert_eq!(shape("output_hc_down.weight"), [10240, 320]);
        assert_eq!(shape("output_hc_up.weight"), [320, 10240]);
        assert_eq!(shape("blk.0.attn_qkv.weight"), [2560, 10240]);
        assert_eq!(shape("blk.0.attn_gate.weight"), [2560, 6144]);
        assert_eq!(shape("blk.0.ssm_conv1d.weight"), [4, 10240]);
        assert_eq!(shape("blk.0.ssm_dt.bias"), [48]);
        assert_eq!(shape("blk.0.ssm_norm.weight"), [128]);
        assert_eq!(shape("blk.0.hc_attn_inject.weight"), [10240, 4]);
        assert_eq!(shape("blk.3.attn_q.weight"), [2560, 12288]);
        assert_eq!(shape("blk.3.attn_k.weight"), [2560, 512]);
        assert_eq!(shape("blk.3.attn_q_norm.weight"), [256]);
        assert_eq!(shape("blk.3.attn_output.weight"), [6144, 2560]);
        assert_eq!(shape("blk.3.indexer.q_proj.weight"), [2560, 512]);
        assert_eq!(shape("blk.3.indexer.k_proj.weight"), [2560, 128]);
        assert_eq!(shape("blk.1.ple_key.weight"), [2560, 10240]);
        assert_eq!(shape("blk.1.ple_value.weight"), [2560, 2560]);
        assert_eq!(shape("blk.1.ple_conv1d.weight"), [4, 10240]);
        assert_eq!(shape("blk.47.ffn_gate_inp.weight"), [2560, 512]);
        assert_eq!(shape("blk.47.ffn_up_exps.weight"), [2560, 640, 512]);
        assert_eq!(shape("blk.47.ffn_down_exps.weight"), [640, 2560, 512]);
        assert_eq!(shape("blk.47.ffn_down_shexp.weight"), [640, 2560]);
        assert!(!t.iter().any(|t| t.name.starts_with("blk.0.ple")));
        assert!(!t.iter().any(|t| t.name == "blk.4.attn_q.weight"));
        let attn = t
            .iter()
            .filter(|t| t.name.ends_with("attn_q.weight"))
            .count();
        let qsa = t
            .iter()
            .filter(|t| t.name.ends_with("indexer.k_proj.weight"))
            .count();
        // 12 trunk attention layers and the MTP layer, all with an indexer.
        assert_eq!((attn, qsa), (13, 13));
        let experts = t.iter().filter(|t| t.name.ends_with("ffn_up_exps.weight"));
        assert_eq!(experts.map(|t| t.shape[2]).sum::<u64>(), 25_088);
        // The MTP layer (blk.48): [fc_embedding | fc_hidden], its norms and final mixer.
        assert_eq!(shape("blk.48.nextn.eh_proj.weight"), [5120, 2560]);
        assert_eq!(shape("blk.48.nextn.enorm.weight"), [2560]);
        assert_eq!(shape("blk.48.nextn.hnorm.weight"), [10240]);
        assert_eq!(shape("blk.48.nextn.hc_head_down.weight"), [10240, 320]);
        assert_eq!(shape("blk.48.ffn_up_exps.weight"), [2560, 640, 512]);
        assert!(!t.iter().any(|t| t.name.starts_with("blk.48.ssm")));
        // The 320,001,536-row table: Q4_0 rows of 160 are 5 blocks of 18 bytes, 28.8 GB.
        let table = get("per_layer_token_embd.weight");
        assert_eq!(table.shape, [160, 320_001_536]);
        assert_eq!(table.ty, GgmlType::Q4_0);
        let bytes = table.ty.row_bytes(160).unwrap() * table.rows();
        assert_eq!(bytes, 28_800_138_240);
        // Under the Q4_K_M mix the table falls back to Q5_0 as in llama-quantize.
        let m = plan(&config(&s), TypeChoice::Q4KM).unwrap();
        let ty = |n: &str| m.iter().find(|t| t.name == n).unwrap().ty;
        assert_eq!(ty("per_layer_token_embd.weight"), GgmlType::Q5_0);
        assert_eq!(ty("blk.3.indexer.q_proj.weight"), GgmlType::F32);
        assert_eq!(ty("blk.0.hc_ffn_down.weight"), GgmlType::Q6_K);
        assert_eq!(ty("blk.0.ffn_down_exps.weight"), GgmlType::Q8_0);
        assert_eq!(ty("blk.10.ffn_up_exps.weight"), GgmlType::Q4_K);
    }
}
