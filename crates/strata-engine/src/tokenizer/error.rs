//! The tokenizer's error type.

/// Why a tokenizer could not be built from GGUF metadata.
///
/// Every variant names the `tokenizer.ggml.*` key at fault. Tokenizing and detokenizing never
/// fail: any text encodes, and an id outside the vocabulary decodes to nothing.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A key is missing or holds the wrong type (the message names the key).
    #[error("tokenizer metadata: {0}")]
    Metadata(#[from] strata_gguf::GgufError),

    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error(
        "unsupported tokenizer model '{model}' (key 'tokenizer.ggml.model'); supported: \
         'gpt2' (byte-level BPE) and 'llama' (SentencePiece)"
    )]
    UnsupportedModel { model: String },

    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("unsupported pre-tokenizer '{pre}' (key 'tokenizer.ggml.pre')")]
    UnsupportedPreTokenizer { pre: String },

    /// A key is present with the right type but an unusable value.
    #[error("metadata key '{key}': {reason}")]
    BadValue { key: &'static str, reason: String },

    /// A pre-tokenizer regular expression failed to compile (a bug in the pattern table).
    #[error("pre-tokenizer '{pre}': regex {pattern:?} does not compile: {reason}")]
    Regex {
        pre: String,
        pattern: String,
        reason: String,
    },
}
