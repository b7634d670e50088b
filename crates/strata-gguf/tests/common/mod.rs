//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use strata_gguf::{Array, GgmlType, GgufWriter, Value};

/// A fresh, empty directory under the system temp dir, unique per call and process.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("strata-gguf-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One value of every type, including nested arrays and empty arrays.
pub fn every_value() -> Vec<(&'static str, Value)> {
    vec![
        ("t.u8", Value::U8(255)),
        ("t.i8", Value::I8(-128)),
        ("t.u16", Value::U16(65535)),
        ("t.i16", Value::I16(-32768)),
        ("t.u32", Value::U32(u32::MAX)),
        ("t.i32", Value::I32(i32::MIN)),
        ("t.f32", Value::F32(-0.25)),
        ("t.bool", Value::Bool(true)),
        ("t.string", Value::String("ünïcode ✓".into())),
        ("t.empty_string", Value::String(String::new())),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(1e300)),
        ("a.u8", vec![1u8, 2, 3].into()),
        ("a.i8", vec![-1i8, 0, 1].into()),
        ("a.u16", vec![1u16, 65535].into()),
        ("a.i16", vec![-2i16, 2].into()),
        ("a.u32", vec![7u32].into()),
        ("a.i32", vec![-7i32, 7].into()),
        ("a.f32", vec![0.5f32, f32::INFINITY].into()),
        ("a.bool", vec![true, false].into()),
        ("a.string", vec!["a", "", "ccc"].into()),
        ("a.u64", vec![u64::MAX].into()),
        ("a.i64", vec![i64::MIN].into()),
        ("a.f64", vec![-1.5f64].into()),
        ("a.empty", Value::Array(Array::I32(vec![]))),
        (
            "a.nested",
            vec![
                Array::String(vec!["x".into()]),
                Array::Array(vec![Array::U8(vec![9]), Array::F64(vec![])]),
                Array::Bool(vec![]),
            ]
            .into(),
        ),
    ]
}

/// Deterministic bytes for tests.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A small valid file: a few keys and three tensors of different types.
pub fn small_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("llama.block_count", 1u32);
    w.set("tokenizer.ggml.tokens", vec!["<s>", "a", "b"]);
    w.add_tensor("token_embd.weight", GgmlType::F16, &[8, 3], &pattern(48, 1))
        .unwrap();
    w.add_tensor(
        "blk.0.attn_q.weight",
        GgmlType::Q8_0,
        &[32, 2],
        &pattern(68, 2),
    )
    .unwrap();
    w.add_tensor("output_norm.weight", GgmlType::F32, &[8], &pattern(32, 3))
        .unwrap();
    w
}
