//! Strata engine: tokenizer, chat templates, model graphs, CPU backend, KV cache, sampling.

pub mod chat_template;
pub mod tokenizer;
