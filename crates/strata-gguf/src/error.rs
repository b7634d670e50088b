//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing GGUF.
///
/// Parse errors carry the byte offset in the file where the bad field starts and name the
/// field (`"tensor 'blk.0.attn_q.weight' dims"`, `"key 'general.alignment'"`), so a message
/// alone is enough to find the problem with a hex dump.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Opening, mapping, reading or writing `path` failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The file does not start with the bytes `GGUF`.
    #[error("not a GGUF file: starts with {found:?}, expected \"GGUF\"")]
    BadMagic { found: String },

    /// A version this crate does not read (only 2 and 3 are; version 1 used 32-bit counts).
    #[error("unsupported GGUF version {version}{hint}")]
    UnsupportedVersion { version: u32, hint: &'static str },

    /// The file was written big-endian; only little-endian GGUF is supported.
    #[error("big-endian GGUF file (version field reads {version} byte-swapped); only little-endian files are supported")]
    BigEndian { version: u32 },

    /// A field is truncated, out of range or inconsistent.
    #[error("byte {offset}: {field}: {reason}")]
    Malformed {
        offset: u64,
        field: String,
        reason: String,
    },

    /// A tensor has a ggml type id that this crate does not know.
    #[error("byte {offset}: tensor '{tensor}': unknown ggml type id {id}")]
    UnknownType {
        offset: u64,
        id: u32,
        tensor: String,
    },

    /// A required metadata key is absent.
    #[error("missing metadata key '{key}'")]
    MissingKey { key: String },

    /// A metadata key holds a value of another type than the caller asked for.
    #[error("metadata key '{key}': expected {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },

    /// A metadata integer does not fit the type the caller asked for.
    #[error("metadata key '{key}': value {value} does not fit in {expected}")]
    OutOfRange {
        key: String,
        expected: &'static str,
        value: String,
    },

    /// A set of split files (`*-00001-of-00003.gguf`) is inconsistent.
    #[error("split model {}: {reason}", path.display())]
    Split { path: PathBuf, reason: String },

    /// An error inside one part of a split model.
    #[error("{}: {source}", path.display())]
    InPart {
        path: PathBuf,
        #[source]
        source: Box<GgufError>,
    },

    /// The writer was used inconsistently (bad shape, wrong byte count, duplicate name, ...).
    #[error("gguf writer: {0}")]
    Write(String),
}

impl GgufError {
    /// A [`GgufError::Malformed`] at `offset`.
    pub fn malformed(offset: usize, field: impl Into<String>, reason: impl Into<String>) -> Self {
        GgufError::Malformed {
            offset: offset as u64,
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        GgufError::Io {
            path: path.into(),
            source,
        }
    }
}
