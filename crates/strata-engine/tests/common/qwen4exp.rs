//! Where the tiny qwen4exp checkpoints of scripts/make_tiny_qwen4exp.sh live, and the rule
//! for a missing one: under CI (`CI=true`) it fails the test; elsewhere the test prints
//! "not run" and passes.

use std::path::PathBuf;

use super::tiny::tiny_dir;

/// The three variants: PLE + QSA, QSA only, PLE only (docs/qwen4exp.md).
pub const VARIANTS: [&str; 3] = [
    "qwen4exp-tiny",
    "qwen4exp-tiny-nople",
    "qwen4exp-tiny-noidx",
];

/// The variant's directory (`~/.cache/strata/tiny/<variant>`).
pub fn variant_dir(variant: &str) -> PathBuf {
    tiny_dir().join(variant)
}

/// `path` if it exists. If not: a panic under CI, else `None` after printing "not run".
pub fn require(path: PathBuf, test: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: run `bash scripts/make_tiny_qwen4exp.sh` (or .ci/run) first",
        path.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: not run: {why}");
    None
}

/// The GGUF of `variant` in type `ty` (`F32`, `Q8_0`, …), see [`require`].
pub fn gguf(variant: &str, ty: &str, test: &str) -> Option<PathBuf> {
    require(
        variant_dir(variant).join(format!("{variant}-{ty}.gguf")),
        test,
    )
}
