//! Tiny random llama-architecture GGUFs: 2 layers, width 64, 4 query / 2 KV heads, FFN 128,
//! and a byte-level vocabulary of 256 byte tokens plus `<|endoftext|>` (id 256, BOS) with no
//! merges, so text tokenizes to BOS followed by its bytes.
//!
//! With `passthrough`, `attn_output` and `ffn_down` are zero: every layer adds nothing to the
//! residual, so the logits at a position depend only on that position's token —
//! `output · (rms_norm(embd[t]) ⊙ output_norm)` — which a test can compute by hand.

use std::path::Path;

use strata_gguf::{GgmlType, GgufWriter};

/// Width of the residual stream.
pub const N_EMBD: usize = 64;
/// Vocabulary: 256 bytes + `<|endoftext|>`.
pub const N_VOCAB: usize = 257;
/// The BOS / EOS id.
pub const BOS: u32 = 256;
/// RMS-norm epsilon written to the file.
pub const RMS_EPS: f32 = 1e-5;
const N_LAYER: usize = 2;
const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const N_FF: usize = 128;

/// Deterministic pseudo-random numbers in [-1, 1) (xorshift64*).
pub struct Rng(u64);

impl Rng {
    /// A generator; the same seed gives the same numbers.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number in [-1, 1).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (x as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` numbers scaled by `scale`.
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

/// GPT-2's byte-to-unicode table: the token text of each byte.
fn byte_token(b: u8) -> String {
    let printable =
        |c: u32| (33..=126).contains(&c) || (161..=172).contains(&c) || (174..=255).contains(&c);
    let mut n = 0;
    for c in 0..=255u32 {
        if c == b as u32 {
            let code = if printable(c) { c } else { 256 + n };
            return char::from_u32(code).unwrap().to_string();
        }
        if !printable(c) {
            n += 1;
        }
    }
    unreachable!()
}

/// The f32 weights of one tiny model, generated from `seed`.
pub struct Weights {
    /// `[N_VOCAB][N_EMBD]`.
    pub token_embd: Vec<f32>,
    /// `[N_EMBD]`.
    pub output_norm: Vec<f32>,
    /// `[N_VOCAB][N_EMBD]`.
    pub output: Vec<f32>,
    passthrough: bool,
    seed: u64,
}

impl Weights {
    /// Weights from `seed`; see the module docs for `passthrough`.
    pub fn new(seed: u64, passthrough: bool) -> Weights {
        let mut r = Rng::new(seed);
        Weights {
            token_embd: r.vec(N_VOCAB * N_EMBD, 1.0),
            output_norm: (0..N_EMBD).map(|_| 1.0 + 0.2 * r.next()).collect(),
            output: r.vec(N_VOCAB * N_EMBD, 0.6),
            passthrough,
            seed,
        }
    }

    /// Writes the model with every matrix stored as `ty` (norms stay F32).
    pub fn write(&self, path: &Path, ty: GgmlType) {
        let mut w = GgufWriter::new();
        w.set("general.architecture", "llama");
        w.set("general.name", "strata-tiny");
        for (k, v) in [
            ("block_count", N_LAYER),
            ("embedding_length", N_EMBD),
            ("attention.head_count", N_HEAD),
            ("attention.head_count_kv", N_HEAD_KV),
            ("feed_forward_length", N_FF),
            ("context_length", 512),
        ] {
            w.set(format!("llama.{k}"), v as u32);
        }
        w.set("llama.attention.layer_norm_rms_epsilon", RMS_EPS);
        let mut tokens: Vec<String> = (0..=255u8).map(byte_token).collect();
        tokens.push("<|endoftext|>".into());
        let mut types = vec![1i32; 256];
        types.push(3);
        w.set("tokenizer.ggml.model", "gpt2");
        w.set("tokenizer.ggml.pre", "default");
        w.set("tokenizer.ggml.tokens", tokens);
        w.set("tokenizer.ggml.token_type", types);
        w.set("tokenizer.ggml.merges", Vec::<&str>::new());
        w.set("tokenizer.ggml.bos_token_id", BOS);
        w.set("tokenizer.ggml.eos_token_id", BOS);
        w.set("tokenizer.ggml.add_bos_token", true);

        let matrix = |w: &mut GgufWriter, name: &str, data: &[f32], cols: usize| {
            let rows = data.len() / cols;
            let rb = ty.row_bytes(cols as u64).unwrap() as usize;
            let mut bytes = vec![0u8; rows * rb];
            for (src, dst) in data.chunks_exact(cols).zip(bytes.chunks_exact_mut(rb)) {
                strata_quant::quantize(ty, src, dst).unwrap();
            }
            w.add_tensor(name, ty, &[cols as u64, rows as u64], &bytes)
                .unwrap();
        };
        let vector = |w: &mut GgufWriter, name: &str, data: &[f32]| {
            let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
            w.add_tensor(name, GgmlType::F32, &[data.len() as u64], &bytes)
                .unwrap();
        };
        matrix(&mut w, "token_embd.weight", &self.token_embd, N_EMBD);
        vector(&mut w, "output_norm.weight", &self.output_norm);
        matrix(&mut w, "output.weight", &self.output, N_EMBD);
        let mut r = Rng::new(self.seed ^ 0xABCD);
        let head_dim = N_EMBD / N_HEAD;
        let kv = N_HEAD_KV * head_dim;
        let s = 1.0 / (N_EMBD as f32).sqrt();
        let out_scale = if self.passthrough { 0.0 } else { 1.0 };
        for il in 0..N_LAYER {
            let n = |x: &str| format!("blk.{il}.{x}");
            vector(&mut w, &n("attn_norm.weight"), &vec![1.0; N_EMBD]);
            matrix(
                &mut w,
                &n("attn_q.weight"),
                &r.vec(N_EMBD * N_EMBD, s),
                N_EMBD,
            );
            matrix(&mut w, &n("attn_k.weight"), &r.vec(kv * N_EMBD, s), N_EMBD);
            matrix(&mut w, &n("attn_v.weight"), &r.vec(kv * N_EMBD, s), N_EMBD);
            matrix(
                &mut w,
                &n("attn_output.weight"),
                &r.vec(N_EMBD * N_EMBD, s * out_scale),
                N_EMBD,
            );
            vector(&mut w, &n("ffn_norm.weight"), &vec![1.0; N_EMBD]);
            matrix(
                &mut w,
                &n("ffn_gate.weight"),
                &r.vec(N_FF * N_EMBD, s),
                N_EMBD,
            );
            matrix(
                &mut w,
                &n("ffn_up.weight"),
                &r.vec(N_FF * N_EMBD, s),
                N_EMBD,
            );
            matrix(
                &mut w,
                &n("ffn_down.weight"),
                &r.vec(N_EMBD * N_FF, out_scale / (N_FF as f32).sqrt()),
                N_FF,
            );
        }
        w.write_to_path(path).unwrap();
    }
}
