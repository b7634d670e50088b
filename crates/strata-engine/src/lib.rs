//! Strata engine: tokenizer, chat templates, model graphs, CPU backend, KV cache, sampling.
//!
//! Entry points: [`Model::load`], [`Model::new_session`], [`Model::forward`],
//! [`generate::generate`] with a [`sampling::Sampler`].

pub mod arch;
pub mod backend;
pub mod chat_template;
pub mod config;
pub mod error;
pub mod generate;
pub mod kv_cache;
pub mod model;
pub mod offload;
pub mod ops;
pub mod pool;
pub mod recurrent_state;
pub mod residency;
pub mod sampling;
pub mod session;
pub mod tokenizer;
pub mod topology;
pub mod workspace;

pub use error::EngineError;
pub use kv_cache::KvType;
pub use model::{Model, SeqInput, SeqOutput, Want};
pub use session::{Checkpoint, Session};
