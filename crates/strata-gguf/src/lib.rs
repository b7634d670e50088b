//! GGUF v2/v3: read (mmap, zero-copy tensor views, split files) and write.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>.

mod ggml_type;

pub use ggml_type::{GgmlType, ALL_TYPES};
