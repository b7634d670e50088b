//! Bad `qwen4exp` metadata is a load error that names the key, never a panic: the tiny F32
//! checkpoint (scripts/make_tiny_qwen4exp.sh) is copied with one key changed, written with
//! `GgufWriter`, and loaded through `Model::load`.
//!
//! A missing checkpoint fails under CI (`CI=true`) and is reported "not run" elsewhere.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use common::qwen4exp::gguf;
use strata_engine::Model;
use strata_gguf::{GgufFile, GgufWriter, Metadata, Value};

const A: &str = "qwen4exp";

/// A fresh directory for this test's files.
fn temp_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("strata-q4e-bad-meta-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `{A}.{k}`.
fn key(k: &str) -> String {
    format!("{A}.{k}")
}

/// An unsigned integer `v` in the same GGUF type as the value it replaces.
fn same_uint(old: &Value, v: u64) -> Value {
    match old {
        Value::U8(_) => Value::U8(v as u8),
        Value::U16(_) => Value::U16(v as u16),
        Value::U32(_) => Value::U32(v as u32),
        Value::I32(_) => Value::I32(v as i32),
        Value::I64(_) => Value::I64(v as i64),
        _ => Value::U64(v),
    }
}

/// The tiny F32 checkpoint with `edit` applied to its metadata, loaded with `Model::load`:
/// the error message (the test fails on a panic or a successful load). `None` when the file
/// is missing outside CI.
fn load_edited(tag: &str, edit: impl FnOnce(&mut Metadata)) -> Option<String> {
    let path = gguf("qwen4exp-tiny", "F32", tag)?;
    let file = GgufFile::open(&path).unwrap();
    let mut w = GgufWriter::new();
    *w.metadata_mut() = file.metadata().clone();
    edit(w.metadata_mut());
    for t in file.tensors() {
        w.add_tensor(&t.name, t.ggml_type, &t.shape, file.tensor_data(t))
            .unwrap();
    }
    let dir = temp_dir(tag);
    let out = dir.join(format!("{tag}.gguf"));
    w.write_to_path(&out).unwrap();
    let loaded = catch_unwind(AssertUnwindSafe(|| Model::load(&out)));
    let _ = std::fs::remove_dir_all(&dir);
    match loaded {
        Err(_) => panic!("{tag}: Model::load panicked"),
        Ok(Ok(_)) => panic!("{tag}: Model::load accepted the bad metadata"),
        Ok(Err(e)) => {
            let msg = e.to_string();
            eprintln!("{tag}: {msg}");
            Some(msg)
        }
    }
}

/// Loads the edited file and checks the error names `k` (the full key).
#[track_caller]
fn assert_names(tag: &str, k: &str, edit: impl FnOnce(&mut Metadata)) {
    if let Some(msg) = load_edited(tag, edit) {
        assert!(msg.contains(k), "{tag}: {msg:?} does not name {k}");
    }
}

/// The unedited copy loads: the copy itself is sound.
#[test]
fn unedited_copy_loads() {
    let Some(path) = gguf("qwen4exp-tiny", "F32", "unedited") else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let mut w = GgufWriter::new();
    *w.metadata_mut() = file.metadata().clone();
    for t in file.tensors() {
        w.add_tensor(&t.name, t.ggml_type, &t.shape, file.tensor_data(t))
            .unwrap();
    }
    let dir = temp_dir("unedited");
    let out = dir.join("unedited.gguf");
    w.write_to_path(&out).unwrap();
    let loaded = Model::load(&out);
    let _ = std::fs::remove_dir_all(&dir);
    let model = loaded.unwrap();
    assert!(model.config().ple.is_some() && model.config().qsa.is_some());
}

#[test]
fn head_count_zero() {
    let k = key("attention.head_count");
    assert_names("head-count-0", &k, |m| {
        let v = same_uint(m.get(&k).unwrap(), 0);
        m.set(k.clone(), v);
    });
}

#[test]
fn ple_layer_on_attention_layer() {
    let k = key("ple.layers");
    assert_names("ple-layer-3", &k, |m| {
        // Layer 3 is the tiny model's attention layer.
        let v = match m.get(&k).unwrap() {
            Value::Array(_) => Value::from(vec![3i32]),
            old => same_uint(old, 3),
        };
        m.set(k.clone(), v);
    });
}

#[test]
fn ple_layer_out_of_range() {
    let k = key("ple.layers");
    assert_names("ple-layer-99", &k, |m| m.set(k.clone(), vec![99i32]));
}

#[test]
fn ple_head_rows_past_table() {
    let k = key("ple.head_offsets");
    assert_names("ple-offsets-past-table", &k, |m| {
        let mut offsets = m.u64_array(&k).unwrap();
        let sizes = m.u64_array(&key("ple.head_vocab_sizes")).unwrap();
        let end = offsets
            .iter()
            .zip(&sizes)
            .map(|(o, v)| o + v)
            .max()
            .unwrap();
        // The last head now starts where the table ends.
        *offsets.last_mut().unwrap() = end;
        m.set(k.clone(), offsets);
    });
}

#[test]
fn ple_head_offsets_wrong_length() {
    let k = key("ple.head_offsets");
    assert_names("ple-offsets-short", &k, |m| {
        let mut offsets = m.u64_array(&k).unwrap();
        offsets.pop();
        m.set(k.clone(), offsets);
    });
}

#[test]
fn hyper_connection_count_one() {
    let k = key("hyper_connection.count");
    assert_names("hc-count-1", &k, |m| {
        let v = same_uint(m.get(&k).unwrap(), 1);
        m.set(k.clone(), v);
    });
}

#[test]
fn hyper_connection_count_zero() {
    let k = key("hyper_connection.count");
    assert_names("hc-count-0", &k, |m| {
        let v = same_uint(m.get(&k).unwrap(), 0);
        m.set(k.clone(), v);
    });
}

#[test]
fn compress_ratios_too_short() {
    let k = key("attention.compress_ratios");
    assert_names("ratios-short", &k, |m| {
        let mut r = m.i64_array(&k).unwrap();
        r.pop();
        m.set(k.clone(), r.iter().map(|v| *v as i32).collect::<Vec<_>>());
    });
}

#[test]
fn compress_ratios_too_long() {
    let k = key("attention.compress_ratios");
    assert_names("ratios-long", &k, |m| {
        let mut r = m.i64_array(&k).unwrap();
        r.push(0);
        m.set(k.clone(), r.iter().map(|v| *v as i32).collect::<Vec<_>>());
    });
}

#[test]
fn indexer_top_k_not_a_multiple_of_the_ratio() {
    // docs/qwen4exp.md: the budget is a multiple of every ratio (`B % r == 0`); the tiny
    // model has ratio 4 and budget 16.
    let k = key("attention.indexer.top_k");
    assert_names("top-k-6", &k, |m| {
        let v = same_uint(m.get(&k).unwrap(), 6);
        m.set(k.clone(), v);
    });
}
