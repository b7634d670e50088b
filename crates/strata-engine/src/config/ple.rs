//! PLE, per-layer n-gram hash embeddings (`qwen4exp`): on one layer, the n-grams ending at each
//! token are hashed into rows of a large table (`per_layer_token_embd`), and the rows are
//! injected into the residual streams through a gate and a dilated convolution
//! (docs/qwen4exp.md, "PLE").
//!
//! Keys `{arch}.ple.*` and `{arch}.embedding_length_per_layer_input` (llama.cpp
//! `conversion/qwen4exp.py`, `load_arch_hparams`; transformers `Qwen4ExpTextNGramEmbedding`,
//! `_build_layer_multipliers`). All are absent from files without PLE.

use strata_gguf::{Metadata, Value};

use crate::error::EngineError;

/// The converter pads the table to a multiple of this many rows
/// (`make_ngram_vocab_size_divisible_by`, 128 in every checkpoint; not a GGUF key).
pub const PLE_ROW_PADDING: u64 = 128;

/// Hash constants and shapes of the PLE layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PleConfig {
    /// The layer that carries PLE, 0-based (`ple.layers`; one layer, as in llama.cpp).
    pub layer: usize,
    /// Longest n-gram `n` (`ple.ngram_size`): orders 2..=n are hashed; also the dilation of
    /// the convolution.
    pub ngram: usize,
    /// Hashed heads per n-gram order (`ple.heads_per_ngram`).
    pub heads_per_ngram: usize,
    /// Taps `K` of the dilated depthwise convolution (`ple.conv_kernel`).
    pub conv_kernel: usize,
    /// The token that cuts n-grams (`ple.eos_token_id`); positions before the sequence start
    /// read as this token.
    pub eos: u64,
    /// Multiplier of each n-gram position, `n` values (`ple.layer_multipliers`).
    pub multipliers: Vec<u64>,
    /// First table row of each head (`ple.head_offsets`), `(n−1)·heads_per_ngram` values.
    pub offsets: Vec<u64>,
    /// Rows of each head (`ple.head_vocab_sizes`, primes).
    pub vocab_sizes: Vec<u64>,
    /// Width of one table row (`embedding_length_per_layer_input`).
    pub row: usize,
    /// Rows of the table: every head's rows, padded to [`PLE_ROW_PADDING`].
    pub n_rows: usize,
}

impl PleConfig {
    /// Reads the `ple.*` keys, `None` when the file has no `ple.layers`.
    ///
    /// Errors: a missing key, array lengths that disagree with the n-gram order and head
    /// count, a layer out of range or more than one PLE layer, a multiplier large enough for
    /// a token's product to overflow 63 bits, a head whose rows leave the table.
    pub fn from_metadata(
        meta: &Metadata,
        a: &str,
        n_layer: usize,
        n_vocab: usize,
    ) -> Result<Option<PleConfig>, EngineError> {
        let key = |k: &str| format!("{a}.ple.{k}");
        let bad = |k: &str, reason: String| EngineError::BadMetadata {
            key: key(k),
            reason,
        };
        let layers: Vec<i64> = match meta.get(&key("layers")) {
            None => return Ok(None),
            Some(Value::Array(_)) => meta.i64_array(&key("layers"))?,
            Some(_) => vec![meta.i64(&key("layers"))?],
        };
        let layer = match layers[..] {
            [] => return Ok(None),
            [l] if l >= 0 && (l as usize) < n_layer => l as usize,
            [l] => return Err(bad("layers", format!("layer {l} of {n_layer}"))),
            _ => {
                return Err(bad(
                    "layers",
                    format!("{} PLE layers; one is supported", layers.len()),
                ))
            }
        };
        let get = |k: &str| -> Result<usize, EngineError> { Ok(meta.u64(&key(k))? as usize) };
        let ngram = get("ngram_size")?;
        let heads_per_ngram = get("heads_per_ngram")?;
        let conv_kernel = get("conv_kernel")?;
        let eos = meta.u64(&key("eos_token_id"))?;
        let row = meta.u64(&format!("{a}.embedding_length_per_layer_input"))? as usize;
        let multipliers = meta.u64_array(&key("layer_multipliers"))?;
        let offsets = meta.u64_array(&key("head_offsets"))?;
        let vocab_sizes = meta.u64_array(&key("head_vocab_sizes"))?;
        if ngram < 2 || heads_per_ngram == 0 || conv_kernel == 0 || row == 0 {
            let reason = format!(
                "n-grams up to {ngram}, {heads_per_ngram} heads each, conv kernel {conv_kernel}, rows of {row}"
            );
            return Err(bad("ngram_size", reason));
        }
        let n_heads = (ngram - 1) * heads_per_ngram;
        if multipliers.len() != ngram {
            let reason = format!("{} values for n-grams of {ngram}", multipliers.len());
            return Err(bad("layer_multipliers", reason));
        }
        let limit = i64::MAX as u64 / n_vocab.max(1) as u64;
        if let Some(m) = multipliers.iter().find(|m| **m > limit) {
            let reason = format!("{m} times a token id can overflow 63 bits");
            return Err(bad("layer_multipliers", reason));
        }
        for (k, v) in [
            ("head_offsets", &offsets),
            ("head_vocab_sizes", &vocab_sizes),
        ] {
            if v.len() != n_heads {
                return Err(bad(k, format!("{} values for {n_heads} heads", v.len())));
            }
        }
        if vocab_sizes.contains(&0) {
            return Err(bad("head_vocab_sizes", "a head has no rows".into()));
        }
        let end = offsets
            .iter()
            .zip(&vocab_sizes)
            .map(|(o, v)| o.checked_add(*v))
            .try_fold(0u64, |m, e| e.map(|e| m.max(e)))
            .ok_or_else(|| bad("head_offsets", "rows past 2^64".into()))?;
        let n_rows = end.div_ceil(PLE_ROW_PADDING) * PLE_ROW_PADDING;
        // Row ids travel as u32 (as in llama.cpp, which narrows them to i32).
        if n_rows > u64::from(u32::MAX) {
            return Err(bad(
                "head_offsets",
                format!("{n_rows} table rows do not fit 32 bits"),
            ));
        }
        let n_rows = n_rows as usize;
        Ok(Some(PleConfig {
            layer,
            ngram,
            heads_per_ngram,
            conv_kernel,
            eos,
            multipliers,
            offsets,
            vocab_sizes,
            row,
            n_rows,
        }))
    }

    /// Hashed heads: `(ngram − 1) · heads_per_ngram`.
    pub fn n_heads(&self) -> usize {
        (self.ngram - 1) * self.heads_per_ngram
    }

    /// Width of the gathered embedding: `n_heads · row` (`ple_embed_dim`).
    pub fn embed_dim(&self) -> usize {
        self.n_heads() * self.row
    }

    /// Rows of the convolution's history: `(K − 1) · ngram` (the dilation is `ngram`).
    pub fn conv_history(&self) -> usize {
        (self.conv_kernel - 1) * self.ngram
    }
}
