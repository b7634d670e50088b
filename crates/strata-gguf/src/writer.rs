//! Writing GGUF v3 (or v2) files, in memory or streamed tensor by tensor.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::encode::encode_header;
use crate::header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
use crate::tensor::tensor_size;
use crate::{GgmlType, GgufError, Metadata, TensorInfo, Value};

/// Builds a GGUF file: metadata and a tensor directory, then tensor bytes.
///
/// Two ways to supply tensor bytes:
/// - in memory: [`GgufWriter::add_tensor`] for every tensor, then [`GgufWriter::to_bytes`] or
///   [`GgufWriter::write_to_path`];
/// - streamed (files larger than RAM): [`GgufWriter::declare_tensor`] for every tensor, then
///   [`GgufWriter::create`] (or [`GgufWriter::start`]) and write each tensor's bytes in
///   declaration order through the returned [`TensorStream`].
///
/// Tensor offsets are assigned in declaration order, each padded to the alignment
/// (`general.alignment`, default 32).
///
/// ```
/// use strata_gguf::{GgmlType, GgufFile, GgufWriter};
/// let mut w = GgufWriter::new();
/// w.set("general.architecture", "llama");
/// w.add_tensor("output_norm.weight", GgmlType::F32, &[4], &[0u8; 16])?;
/// let f = GgufFile::from_bytes(w.to_bytes()?)?;
/// assert_eq!(f.tensors()[0].shape, [4]);
/// # Ok::<(), strata_gguf::GgufError>(())
/// ```
#[derive(Clone, Debug)]
pub struct GgufWriter {
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    data: Vec<Option<Vec<u8>>>,
    names: HashSet<String>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty version-3 file.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            metadata: Metadata::new(),
            tensors: Vec::new(),
            data: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Chooses the format version (2 or 3; they differ only in the number).
    pub fn with_version(mut self, version: u32) -> Result<Self, GgufError> {
        if !(2..=3).contains(&version) {
            return Err(GgufError::Write(format!(
                "cannot write GGUF version {version}"
            )));
        }
        self.version = version;
        Ok(self)
    }

    /// Sets metadata `key` (replacing a previous value, keeping its position).
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.metadata.set(key, value);
        self
    }

    /// Sets `general.alignment` (must be a nonzero power of two; checked when writing).
    pub fn set_alignment(&mut self, alignment: u32) -> &mut Self {
        self.set(ALIGNMENT_KEY, alignment)
    }

    /// The metadata written so far.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Mutable metadata, e.g. to copy all keys of another file.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Tensors declared so far (offsets are assigned when writing).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Declares a tensor whose bytes will be streamed later. `shape` is in ggml order
    /// (`shape[0]` = row length).
    ///
    /// Errors: [`GgufError::Write`] for a duplicate name, 0 or more than 4 dims, a zero dim,
    /// or a row length that is not a whole number of `ty` blocks.
    pub fn declare_tensor(
        &mut self,
        name: impl Into<String>,
        ty: GgmlType,
        shape: &[u64],
    ) -> Result<&TensorInfo, GgufError> {
        self.push(name.into(), ty, shape, None)
    }

    /// Adds a tensor with its bytes held in memory (`data.len()` must equal its size).
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ty: GgmlType,
        shape: &[u64],
        data: &[u8],
    ) -> Result<&TensorInfo, GgufError> {
        self.push(name.into(), ty, shape, Some(data.to_vec()))
    }

    fn push(
        &mut self,
        name: String,
        ty: GgmlType,
        shape: &[u64],
        data: Option<Vec<u8>>,
    ) -> Result<&TensorInfo, GgufError> {
        let bad = |reason: String| GgufError::Write(format!("tensor '{name}': {reason}"));
        if self.names.contains(&name) {
            return Err(bad("duplicate tensor name".into()));
        }
        if shape.is_empty()
            || shape.len() > 4
            || shape.iter().any(|&d| d == 0 || d > i64::MAX as u64)
        {
            return Err(bad(format!(
                "shape {shape:?} must have 1 to 4 dims, each >= 1"
            )));
        }
        let size_bytes = tensor_size(ty, shape).map_err(bad)?;
        if let Some(d) = &data {
            if d.len() as u64 != size_bytes {
                let reason = format!("{} data bytes, {ty} {shape:?} needs {size_bytes}", d.len());
                return Err(bad(reason));
            }
        }
        self.names.insert(name.clone());
        self.tensors.push(TensorInfo {
            name,
            ggml_type: ty,
            shape: shape.to_vec(),
            offset: 0,
            size_bytes,
        });
        self.data.push(data);
        Ok(self.tensors.last().expect("just pushed"))
    }

    fn alignment(&self) -> Result<u64, GgufError> {
        let Some(v) = self.metadata.get(ALIGNMENT_KEY) else {
            return Ok(DEFAULT_ALIGNMENT);
        };
        match v {
            Value::U32(a) if a.is_power_of_two() && *a <= 1 << 30 => Ok(u64::from(*a)),
            v => Err(GgufError::Write(format!(
                "{ALIGNMENT_KEY} must be a u32 power of two at most 2^30, found {v:?}"
            ))),
        }
    }

    /// Tensor infos with final offsets, and the alignment.
    fn layout(&self) -> Result<(Vec<TensorInfo>, u64), GgufError> {
        let alignment = self.alignment()?;
        let mut next = 0u64;
        let mut out = self.tensors.clone();
        for t in &mut out {
            t.offset = next;
            next = next
                .checked_add(t.size_bytes)
                .map(|e| e.div_ceil(alignment) * alignment)
                .ok_or_else(|| GgufError::Write("total tensor size overflows u64".into()))?;
        }
        Ok((out, alignment))
    }

    /// Writes the header and returns a stream that takes each tensor's bytes in order.
    /// `label` names the destination in I/O errors.
    pub fn start<W: Write>(
        &self,
        mut w: W,
        label: impl Into<PathBuf>,
    ) -> Result<TensorStream<W>, GgufError> {
        let label = label.into();
        let (tensors, alignment) = self.layout()?;
        let header = encode_header(self.version, &self.metadata, &tensors, alignment)?;
        w.write_all(&header).map_err(|e| GgufError::io(&label, e))?;
        Ok(TensorStream {
            w,
            label,
            tensors,
            alignment,
            current: 0,
            written: 0,
        })
    }

    /// Creates `path` and writes the header; stream the tensor bytes through the result.
    pub fn create(&self, path: &Path) -> Result<TensorStream<BufWriter<File>>, GgufError> {
        let f = File::create(path).map_err(|e| GgufError::io(path, e))?;
        self.start(BufWriter::with_capacity(1 << 20, f), path)
    }

    /// Writes the whole file to `w`; every tensor must have been added with its bytes.
    pub fn write_to<W: Write>(&self, w: W, label: impl Into<PathBuf>) -> Result<W, GgufError> {
        let mut s = self.start(w, label)?;
        for (t, d) in self.tensors.iter().zip(&self.data) {
            let d = d.as_deref().ok_or_else(|| {
                GgufError::Write(format!(
                    "tensor '{}' was declared without data; stream it",
                    t.name
                ))
            })?;
            s.write_tensor(d)?;
        }
        s.finish()
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        self.write_to(Vec::new(), "<memory>")
    }

    /// Writes the whole file to `path`.
    pub fn write_to_path(&self, path: &Path) -> Result<(), GgufError> {
        let f = File::create(path).map_err(|e| GgufError::io(path, e))?;
        self.write_to(BufWriter::new(f), path)?;
        Ok(())
    }
}

/// Receives tensor bytes after the header, in declaration order, padding after each tensor.
pub struct TensorStream<W: Write> {
    w: W,
    label: PathBuf,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    current: usize,
    written: u64,
}

impl<W: Write> TensorStream<W> {
    /// The tensor whose bytes are expected next, with its final offset; `None` when done.
    pub fn next_tensor(&self) -> Option<&TensorInfo> {
        self.tensors.get(self.current)
    }

    /// Bytes of the next tensor still expected.
    pub fn remaining_in_tensor(&self) -> u64 {
        self.next_tensor()
            .map_or(0, |t| t.size_bytes - self.written)
    }

    /// All of the next tensor's bytes at once.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<(), GgufError> {
        if self.written != 0 || data.len() as u64 != self.remaining_in_tensor() {
            let what = self.next_tensor().map_or("no tensor".to_string(), |t| {
                format!("tensor '{}' needs {} bytes", t.name, t.size_bytes)
            });
            return Err(GgufError::Write(format!("{what}, got {}", data.len())));
        }
        self.write_chunk(data)
    }

    /// Part of the next tensor's bytes; a chunk may not run past the end of the tensor.
    /// Padding is written as soon as a tensor is complete.
    pub fn write_chunk(&mut self, data: &[u8]) -> Result<(), GgufError> {
        let Some(t) = self.tensors.get(self.current) else {
            return Err(GgufError::Write("all tensors are already written".into()));
        };
        if data.len() as u64 > t.size_bytes - self.written {
            return Err(GgufError::Write(format!(
                "tensor '{}': chunk of {} bytes runs past its end ({} bytes left)",
                t.name,
                data.len(),
                t.size_bytes - self.written
            )));
        }
        self.w
            .write_all(data)
            .map_err(|e| GgufError::io(&self.label, e))?;
        self.written += data.len() as u64;
        if self.written == t.size_bytes {
            let pad = t.size_bytes.div_ceil(self.alignment) * self.alignment - t.size_bytes;
            let zeros = vec![0u8; pad as usize];
            self.w
                .write_all(&zeros)
                .map_err(|e| GgufError::io(&self.label, e))?;
            self.current += 1;
            self.written = 0;
        }
        Ok(())
    }

    /// Flushes and returns the destination; fails if a tensor is still missing bytes.
    pub fn finish(mut self) -> Result<W, GgufError> {
        if let Some(t) = self.next_tensor() {
            return Err(GgufError::Write(format!(
                "tensor '{}' and {} after it were not written",
                t.name,
                self.tensors.len() - self.current - 1
            )));
        }
        self.w.flush().map_err(|e| GgufError::io(&self.label, e))?;
        Ok(self.w)
    }
}
