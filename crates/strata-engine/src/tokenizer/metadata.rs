//! Reading the `tokenizer.ggml.*` keys of a GGUF file into a [`VocabConfig`].
//!
//! Mirrors the key reads of `llama_vocab::impl::load` in llama.cpp `src/llama-vocab.cpp`:
//! `model` and `tokens` are required, `merges` is required for BPE, everything else optional.

use strata_gguf::{Array, Metadata, Value};

use super::vocab::{VocabConfig, SPECIAL_ID_KEYS};
use super::TokenizerError;

const MODEL: &str = "tokenizer.ggml.model";
const PRE: &str = "tokenizer.ggml.pre";
const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";

/// Reads the vocabulary keys of `meta`.
///
/// # Errors
/// A missing `tokenizer.ggml.model` / `tokenizer.ggml.tokens` (or `tokenizer.ggml.merges` for
/// a `gpt2` model), or a key of the wrong type; the error names the key.
pub(crate) fn read(meta: &Metadata) -> Result<VocabConfig, TokenizerError> {
    let model = meta.str(MODEL)?.to_string();
    let merges = match model.as_str() {
        "gpt2" => meta.string_array(MERGES)?.to_vec(),
        _ => Vec::new(),
    };
    let mut ids = Vec::new();
    for suffix in SPECIAL_ID_KEYS {
        let key = format!("tokenizer.ggml.{suffix}_token_id");
        match meta.get(&key) {
            None => {}
            Some(v) => match v.as_integer() {
                Some(id) => ids.push((*suffix, id)),
                None => {
                    return Err(TokenizerError::BadValue {
                        key: key_name(suffix),
                        reason: format!("expected an integer, found {}", v.type_description()),
                    })
                }
            },
        }
    }
    Ok(VocabConfig {
        model,
        pre: meta.opt_str(PRE)?.map(str::to_string),
        model_name: meta
            .opt_str("general.name")
            .ok()
            .flatten()
            .map(str::to_string),
        tokens: meta.string_array(TOKENS)?.to_vec(),
        scores: scores(meta)?,
        token_types: meta.opt_i32_array(TOKEN_TYPE)?,
        merges,
        ids,
        add_bos: meta.opt_bool("tokenizer.ggml.add_bos_token")?,
        add_eos: meta.opt_bool("tokenizer.ggml.add_eos_token")?,
        add_space_prefix: meta.opt_bool("tokenizer.ggml.add_space_prefix")?,
    })
}

/// Scores may be stored as `f32` or (rarely) `i32`.
fn scores(meta: &Metadata) -> Result<Option<Vec<f32>>, TokenizerError> {
    match meta.get(SCORES) {
        Some(Value::Array(Array::I32(v))) => Ok(Some(v.iter().map(|&s| s as f32).collect())),
        _ => Ok(meta.opt_f32_array(SCORES)?),
    }
}

/// The full key for a special-id suffix, as a static string for error messages.
fn key_name(suffix: &str) -> &'static str {
    match suffix {
        "bos" => "tokenizer.ggml.bos_token_id",
        "eos" => "tokenizer.ggml.eos_token_id",
        "eot" => "tokenizer.ggml.eot_token_id",
        "eom" => "tokenizer.ggml.eom_token_id",
        "unknown" => "tokenizer.ggml.unknown_token_id",
        "seperator" => "tokenizer.ggml.seperator_token_id",
        "padding" => "tokenizer.ggml.padding_token_id",
        "mask" => "tokenizer.ggml.mask_token_id",
        "fim_pre" => "tokenizer.ggml.fim_pre_token_id",
        "fim_suf" => "tokenizer.ggml.fim_suf_token_id",
        "fim_mid" => "tokenizer.ggml.fim_mid_token_id",
        "fim_pad" => "tokenizer.ggml.fim_pad_token_id",
        "fim_rep" => "tokenizer.ggml.fim_rep_token_id",
        "fim_sep" => "tokenizer.ggml.fim_sep_token_id",
        "prefix" => "tokenizer.ggml.prefix_token_id",
        "suffix" => "tokenizer.ggml.suffix_token_id",
        _ => "tokenizer.ggml.middle_token_id",
    }
}
