//! What `strata synth` builds: an architecture and its dimensions, from a named preset
//! (shapes from the models' public `config.json`) or explicit flags, and the GGUF metadata
//! keys llama.cpp reads for it (`src/llama-arch.cpp` names; checked against the tiny
//! checkpoints that `scripts/make_tiny_models.py` converts with llama.cpp's own converter).

use anyhow::{bail, Result};
use strata_gguf::GgufWriter;

/// Architectures `strata synth` can write (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SynthArch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Qwen3moe,
    Qwen3next,
    Qwen4exp,
}

impl SynthArch {
    /// The GGUF key prefix and `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            SynthArch::Llama => "llama",
            SynthArch::Qwen2 => "qwen2",
            SynthArch::Qwen3 => "qwen3",
            SynthArch::Gemma3 => "gemma3",
            SynthArch::Qwen3moe => "qwen3moe",
            SynthArch::Qwen3next => "qwen3next",
            SynthArch::Qwen4exp => "qwen4exp",
        }
    }

    /// True for architectures with routed experts.
    pub fn is_moe(self) -> bool {
        matches!(
            self,
            SynthArch::Qwen3moe | SynthArch::Qwen3next | SynthArch::Qwen4exp
        )
    }

    /// True for the hybrid DeltaNet + gated attention architectures.
    pub fn is_hybrid(self) -> bool {
        matches!(self, SynthArch::Qwen3next | SynthArch::Qwen4exp)
    }
}

/// Gated-DeltaNet shapes of a qwen3next model (`{arch}.ssm.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ssm {
    /// Causal conv kernel width (`ssm.conv_kernel`, HF `linear_conv_kernel_dim`).
    pub conv_kernel: usize,
    /// Key head width (`ssm.state_size`, HF `linear_key_head_dim`).
    pub state_size: usize,
    /// Key heads (`ssm.group_count`, HF `linear_num_key_heads`).
    pub group_count: usize,
    /// Value heads (`ssm.time_step_rank`, HF `linear_num_value_heads`).
    pub time_step_rank: usize,
    /// Value width, value heads × value head width (`ssm.inner_size`).
    pub inner_size: usize,
    /// Every `full_attention_interval`-th layer is full attention, the rest DeltaNet.
    pub full_attention_interval: usize,
}

/// qwen4exp's hyper-connections (`{arch}.hyper_connection.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hyper {
    /// Residual streams (`hyper_connection.count`).
    pub count: usize,
    /// Low rank of the stream gates (`hyper_connection.low_rank`).
    pub rank: usize,
}

/// qwen4exp's QSA indexer (`{arch}.attention.indexer.*`), on every attention layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indexer {
    pub n_head: usize,
    pub head_dim: usize,
    /// Budget in tokens (`attention.indexer.top_k`), a multiple of `ratio`.
    pub top_k: usize,
    /// Block size of every attention layer (`attention.compress_ratios`; 0 = dense).
    pub ratio: usize,
}

/// qwen4exp's PLE n-gram hash embedding on one layer (`{arch}.ple.*`); the hash constants
/// are derived as the checkpoint derives them (docs/qwen4exp.md, "The hash").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ple {
    /// The PLE layer (a DeltaNet layer); dropped when `--layers` cuts it off.
    pub layer: usize,
    pub ngram: usize,
    pub heads_per_ngram: usize,
    pub conv_kernel: usize,
    /// Row width of the table (`embedding_length_per_layer_input`); llama.cpp needs
    /// `(ngram - 1) * heads_per_ngram * row == embd`.
    pub row: usize,
    /// `ngram_vocab_size_base`: head `h` has the `(h+1)`-th prime >= this many rows.
    pub vocab_base: u64,
    /// `ple.image_token_id` (written when inside the vocabulary).
    pub image_token: Option<u64>,
}

/// The transformers checkpoint's seed of the n-gram multipliers.
const PLE_SEED: u64 = 1234;
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// `_splitmix64` of transformers' Qwen4ExpTextNGramEmbedding.
fn splitmix64(x: u64) -> u64 {
    let w = x.wrapping_add(GAMMA);
    let y = (w ^ (w >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (y ^ (y >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

impl Ple {
    pub fn n_heads(&self) -> usize {
        (self.ngram - 1) * self.heads_per_ngram
    }

    /// `ple.layer_multipliers` for a vocabulary of `n_vocab` (`_build_layer_multipliers`,
    /// PLE layer index 0): odd, and below `(2^63-1) / n_vocab`.
    pub fn multipliers(&self, n_vocab: usize) -> Vec<u64> {
        let half = ((i64::MAX as u64 / n_vocab.max(1) as u64) / 2).max(1);
        let ple_index = 0u64;
        (0..self.ngram as u64)
            .map(|j| {
                let x = PLE_SEED
                    .wrapping_add(10_007 * ple_index)
                    .wrapping_add(GAMMA.wrapping_mul(j + 1));
                2 * (splitmix64(x) % half) + 1
            })
            .collect()
    }

    /// `ple.head_vocab_sizes`: the first `n_heads` primes >= `vocab_base`.
    pub fn head_vocab_sizes(&self) -> Vec<u64> {
        (self.vocab_base..)
            .filter(|n| is_prime(*n))
            .take(self.n_heads())
            .collect()
    }

    /// `ple.head_offsets`: prefix sums of the head sizes.
    pub fn head_offsets(&self) -> Vec<u64> {
        self.head_vocab_sizes()
            .iter()
            .scan(0u64, |acc, v| {
                let o = *acc;
                *acc += v;
                Some(o)
            })
            .collect()
    }
}

/// The four M-RoPE sections of `n_rot` rotated dims (`n_rot / 2` frequencies split 3 ways,
/// as `[11, 11, 10, 0]` for 64).
fn rope_sections(n_rot: usize) -> Vec<i32> {
    let n = n_rot / 2;
    let s0 = n.div_ceil(3);
    let s1 = (n - s0).div_ceil(2);
    vec![s0 as i32, s1 as i32, (n - s0 - s1) as i32, 0]
}

/// Every dimension of one synthetic model.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub arch: SynthArch,
    /// `general.name`.
    pub name: String,
    pub n_layer: usize,
    /// MTP draft layers after the trunk (`nextn_predict_layers`, written as `blk.<n_layer>.*`
    /// with `block_count = n_layer + n_mtp`); qwen4exp only, 0 or 1.
    pub n_mtp: usize,
    /// Residual width.
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    /// Dense FFN width (`feed_forward_length`; written for MoE models too, as HF has it).
    pub n_ff: usize,
    /// Routed experts per layer (0 for dense models).
    pub n_expert: usize,
    pub n_expert_used: usize,
    /// Hidden width of one routed expert.
    pub n_ff_exp: usize,
    /// Hidden width of the shared expert (0 = none; qwen3next has one).
    pub n_ff_shexp: usize,
    /// Vocabulary size; set from the tokenizer when it is copied.
    pub n_vocab: usize,
    /// `context_length`.
    pub n_ctx: usize,
    pub rope_base: f32,
    /// Rotated dims per head (`rope.dimension_count`).
    pub n_rot: usize,
    pub rms_eps: f32,
    /// Gemma 3 sliding window (0 = none).
    pub sliding_window: usize,
    pub ssm: Option<Ssm>,
    /// qwen4exp only.
    pub hyper: Option<Hyper>,
    pub indexer: Option<Indexer>,
    pub ple: Option<Ple>,
}

/// Names accepted by `--preset`.
pub const PRESETS: [&str; 10] = [
    "qwen3-30b-a3b",
    "qwen3-next-80b-a3b",
    "qwen3.8-flash-next",
    "tiny-llama",
    "tiny-qwen2",
    "tiny-qwen3",
    "tiny-gemma3",
    "tiny-qwen3moe",
    "tiny-qwen3next",
    "tiny-qwen4exp",
];

impl Spec {
    /// Small defaults for `arch`: 2 layers (4 for qwen3next and qwen4exp: 3 DeltaNet + 1
    /// attention), width 256, 4 heads of 64, 2 KV heads, 8 experts of width 256 with 2 used.
    /// qwen4exp adds 4 hyper-connection streams of rank 32, a QSA indexer of 2 heads x 32
    /// (budget 16, blocks of 4) and PLE on layer 1 (3-grams, 2 heads each, rows of 64, primes
    /// from 1000: a 4096-row table), as `scripts/make_tiny_qwen4exp.py`'s reference model.
    pub fn tiny(arch: SynthArch) -> Spec {
        let moe = arch.is_moe();
        let next = arch.is_hybrid();
        let q4e = arch == SynthArch::Qwen4exp;
        Spec {
            arch,
            name: format!("synth-tiny-{}", arch.name()),
            n_layer: if next { 4 } else { 2 },
            n_mtp: usize::from(q4e),
            n_embd: 256,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 64,
            n_ff: 512,
            n_expert: if moe { 8 } else { 0 },
            n_expert_used: if moe { 2 } else { 0 },
            n_ff_exp: if moe { 256 } else { 0 },
            n_ff_shexp: if next { 256 } else { 0 },
            n_vocab: 0,
            n_ctx: 4096,
            rope_base: if arch == SynthArch::Llama {
                10_000.0
            } else {
                1e6
            },
            n_rot: if next { 16 } else { 64 },
            rms_eps: 1e-6,
            sliding_window: if arch == SynthArch::Gemma3 { 8 } else { 0 },
            ssm: next.then_some(Ssm {
                conv_kernel: 4,
                state_size: 64,
                group_count: 2,
                time_step_rank: 4,
                inner_size: 256,
                full_attention_interval: 4,
            }),
            hyper: q4e.then_some(Hyper { count: 4, rank: 32 }),
            indexer: q4e.then_some(Indexer {
                n_head: 2,
                head_dim: 32,
                top_k: 16,
                ratio: 4,
            }),
            ple: q4e.then_some(Ple {
                layer: 1,
                ngram: 3,
                heads_per_ngram: 2,
                conv_kernel: 4,
                row: 64,
                vocab_base: 1000,
                image_token: None,
            }),
        }
    }

    /// A named preset (see [`PRESETS`]).
    ///
    /// Errors: an unknown name, listing the known ones.
    pub fn preset(name: &str) -> Result<Spec> {
        if let Some(arch) = name.strip_prefix("tiny-") {
            let arch = <SynthArch as clap::ValueEnum>::from_str(arch, true);
            if let Ok(arch) = arch {
                return Ok(Spec::tiny(arch));
            }
        }
        let spec = match name {
            // Qwen/Qwen3-30B-A3B config.json.
            "qwen3-30b-a3b" => Spec {
                arch: SynthArch::Qwen3moe,
                name: "synth-qwen3-30b-a3b".into(),
                n_layer: 48,
                n_mtp: 0,
                n_embd: 2048,
                n_head: 32,
                n_head_kv: 4,
                head_dim: 128,
                n_ff: 6144,
                n_expert: 128,
                n_expert_used: 8,
                n_ff_exp: 768,
                n_ff_shexp: 0,
                n_vocab: 151_936,
                n_ctx: 40_960,
                rope_base: 1e6,
                n_rot: 128,
                rms_eps: 1e-6,
                sliding_window: 0,
                ssm: None,
                hyper: None,
                indexer: None,
                ple: None,
            },
            // Qwen/Qwen3-Next-80B-A3B-Instruct config.json (partial_rotary_factor 0.25).
            "qwen3-next-80b-a3b" => Spec {
                arch: SynthArch::Qwen3next,
                name: "synth-qwen3-next-80b-a3b".into(),
                n_layer: 48,
                n_mtp: 0,
                n_embd: 2048,
                n_head: 16,
                n_head_kv: 2,
                head_dim: 256,
                n_ff: 5120,
                n_expert: 512,
                n_expert_used: 10,
                n_ff_exp: 512,
                n_ff_shexp: 512,
                n_vocab: 151_936,
                n_ctx: 262_144,
                rope_base: 1e7,
                n_rot: 64,
                rms_eps: 1e-6,
                sliding_window: 0,
                ssm: Some(Ssm {
                    conv_kernel: 4,
                    state_size: 128,
                    group_count: 16,
                    time_step_rank: 32,
                    inner_size: 4096,
                    full_attention_interval: 4,
                }),
                hyper: None,
                indexer: None,
                ple: None,
            },
            // Qwen3.8-Flash-Next: docs/qwen4exp.md, "The real model".
            "qwen3.8-flash-next" => Spec {
                arch: SynthArch::Qwen4exp,
                name: "synth-qwen3.8-flash-next".into(),
                n_layer: 48,
                n_mtp: 1,
                n_embd: 2560,
                n_head: 24,
                n_head_kv: 2,
                head_dim: 256,
                n_ff: 640,
                n_expert: 512,
                n_expert_used: 10,
                n_ff_exp: 640,
                n_ff_shexp: 640,
                n_vocab: 248_320,
                n_ctx: 262_144,
                rope_base: 1e7,
                n_rot: 64,
                rms_eps: 1e-6,
                sliding_window: 0,
                ssm: Some(Ssm {
                    conv_kernel: 4,
                    state_size: 128,
                    group_count: 16,
                    time_step_rank: 48,
                    inner_size: 6144,
                    full_attention_interval: 4,
                }),
                hyper: Some(Hyper {
                    count: 4,
                    rank: 320,
                }),
                indexer: Some(Indexer {
                    n_head: 4,
                    head_dim: 128,
                    top_k: 2048,
                    ratio: 4,
                }),
                ple: Some(Ple {
                    layer: 1,
                    ngram: 3,
                    heads_per_ngram: 8,
                    conv_kernel: 4,
                    row: 160,
                    vocab_base: 20_000_000,
                    image_token: Some(248_056),
                }),
            },
            _ => bail!(
                "unknown preset '{name}'; known presets: {}",
                PRESETS.join(", ")
            ),
        };
        Ok(spec)
    }

    /// Checks that the shapes are consistent.
    ///
    /// Errors: a zero dimension, heads not divisible by KV heads, more experts used than
    /// exist, an odd or too large rotation width, a bad DeltaNet shape.
    pub fn validate(&self) -> Result<()> {
        let dims = [
            ("layers", self.n_layer),
            ("embd", self.n_embd),
            ("heads", self.n_head),
            ("kv-heads", self.n_head_kv),
            ("head-dim", self.head_dim),
            ("ff", self.n_ff),
        ];
        if let Some((k, _)) = dims.iter().find(|(_, v)| *v == 0) {
            bail!("--{k} must be at least 1");
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            bail!(
                "--heads {} is not a multiple of --kv-heads {}",
                self.n_head,
                self.n_head_kv
            );
        }
        if self.n_rot > self.head_dim || !self.n_rot.is_multiple_of(2) {
            bail!(
                "rotated dims {} must be even and at most head-dim {}",
                self.n_rot,
                self.head_dim
            );
        }
        if self.arch.is_moe() {
            if self.n_expert == 0 || self.n_ff_exp == 0 {
                bail!("{} needs --experts and --expert-ff", self.arch.name());
            }
            if self.n_expert_used == 0 || self.n_expert_used > self.n_expert {
                bail!(
                    "--experts-used {} must be between 1 and --experts {}",
                    self.n_expert_used,
                    self.n_expert
                );
            }
        }
        if let Some(s) = &self.ssm {
            if s.group_count == 0
                || s.time_step_rank % s.group_count != 0
                || s.inner_size % s.time_step_rank != 0
                || s.full_attention_interval == 0
            {
                bail!("inconsistent DeltaNet shape {s:?}");
            }
        }
        if self.n_mtp > 1 || (self.n_mtp > 0 && self.arch != SynthArch::Qwen4exp) {
            bail!(
                "{} MTP layers: only qwen4exp has one (at most 1)",
                self.n_mtp
            );
        }
        if let Some(ix) = &self.indexer {
            if ix.n_head == 0 || ix.head_dim < self.n_rot || ix.top_k == 0 {
                bail!(
                    "indexer {ix:?} must have heads at least {} wide",
                    self.n_rot
                );
            }
            if ix.ratio > 0 && !ix.top_k.is_multiple_of(ix.ratio) {
                bail!(
                    "indexer budget {} is not a multiple of its blocks of {}",
                    ix.top_k,
                    ix.ratio
                );
            }
        }
        if let Some(p) = self.ple_layer() {
            // llama.cpp loads ple_key as [H, hc*H] (docs/qwen4exp.md, disagreement 6).
            if p.n_heads() * p.row != self.n_embd {
                bail!(
                    "PLE rows of {} x {} heads must make the width {}",
                    p.row,
                    p.n_heads(),
                    self.n_embd
                );
            }
            if p.vocab_base < 2 {
                bail!("--ple-vocab-base must be at least 2");
            }
        }
        Ok(())
    }

    /// True when layer `il` of a qwen3next model is Gated DeltaNet (false: full attention,
    /// as is every MTP layer, `il >= n_layer`).
    pub fn is_recurrent(&self, il: usize) -> bool {
        il < self.n_layer
            && self
                .ssm
                .is_some_and(|s| !(il + 1).is_multiple_of(s.full_attention_interval))
    }

    /// Trunk and MTP layers: the length of the per-layer arrays and `block_count`.
    pub fn n_blocks(&self) -> usize {
        self.n_layer + self.n_mtp
    }

    /// The PLE layer, unless `--layers` cut it off or it is not a DeltaNet layer.
    pub fn ple_layer(&self) -> Option<Ple> {
        self.ple
            .filter(|p| p.layer < self.n_layer && self.is_recurrent(p.layer))
    }

    /// qwen4exp's keys beyond qwen3next's, with the types llama.cpp's converter writes
    /// (`conversion/qwen4exp.py`): M-RoPE sections, hyper-connections, the indexer and its
    /// compress ratio on every attention layer, and PLE with its hash constants for the
    /// vocabulary `n_vocab` (EOS: the tokenizer's `eos_token_id`, else the last token).
    fn write_qwen4exp(&self, w: &mut GgufWriter) {
        let a = self.arch.name();
        let u = |w: &mut GgufWriter, k: &str, v: usize| {
            w.set(format!("{a}.{k}"), v as u32);
        };
        w.set(
            format!("{a}.rope.dimension_sections"),
            rope_sections(self.n_rot),
        );
        if let Some(h) = &self.hyper {
            u(w, "hyper_connection.count", h.count);
            u(w, "hyper_connection.low_rank", h.rank);
        }
        if let Some(ix) = &self.indexer {
            u(w, "attention.indexer.head_count", ix.n_head);
            u(w, "attention.indexer.key_length", ix.head_dim);
            u(w, "attention.indexer.top_k", ix.top_k);
            let ratios: Vec<i32> = (0..self.n_blocks())
                .map(|il| match self.is_recurrent(il) {
                    true => 0,
                    false => ix.ratio as i32,
                })
                .collect();
            w.set(format!("{a}.attention.compress_ratios"), ratios);
        }
        if let Some(p) = self.ple_layer() {
            let eos = w
                .metadata()
                .u64("tokenizer.ggml.eos_token_id")
                .unwrap_or(self.n_vocab.saturating_sub(1) as u64);
            w.set(format!("{a}.ple.layers"), vec![p.layer as i32]);
            u(w, "ple.ngram_size", p.ngram);
            u(w, "ple.heads_per_ngram", p.heads_per_ngram);
            u(w, "ple.conv_kernel", p.conv_kernel);
            w.set(format!("{a}.ple.eos_token_id"), eos as u32);
            if let Some(img) = p.image_token.filter(|t| *t < self.n_vocab as u64) {
                w.set(format!("{a}.ple.image_token_id"), img as u32);
            }
            u(w, "embedding_length_per_layer_input", p.row);
            w.set(
                format!("{a}.ple.layer_multipliers"),
                p.multipliers(self.n_vocab),
            );
            w.set(format!("{a}.ple.head_offsets"), p.head_offsets());
            w.set(format!("{a}.ple.head_vocab_sizes"), p.head_vocab_sizes());
        }
    }

    /// Writes the architecture's metadata keys (not the tokenizer's).
    pub fn write_metadata(&self, w: &mut GgufWriter, file_type: u32) {
        let a = self.arch.name();
        w.set("general.architecture", a);
        w.set("general.type", "model");
        w.set("general.name", self.name.as_str());
        let u = |w: &mut GgufWriter, k: &str, v: usize| {
            w.set(format!("{a}.{k}"), v as u32);
        };
        u(w, "block_count", self.n_blocks());
        if self.n_mtp > 0 {
            u(w, "nextn_predict_layers", self.n_mtp);
        }
        u(w, "context_length", self.n_ctx);
        u(w, "embedding_length", self.n_embd);
        u(w, "feed_forward_length", self.n_ff);
        u(w, "attention.head_count", self.n_head);
        u(w, "attention.head_count_kv", self.n_head_kv);
        w.set(format!("{a}.rope.freq_base"), self.rope_base);
        w.set(
            format!("{a}.attention.layer_norm_rms_epsilon"),
            self.rms_eps,
        );
        u(w, "attention.key_length", self.head_dim);
        u(w, "attention.value_length", self.head_dim);
        if self.n_rot != self.head_dim || self.arch == SynthArch::Llama {
            u(w, "rope.dimension_count", self.n_rot);
        }
        if self.arch == SynthArch::Llama {
            u(w, "vocab_size", self.n_vocab);
        }
        if self.arch == SynthArch::Gemma3 && self.sliding_window > 0 {
            u(w, "attention.sliding_window", self.sliding_window);
            w.set(format!("{a}.rope.freq_base_swa"), 10_000f32);
        }
        if self.arch.is_moe() {
            u(w, "expert_count", self.n_expert);
            u(w, "expert_used_count", self.n_expert_used);
            u(w, "expert_feed_forward_length", self.n_ff_exp);
        }
        if self.n_ff_shexp > 0 {
            u(w, "expert_shared_feed_forward_length", self.n_ff_shexp);
        }
        if let Some(s) = &self.ssm {
            u(w, "ssm.conv_kernel", s.conv_kernel);
            u(w, "ssm.state_size", s.state_size);
            u(w, "ssm.group_count", s.group_count);
            u(w, "ssm.time_step_rank", s.time_step_rank);
            u(w, "ssm.inner_size", s.inner_size);
            let recurrent: Vec<bool> = (0..self.n_blocks())
                .map(|il| self.is_recurrent(il))
                .collect();
            w.set(format!("{a}.attention.recurrent_layers"), recurrent);
            u(w, "full_attention_interval", s.full_attention_interval);
        }
        if self.arch == SynthArch::Qwen4exp {
            self.write_qwen4exp(w);
        }
        w.set("general.file_type", file_type);
        w.set("general.quantization_version", 2u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_consistent() {
        for p in PRESETS {
            let s = Spec::preset(p).unwrap();
            s.validate().unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        assert!(Spec::preset("gpt-5").is_err());
    }

    #[test]
    fn qwen3next_has_one_attention_layer_in_four() {
        let s = Spec::tiny(SynthArch::Qwen3next);
        let kinds: Vec<bool> = (0..4).map(|il| s.is_recurrent(il)).collect();
        assert_eq!(kinds, [true, true, true, false]);
    }

    #[test]
    fn qwen3_8_flash_next_ple_constants_follow_the_checkpoint() {
        let s = Spec::preset("qwen3.8-flash-next").unwrap();
        let p = s.ple_layer().unwrap();
        assert_eq!((p.layer, p.n_heads(), p.n_heads() * p.row), (1, 16, 2560));
        let sizes = p.head_vocab_sizes();
        assert_eq!(sizes[0], 20_000_003);
        let offsets = p.head_offsets();
        assert_eq!(offsets[0], 0);
        // docs/qwen4exp.md: 320,001,446 rows, padded to 320,001,536.
        let rows = offsets[15] + sizes[15];
        assert_eq!(rows, 320_001_446);
        assert_eq!(rows.div_ceil(128) * 128, 320_001_536);
        let m = p.multipliers(248_320);
        assert_eq!(m.len(), 3);
        let limit = i64::MAX as u64 / 248_320;
        assert!(m.iter().all(|m| m % 2 == 1 && *m < limit), "{m:?}");
        assert_eq!(rope_sections(64), [11, 11, 10, 0]);
        assert_eq!(rope_sections(32), [6, 5, 5, 0]);
        // The tiny reference's primes from 1000 (make_tiny_qwen4exp.py).
        let t = Spec::tiny(SynthArch::Qwen4exp).ple.unwrap();
        assert_eq!(t.head_vocab_sizes(), [1009, 1013, 1019, 1021]);
        assert_eq!(t.head_offsets(), [0, 1009, 2022, 3041]);
        // As transformers derived them for the tiny reference (vocab 768, qwen4exp-tiny's GGUF).
        assert_eq!(
            t.multipliers(768),
            [4295158889762567, 11435418644576253, 7275717464594479]
        );
    }

    #[test]
    fn a_layer_cut_keeps_the_pattern_and_drops_ple_below_two_layers() {
        let mut s = Spec::preset("qwen3.8-flash-next").unwrap();
        let kinds: Vec<bool> = (0..8).map(|il| s.is_recurrent(il)).collect();
        assert_eq!(kinds, [true, true, true, false, true, true, true, false]);
        s.n_layer = 2;
        assert!(s.ple_layer().is_some());
        s.n_layer = 1;
        assert!(s.ple_layer().is_none());
        s.validate().unwrap();
    }
}
