//! `strata inspect` on bad GGUF files: exit code 1, exactly one `error:` line on stderr that
//! names the problem, and never a panic.

use std::path::PathBuf;
use std::process::Command;

use strata_gguf::{GgmlType, GgufWriter};

/// A fresh directory for this test's files.
fn temp_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("strata-cli-bad-gguf-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid file: one kv, one F32 tensor of 4 elements.
fn valid_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.add_tensor("output_norm.weight", GgmlType::F32, &[4], &[0; 16])
        .unwrap();
    w.to_bytes().unwrap()
}

/// Raw header: magic, version, tensor count, kv count.
fn header(version: u32, tensors: u64, kvs: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&tensors.to_le_bytes());
    b.extend_from_slice(&kvs.to_le_bytes());
    b
}

/// Writes `bytes` as `tag.gguf`, runs `strata inspect` and `strata run` on it, and checks
/// the failure convention for both; `mentions` must appear in the error line.
#[track_caller]
fn assert_inspect_fails(tag: &str, bytes: &[u8], mentions: &str) {
    let dir = temp_dir(tag);
    let path = dir.join(format!("{tag}.gguf"));
    std::fs::write(&path, bytes).unwrap();
    let inspect = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["run", "-n", "1", "-p", "hi", "-m"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    check_failure(&format!("{tag} (inspect)"), &inspect, mentions);
    check_failure(&format!("{tag} (run)"), &run, mentions);
}

#[track_caller]
fn check_failure(tag: &str, out: &std::process::Output, mentions: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{tag}: panic:\n{stderr}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{tag}: exit status, stderr:\n{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{tag}: want one stderr line, got:\n{stderr}"
    );
    assert!(lines[0].starts_with("error:"), "{tag}: {}", lines[0]);
    assert!(
        lines[0].contains(mentions),
        "{tag}: {:?} lacks {mentions:?}",
        lines[0]
    );
}

#[test]
fn inspect_empty_file_fails_cleanly() {
    assert_inspect_fails("empty", &[], "empty");
}

#[test]
fn inspect_truncated_file_fails_cleanly() {
    let full = valid_file();
    assert_inspect_fails("truncated-header", &full[..40], "truncated");
    // The last 16 bytes are padding after the 16-byte tensor; cut into the tensor itself.
    assert_inspect_fails("truncated-data", &full[..full.len() - 24], "past the end");
}

#[test]
fn inspect_wrong_magic_fails_cleanly() {
    let mut b = valid_file();
    b[..4].copy_from_slice(b"GGML");
    assert_inspect_fails("magic", &b, "not a GGUF file");
}

#[test]
fn inspect_wrong_version_fails_cleanly() {
    assert_inspect_fails("v1", &header(1, 0, 0), "version 1");
    assert_inspect_fails("v9", &header(9, 0, 0), "version 9");
}

#[test]
fn inspect_absurd_count_fails_cleanly() {
    assert_inspect_fails("tensor-count", &header(3, 1 << 60, 0), "tensor_count");
    let mut b = header(3, 0, 1);
    b.extend_from_slice(&(1u64 << 62).to_le_bytes()); // key length
    b.extend_from_slice(&[b'k'; 16]);
    assert_inspect_fails("key-length", &b, "impossible");
}

#[test]
fn inspect_misaligned_offset_fails_cleanly() {
    let mut b = header(3, 1, 0);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'w');
    b.extend_from_slice(&1u32.to_le_bytes()); // n_dims
    b.extend_from_slice(&4u64.to_le_bytes()); // ne0
    b.extend_from_slice(&0u32.to_le_bytes()); // F32
    b.extend_from_slice(&8u64.to_le_bytes()); // offset 8: not a multiple of 32
    b.resize(128, 0);
    assert_inspect_fails("misaligned", &b, "alignment");
}

#[test]
fn inspect_plain_text_fails_cleanly() {
    let text = b"# My model\n\nThis is a README, not a GGUF file.\n";
    assert_inspect_fails("text", text, "not a GGUF file");
}

#[test]
fn inspect_unknown_tensor_type_fails_cleanly() {
    let mut b = valid_file();
    // The type id is the u32 right before the tensor's u64 offset; find it by value.
    let name = b"output_norm.weight";
    let at = b.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 8;
    b[at..at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert_inspect_fails("unknown-type", &b, "unknown ggml type id 77");
}

#[test]
fn inspect_missing_file_fails_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["inspect", "/nonexistent/strata/model.gguf"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error:") && stderr.contains("/nonexistent/strata/model.gguf"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
