//! A loaded model: memory-mapped GGUF, configuration, weights, tokenizer, chat template.

use std::path::Path;

use strata_gguf::GgufModel;

use crate::chat_template::ChatTemplate;
use crate::config::{Arch, ModelConfig};
use crate::error::EngineError;
use crate::kv_cache::KvType;
use crate::models::{dense, qwen3next};
use crate::residency;
use crate::session::Session;
use crate::tokenizer::Tokenizer;
use crate::weights::{HybridWeights, Weights};

/// Tokens per forward batch of a long prompt (llama.cpp's default `n_ubatch`).
pub const UBATCH: usize = 512;

/// The weights of one of the graphs this engine runs.
enum Graph {
    /// The decoder family of `models::dense` (llama, qwen2, qwen3, gemma3, qwen3moe).
    Dense(Weights),
    /// Qwen3-Next (`models::qwen3next`).
    Hybrid(HybridWeights),
}

/// A model ready to run. Weights are read in place from the mapped file.
pub struct Model {
    gguf: &'static GgufModel,
    config: ModelConfig,
    weights: Graph,
    tokenizer: Tokenizer,
    chat_template: Option<ChatTemplate>,
}

impl Model {
    /// Maps the GGUF at `path` (split files included) and checks every tensor. When the file
    /// fits in the available memory its pages are mapped in now (see [`crate::residency`]).
    ///
    /// The mapping lives for the rest of the process (models are loaded once), which is
    /// what lets weights be borrowed for `'static` without copying them.
    /// Errors: unreadable or malformed file, unsupported architecture or type, missing
    /// metadata keys or tensors, a bad tokenizer or chat template.
    pub fn load(path: &Path) -> Result<Model, EngineError> {
        let gguf: &'static GgufModel = Box::leak(Box::new(GgufModel::open(path)?));
        let bytes = gguf.size_bytes();
        if residency::fits_in_memory(bytes) {
            if let Err(e) = gguf.make_resident() {
                tracing::warn!("could not map the model's pages in at load: {e}");
            }
        } else {
            tracing::info!(
                "{:.1} GiB model is larger than the available memory: pages are read as needed",
                bytes as f64 / (1u64 << 30) as f64
            );
        }
        let meta = gguf.metadata();
        let config = ModelConfig::from_metadata(meta)?;
        let weights = match config.arch {
            Arch::Qwen3Next => Graph::Hybrid(HybridWeights::load(gguf, &config)?),
            _ => Graph::Dense(Weights::load(gguf, &config)?),
        };
        let tokenizer = Tokenizer::from_metadata(meta)?;
        let chat_template = match meta.opt_str("tokenizer.chat_template")? {
            Some(src) => {
                let piece =
                    |id: Option<u32>| id.map(|i| tokenizer.decode_special(i)).unwrap_or_default();
                Some(ChatTemplate::new(
                    src,
                    &piece(tokenizer.bos_id()),
                    &piece(tokenizer.eos_id()),
                )?)
            }
            None => None,
        };
        Ok(Model {
            gguf,
            config,
            weights,
            tokenizer,
            chat_template,
        })
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The tokenizer built from the file's vocabulary.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The file's chat template, if it has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_ref()
    }

    /// The underlying GGUF (metadata, tensor table).
    pub fn gguf(&self) -> &GgufModel {
        self.gguf
    }

    /// A fresh session of `n_ctx` positions (0 = the model's training context).
    pub fn new_session(&self, n_ctx: usize, kv_type: KvType) -> Session {
        let n = if n_ctx == 0 {
            self.config.n_ctx_train
        } else {
            n_ctx
        };
        Session::new(&self.config, n, kv_type)
    }

    /// Appends `tokens` to the session and returns the logits (`n_vocab`) after the last one.
    ///
    /// Errors: empty input, the context would overflow (nothing is appended), a token id
    /// outside the vocabulary.
    pub fn forward<'s>(
        &self,
        s: &'s mut Session,
        tokens: &[u32],
    ) -> Result<&'s [f32], EngineError> {
        self.check(s, tokens)?;
        for chunk in tokens.chunks(UBATCH) {
            self.run_batch(s, chunk, false)?;
        }
        Ok(s.logits())
    }

    /// Appends `tokens` and writes the logits of every position into `out`
    /// (`[tokens.len()][n_vocab]`): teacher-forced evaluation and speculative verification.
    pub fn forward_all(
        &self,
        s: &mut Session,
        tokens: &[u32],
        out: &mut Vec<f32>,
    ) -> Result<(), EngineError> {
        self.check(s, tokens)?;
        out.clear();
        for chunk in tokens.chunks(UBATCH) {
            self.run_batch(s, chunk, true)?;
            out.extend_from_slice(s.logits());
        }
        Ok(())
    }

    fn check(&self, s: &Session, tokens: &[u32]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let needed = s.pos() + tokens.len();
        if needed > s.n_ctx() {
            return Err(EngineError::ContextFull {
                needed,
                n_ctx: s.n_ctx(),
            });
        }
        let n_vocab = self.config.n_vocab;
        if let Some(bad) = tokens.iter().find(|t| **t as usize >= n_vocab) {
            return Err(EngineError::InvalidToken { id: *bad, n_vocab });
        }
        Ok(())
    }

    fn run_batch(&self, s: &mut Session, tokens: &[u32], all: bool) -> Result<(), EngineError> {
        let pos0 = s.pos();
        let cfg = &self.config;
        match &self.weights {
            Graph::Dense(w) => {
                dense::forward_batch(cfg, w, &mut s.kv.layers, &mut s.ws, tokens, pos0, all)?
            }
            Graph::Hybrid(w) => {
                let rec = s
                    .recurrent
                    .as_mut()
                    .expect("sessions of a hybrid model have recurrent state");
                qwen3next::forward_batch(
                    cfg,
                    w,
                    &mut s.kv.layers,
                    rec,
                    &mut s.ws,
                    tokens,
                    pos0,
                    all,
                )?
            }
        }
        s.advance(tokens);
        Ok(())
    }
}
