//! One GGUF file: parsed header plus the bytes, memory-mapped or owned.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::header::{parse, Header};
use crate::{GgufError, Metadata, TensorInfo};

enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A parsed GGUF v2/v3 file. Tensor data is borrowed from the memory map, never copied.
///
/// ```no_run
/// use strata_gguf::GgufFile;
/// let f = GgufFile::open("model.gguf".as_ref())?;
/// let arch = f.metadata().str("general.architecture")?;
/// for t in f.tensors() {
///     println!("{} {} {:?} {} bytes", t.name, t.ggml_type, t.shape, f.tensor_data(t).len());
/// }
/// # Ok::<(), strata_gguf::GgufError>(())
/// ```
pub struct GgufFile {
    bytes: Bytes,
    header: Header,
    path: Option<PathBuf>,
}

impl GgufFile {
    /// Maps and parses the file at `path`.
    ///
    /// Errors: [`GgufError::Io`] when the file cannot be opened or mapped; any parse error
    /// (see [`GgufFile::from_bytes`]).
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let file = File::open(path).map_err(|e| GgufError::io(path, e))?;
        let len = file.metadata().map_err(|e| GgufError::io(path, e))?.len();
        let bytes = if len == 0 {
            // Mapping an empty file fails on some systems; parse it as empty to get the
            // same error as everywhere else.
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; GGUF files are not modified while a model runs,
            // and a concurrent writer could only corrupt tensor values, never memory safety
            // of the parsed header (which is copied out of the map).
            Bytes::Mapped(unsafe { Mmap::map(&file) }.map_err(|e| GgufError::io(path, e))?)
        };
        let header = parse(bytes.as_slice())?;
        Ok(GgufFile {
            bytes,
            header,
            path: Some(path.to_path_buf()),
        })
    }

    /// Maps every page of the file into this process now, in 2 MiB pages where the page cache
    /// holds them so (`madvise(MADV_HUGEPAGE)`, then `MADV_POPULATE_READ`; `MADV_WILLNEED` on
    /// kernels older than 5.14 and on other Unix systems), reading from disk what is not cached.
    ///
    /// Decode then takes no page faults, and fewer TLB misses where huge pages were used: on a
    /// 17 GB MoE file this made decode 10-15 % faster (BENCHMARKS.md). llama.cpp populates its
    /// mapping the same way (`MAP_POPULATE` in `src/llama-mmap.cpp`). Takes about a second per
    /// 10 GB already in the page cache, disk speed otherwise; a no-op for a file held in memory.
    ///
    /// Errors: [`GgufError::Io`] when the pages cannot be read (e.g. the file was truncated
    /// after it was opened).
    pub fn make_resident(&self) -> Result<(), GgufError> {
        let Bytes::Mapped(map) = &self.bytes else {
            return Ok(());
        };
        let path = self.path.clone().unwrap_or_default();
        #[cfg(target_os = "linux")]
        {
            use memmap2::Advice;
            // Only a hint: kernels without THP for files refuse it and nothing changes.
            let _ = map.advise(Advice::HugePage);
            match map.advise(Advice::PopulateRead) {
                // EINVAL: a kernel older than 5.14 does not know the advice.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {}
                other => return other.map_err(|e| GgufError::io(path, e)),
            }
        }
        #[cfg(unix)]
        map.advise(memmap2::Advice::WillNeed)
            .map_err(|e| GgufError::io(path, e))?;
        #[cfg(not(unix))]
        let _ = (map, path);
        Ok(())
    }

    /// Parses a whole file held in memory (tests, fuzzing, downloads).
    ///
    /// Errors: [`GgufError::BadMagic`], [`GgufError::UnsupportedVersion`],
    /// [`GgufError::BigEndian`], [`GgufError::UnknownType`], or [`GgufError::Malformed`]
    /// naming the field and byte offset of the first problem found.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        let header = parse(&bytes)?;
        Ok(GgufFile {
            bytes: Bytes::Owned(bytes),
            header,
            path: None,
        })
    }

    /// Length of the file in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.bytes.as_slice().len() as u64
    }

    /// Format version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.header.version
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The tensor directory, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// The directory entry named `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensors.iter().find(|t| t.name == name)
    }

    /// The `t.size_bytes` bytes of tensor `t`, which must come from this file's
    /// [`GgufFile::tensors`] (an entry from elsewhere that does not fit gives an empty slice).
    ///
    /// For a mapped file the slice starts at a multiple of [`GgufFile::alignment`] in memory.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = self.header.data_offset.saturating_add(t.offset);
        let end = start.saturating_add(t.size_bytes);
        usize::try_from(start)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(s, e)| self.bytes.as_slice().get(s..e))
            .unwrap_or(&[])
    }

    /// Data alignment in bytes (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// Absolute byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }

    /// File size in bytes.
    pub fn file_len(&self) -> u64 {
        self.bytes.as_slice().len() as u64
    }

    /// The path given to [`GgufFile::open`]; `None` for [`GgufFile::from_bytes`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.header.version)
            .field("kv_count", &self.header.metadata.len())
            .field("tensor_count", &self.header.tensors.len())
            .finish()
    }
}
