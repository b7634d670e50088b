//! A model: one GGUF file, or the parts written by llama.cpp's `gguf-split`
//! (`name-00001-of-00003.gguf`, …), presented as one set of tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::{GgufError, GgufFile, Metadata, Tensor};

/// `split.no`: index of this part, 0-based (llama.cpp `LLM_KV_SPLIT_NO`).
pub const SPLIT_NO_KEY: &str = "split.no";
/// `split.count`: number of parts.
pub const SPLIT_COUNT_KEY: &str = "split.count";

/// All tensors of a model, possibly spread over several files.
///
/// ```no_run
/// use strata_gguf::GgufModel;
/// let m = GgufModel::open("Qwen3-Next-80B-Q4_K_M-00001-of-00002.gguf".as_ref())?;
/// let n_layer = m.metadata().u32(&format!("{}.block_count", m.architecture()?))?;
/// let emb = m.tensor("token_embd.weight").expect("embedding");
/// # Ok::<(), strata_gguf::GgufError>(())
/// ```
#[derive(Debug)]
pub struct GgufModel {
    files: Vec<GgufFile>,
    paths: Vec<PathBuf>,
    /// (file index, tensor index) in model order: part by part, file order within a part.
    order: Vec<(usize, usize)>,
    by_name: HashMap<String, usize>,
}

/// The parts of a split name: `(prefix, part number 1-based, count)` for
/// `prefix-0000K-of-0000N.gguf`, or `None` for any other name.
pub fn parse_split_name(path: &Path) -> Option<(String, u32, u32)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    // "-00001-of-00003" is 15 bytes.
    let tail_at = stem.len().checked_sub(15)?;
    let (prefix, tail) = (stem.get(..tail_at)?, stem.get(tail_at..)?);
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    let (k, n) = (tail.get(1..6)?, tail.get(10..15)?);
    if !tail.starts_with('-') || tail.get(6..10)? != "-of-" || !digits(k) || !digits(n) {
        return None;
    }
    let (k, n): (u32, u32) = (k.parse().ok()?, n.parse().ok()?);
    (k >= 1 && k <= n).then(|| (prefix.to_string(), k, n))
}

/// Path of part `k` (1-based) of `n` beside `prefix`.
pub fn split_path(dir: &Path, prefix: &str, k: u32, n: u32) -> PathBuf {
    dir.join(format!("{prefix}-{k:05}-of-{n:05}.gguf"))
}

impl GgufModel {
    /// Opens `path`; when its name is `*-0000K-of-0000N.gguf` opens all N parts beside it
    /// (any part may be given).
    ///
    /// Errors: any error of [`GgufFile::open`] (wrapped in [`GgufError::InPart`] for split
    /// models); [`GgufError::Split`] when `split.no`/`split.count` disagree with the names,
    /// a single file claims to be one of several parts, or a tensor name appears twice.
    pub fn open(path: &Path) -> Result<GgufModel, GgufError> {
        let Some((prefix, _, n)) = parse_split_name(path) else {
            let file = GgufFile::open(path)?;
            let count = file.metadata().opt_u32(SPLIT_COUNT_KEY)?.unwrap_or(1);
            if count > 1 {
                let reason = format!(
                    "file says it is one of {count} parts ({SPLIT_COUNT_KEY}) but its name is not \
                     of the form NAME-00001-of-{count:05}.gguf"
                );
                return Err(split_err(path, reason));
            }
            return Self::from_files(vec![file], vec![path.to_path_buf()]);
        };
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut files = Vec::with_capacity(n as usize);
        let mut paths = Vec::with_capacity(n as usize);
        for k in 1..=n {
            let p = split_path(dir, &prefix, k, n);
            let in_part = |e| GgufError::InPart {
                path: p.clone(),
                source: Box::new(e),
            };
            let file = GgufFile::open(&p).map_err(in_part)?;
            let md = file.metadata();
            if let Some(count) = md.opt_u64(SPLIT_COUNT_KEY).map_err(in_part)? {
                if count != u64::from(n) {
                    let reason = format!("{SPLIT_COUNT_KEY} is {count}, the name says {n} parts");
                    return Err(split_err(&p, reason));
                }
            }
            if let Some(no) = md.opt_u64(SPLIT_NO_KEY).map_err(in_part)? {
                if no != u64::from(k - 1) {
                    let reason = format!("{SPLIT_NO_KEY} is {no}, expected {} (0-based)", k - 1);
                    return Err(split_err(&p, reason));
                }
            }
            files.push(file);
            paths.push(p);
        }
        Self::from_files(files, paths)
    }

    /// A model from already opened parts, first part first (metadata comes from it).
    ///
    /// Errors: [`GgufError::Split`] when a tensor name appears in two parts or no file is
    /// given.
    pub fn from_files(files: Vec<GgufFile>, paths: Vec<PathBuf>) -> Result<GgufModel, GgufError> {
        if files.is_empty() {
            return Err(split_err(Path::new(""), "no files".to_string()));
        }
        let mut order = Vec::new();
        let mut by_name = HashMap::new();
        for (fi, f) in files.iter().enumerate() {
            for (ti, t) in f.tensors().iter().enumerate() {
                if let Some(&prev) = by_name.get(&t.name) {
                    let (pf, _): (usize, usize) = order[prev];
                    let name_of = |i: usize| {
                        paths
                            .get(i)
                            .map_or(format!("part {}", i + 1), |p| p.display().to_string())
                    };
                    let reason = format!(
                        "tensor '{}' appears in both {} and {}",
                        t.name,
                        name_of(pf),
                        name_of(fi)
                    );
                    let path = paths.get(fi).cloned().unwrap_or_default();
                    return Err(split_err(&path, reason));
                }
                by_name.insert(t.name.clone(), order.len());
                order.push((fi, ti));
            }
        }
        Ok(GgufModel {
            files,
            paths,
            order,
            by_name,
        })
    }

    /// Metadata of the first part.
    pub fn metadata(&self) -> &Metadata {
        self.files[0].metadata()
    }

    /// `general.architecture`, e.g. `"qwen3next"`.
    pub fn architecture(&self) -> Result<&str, GgufError> {
        self.metadata().str("general.architecture")
    }

    /// The integer at `{general.architecture}.{key}` (e.g. `qwen3moe.expert_used_count`), or
    /// `None` when the architecture or the key is missing or not an integer.
    pub fn arch_u64(&self, key: &str) -> Option<u64> {
        let arch = self.architecture().ok()?;
        self.metadata()
            .opt_u64(&format!("{arch}.{key}"))
            .ok()
            .flatten()
    }

    /// The tensor named `name`, from whichever part holds it.
    pub fn tensor(&self, name: &str) -> Option<Tensor<'_>> {
        self.by_name.get(name).map(|&i| self.at(i))
    }

    /// All tensors: part by part, file order within a part.
    pub fn tensors(&self) -> impl Iterator<Item = Tensor<'_>> {
        (0..self.order.len()).map(move |i| self.at(i))
    }

    /// Number of tensors over all parts.
    pub fn tensor_count(&self) -> usize {
        self.order.len()
    }

    /// The parts' paths, first part first.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// [`GgufFile::make_resident`] on every part, in order.
    ///
    /// Errors: the first part whose pages cannot be read.
    pub fn make_resident(&self) -> Result<(), GgufError> {
        self.files.iter().try_for_each(GgufFile::make_resident)
    }

    /// Total bytes of all parts.
    pub fn size_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size_bytes()).sum()
    }

    /// The parsed parts, first part first.
    pub fn files(&self) -> &[GgufFile] {
        &self.files
    }

    fn at(&self, i: usize) -> Tensor<'_> {
        let (fi, ti) = self.order[i];
        let file = &self.files[fi];
        let info = &file.tensors()[ti];
        Tensor {
            info,
            data: file.tensor_data(info),
        }
    }
}

fn split_err(path: &Path, reason: String) -> GgufError {
    GgufError::Split {
        path: path.to_path_buf(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names_parse() {
        let p = Path::new("/m/Qwen-Q4_K_M-00002-of-00003.gguf");
        assert_eq!(parse_split_name(p), Some(("Qwen-Q4_K_M".to_string(), 2, 3)));
        assert_eq!(
            split_path(Path::new("/m"), "Qwen-Q4_K_M", 1, 3),
            Path::new("/m/Qwen-Q4_K_M-00001-of-00003.gguf")
        );
        for bad in [
            "a.gguf",
            "a-1-of-3.gguf",
            "a-00004-of-00003.gguf",
            "a-00000-of-00003.gguf",
            "a-00001-of-00003.bin",
            "-00001-0f-00003.gguf",
        ] {
            assert_eq!(parse_split_name(Path::new(bad)), None, "{bad}");
        }
    }
}
