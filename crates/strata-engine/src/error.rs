//! Errors of the engine.

use strata_gguf::GgufError;
use strata_quant::QuantError;

/// Everything that can go wrong while loading a model or running it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Quant(#[from] QuantError),
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),
    #[error("chat template: {0}")]
    ChatTemplate(#[from] crate::chat_template::ChatTemplateError),
    #[error("architecture '{0}' is not supported (supported: {1})")]
    UnsupportedArch(String, String),
    #[error("tensor '{0}' is missing from the model file")]
    MissingTensor(String),
    #[error("tensor '{name}' has shape {found:?}, expected {expected:?}")]
    BadShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("metadata '{key}': {reason}")]
    BadMetadata { key: String, reason: String },
    #[error("context is full: {needed} tokens needed but the context holds {n_ctx}")]
    ContextFull { needed: usize, n_ctx: usize },
    #[error("token id {id} is outside the vocabulary of {n_vocab} tokens")]
    InvalidToken { id: u32, n_vocab: usize },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("rows of a forward call must be ascending indices into its tokens")]
    BadRows,
    #[error("the checkpoint was taken from a session of another model or cache type")]
    CheckpointMismatch,
    #[error("--ubatch {0} is out of range (1 to 8192 tokens)")]
    BadUbatch(usize),
    #[error("this model has no MTP draft layer (or its architecture does not run one)")]
    NoMtp,
    #[error("MTP draft input: {found} hidden values for {rows} rows of {width}")]
    BadHidden {
        rows: usize,
        width: usize,
        found: usize,
    },
    #[error("{op} is not supported on the {backend} backend yet (run on the CPU: without -ngl)")]
    Unsupported { backend: String, op: &'static str },
    #[error("{backend} device: {message}")]
    Device { backend: String, message: String },
    #[error("layer {layer}: {experts} experts are placed on a device this run does not have")]
    NoExpertUnit { layer: usize, experts: usize },
}
