//! GGUF v2/v3: read (mmap, zero-copy tensor views, split files) and write.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>.
//!
//! - [`GgufFile`]: one parsed, memory-mapped file; every count, length, offset and shape is
//!   validated before use, and malformed input gives a [`GgufError`] naming the field and
//!   byte offset, never a panic.
//! - [`GgufModel`]: one model, a single file or `*-0000K-of-0000N.gguf` split parts.
//! - [`Metadata`]: ordered key/value pairs with typed getters.
//! - [`GgufWriter`]: writes files in memory or streamed tensor by tensor.

mod cursor;
mod encode;
mod error;
mod file;
mod ggml_type;
mod header;
mod metadata;
mod split;
mod tensor;
mod value;
mod writer;

pub use error::GgufError;
pub use file::GgufFile;
pub use ggml_type::{GgmlType, ALL_TYPES};
pub use header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC};
pub use metadata::Metadata;
pub use split::{parse_split_name, split_path, GgufModel, SPLIT_COUNT_KEY, SPLIT_NO_KEY};
pub use tensor::{Tensor, TensorInfo};
pub use value::{Array, Value, ValueType};
pub use writer::{GgufWriter, TensorStream};
