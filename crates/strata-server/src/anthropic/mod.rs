//! The Anthropic Messages API: `POST /v1/messages` (also with `?beta=true`) and
//! `POST /v1/messages/count_tokens`.

pub mod convert;
pub mod messages;
mod stream;
