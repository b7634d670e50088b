//! Split files (`name-0000K-of-0000N.gguf`) load as one model.

mod common;

use std::path::Path;

use common::{pattern, temp_dir};
use strata_gguf::{split_path, GgmlType, GgufError, GgufModel, GgufWriter};

/// Writes `n` parts: part k holds tensors `blk.k.a` and `blk.k.b`; metadata only in part 1.
fn write_parts(dir: &Path, n: u32, split_keys: bool) {
    for k in 0..n {
        let mut w = GgufWriter::new();
        if k == 0 {
            w.set("general.architecture", "qwen3next");
            w.set("qwen3next.block_count", n);
        }
        if split_keys {
            w.set("split.no", k as u16);
            w.set("split.count", n as u16);
            w.set("split.tensors.count", (2 * n) as i32);
        }
        for s in ["a", "b"] {
            let data = pattern(64, k as u8 * 2 + (s == "b") as u8);
            w.add_tensor(format!("blk.{k}.{s}"), GgmlType::F32, &[4, 4], &data)
                .unwrap();
        }
        w.write_to_path(&split_path(dir, "model", k + 1, n))
            .unwrap();
    }
}

#[test]
fn three_split_parts_load_as_one_model_from_any_part() {
    let dir = temp_dir("split");
    write_parts(&dir, 3, true);
    for k in 1..=3 {
        let m = GgufModel::open(&split_path(&dir, "model", k, 3)).unwrap();
        assert_eq!(m.paths().len(), 3);
        assert_eq!(m.paths()[0], split_path(&dir, "model", 1, 3));
        assert_eq!(m.architecture().unwrap(), "qwen3next");
        assert_eq!(m.metadata().u32("qwen3next.block_count").unwrap(), 3);
        let names: Vec<_> = m.tensors().map(|t| t.info.name.clone()).collect();
        assert_eq!(
            names,
            ["blk.0.a", "blk.0.b", "blk.1.a", "blk.1.b", "blk.2.a", "blk.2.b"]
        );
        let t = m.tensor("blk.2.b").unwrap();
        assert_eq!(t.data, pattern(64, 5));
        assert!(m.tensor("blk.3.a").is_none());
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn split_parts_without_split_keys_still_load() {
    let dir = temp_dir("split-nokeys");
    write_parts(&dir, 2, false);
    let m = GgufModel::open(&split_path(&dir, "model", 2, 2)).unwrap();
    assert_eq!(m.tensor_count(), 4);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn missing_part_is_an_io_error_naming_it() {
    let dir = temp_dir("split-missing");
    write_parts(&dir, 3, true);
    let missing = split_path(&dir, "model", 2, 3);
    std::fs::remove_file(&missing).unwrap();
    let e = GgufModel::open(&split_path(&dir, "model", 1, 3)).unwrap_err();
    assert!(e.to_string().contains("model-00002-of-00003.gguf"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn inconsistent_split_metadata_and_duplicate_tensors_are_errors() {
    let dir = temp_dir("split-bad");
    write_parts(&dir, 2, true);
    // Part 2 renamed as part 2 of 3: its split.count says 2.
    let mut w = GgufWriter::new();
    w.set("split.no", 1u16).set("split.count", 2u16);
    w.write_to_path(&split_path(&dir, "other", 1, 3)).unwrap();
    let e = GgufModel::open(&split_path(&dir, "other", 1, 3)).unwrap_err();
    assert!(matches!(e, GgufError::Split { .. }), "{e}");

    // Same tensor name in two parts.
    for k in 1..=2 {
        let mut w = GgufWriter::new();
        w.add_tensor("dup.weight", GgmlType::F32, &[1], &[0; 4])
            .unwrap();
        w.write_to_path(&split_path(&dir, "dup", k, 2)).unwrap();
    }
    let e = GgufModel::open(&split_path(&dir, "dup", 1, 2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dup.weight") && e.contains("appears in both"),
        "{e}"
    );

    // A lone file claiming to be one of several parts.
    let lone = dir.join("renamed.gguf");
    std::fs::copy(split_path(&dir, "model", 1, 2), &lone).unwrap();
    let e = GgufModel::open(&lone).unwrap_err().to_string();
    assert!(e.contains("split.count"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn make_resident_keeps_every_part_readable_and_sizes_add_up() {
    let dir = temp_dir("split-resident");
    write_parts(&dir, 2, true);
    let m = GgufModel::open(&split_path(&dir, "model", 1, 2)).unwrap();
    m.make_resident().unwrap();
    let on_disk: u64 = m
        .paths()
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(m.size_bytes(), on_disk);
    assert_eq!(m.tensor("blk.1.b").unwrap().data, pattern(64, 3));
    let _ = std::fs::remove_dir_all(dir);
}
