//! The OpenAI API: `/v1/chat/completions`, `/v1/completions`, `/v1/models`.

pub mod chat;
mod chat_stream;
pub mod completions;
pub mod models;
pub mod types;
