//! Files written by llama.cpp's `gguf` Python package read correctly, and files we write
//! read correctly in Python.

mod common;

use std::path::Path;
use std::process::Command;

use strata_gguf::{Array, GgmlType, GgufFile, GgufModel, GgufWriter, Value};

fn fixture() -> GgufFile {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python_fixture.gguf");
    GgufFile::open(&p).unwrap()
}

/// Values set by `scripts/make_gguf_fixture.py`.
#[test]
fn python_written_fixture_reads_every_value() {
    let f = fixture();
    let m = f.metadata();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(m.str("general.architecture").unwrap(), "llama");
    assert_eq!(m.str("general.name").unwrap(), "fixture");
    assert_eq!(m.get("test.u8"), Some(&Value::U8(200)));
    assert_eq!(m.get("test.i8"), Some(&Value::I8(-100)));
    assert_eq!(m.get("test.u16"), Some(&Value::U16(60000)));
    assert_eq!(m.get("test.i16"), Some(&Value::I16(-30000)));
    assert_eq!(m.u32("test.u32").unwrap(), 4_000_000_000);
    assert_eq!(m.i32("test.i32").unwrap(), -2_000_000_000);
    assert_eq!(m.f32("test.f32").unwrap(), 0.5);
    assert!(m.bool("test.bool").unwrap());
    assert_eq!(m.str("test.string").unwrap(), "héllo ✓");
    assert_eq!(m.u64("test.u64").unwrap(), (1 << 63) + 5);
    assert_eq!(m.i64("test.i64").unwrap(), -(1 << 62));
    assert_eq!(m.f64("test.f64").unwrap(), std::f64::consts::PI);
    assert_eq!(
        m.string_array("test.tokens").unwrap(),
        ["<s>", "</s>", "hello", "wörld"]
    );
    assert_eq!(m.f32_array("test.scores").unwrap(), [0.0, -1.5, 2.25]);
    assert_eq!(m.i32_array("test.token_type").unwrap(), [1, 3, 1, 1]);
    assert_eq!(m.u64_array("test.u64s").unwrap(), [1, 1 << 40]);
    assert_eq!(m.get("test.bools"), Some(&vec![true, false, true].into()));
    let nested = Array::Array(vec![
        Array::String(vec!["a".into(), "b".into()]),
        Array::String(vec!["c".into()]),
    ]);
    assert_eq!(m.array("test.nested").unwrap(), &nested);
    assert_eq!(m.u32("llama.block_count").unwrap(), 2);
    assert_eq!(m.u64("llama.context_length").unwrap(), 4096);
}

#[test]
fn python_written_fixture_reads_every_tensor() {
    let f = fixture();
    let names: Vec<_> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "blk.0.attn_q.weight",
            "output_norm.weight",
            "blk.0.ffn_down.weight"
        ]
    );

    let q = &f.tensors()[0];
    assert_eq!(
        (q.ggml_type, q.shape.as_slice(), q.n_rows()),
        (GgmlType::F32, &[8u64, 2][..], 2)
    );
    let floats: Vec<f32> = f
        .tensor_data(q)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(floats, (0..16).map(|x| x as f32).collect::<Vec<_>>());

    let norm = &f.tensors()[1];
    assert_eq!((norm.ggml_type, norm.size_bytes), (GgmlType::F16, 8));
    // 1.0, 2.0, 3.0, 4.0 as IEEE half.
    assert_eq!(
        f.tensor_data(norm),
        [0x00, 0x3c, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44]
    );

    let down = &f.tensors()[2];
    assert_eq!(
        (down.ggml_type, down.shape.as_slice()),
        (GgmlType::Q8_0, &[32u64, 2][..])
    );
    assert_eq!(down.row_bytes(), 34);
    assert_eq!(f.tensor_data(down), (0..68).collect::<Vec<u8>>());

    let model = GgufModel::open(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python_fixture.gguf"),
    )
    .unwrap();
    assert_eq!(model.architecture().unwrap(), "llama");
    assert_eq!(model.tensor("output_norm.weight").unwrap().data.len(), 8);
}

/// Re-writing the Python file's metadata and tensors with our writer gives identical bytes.
#[test]
fn writer_reproduces_python_file_byte_for_byte() {
    let f = fixture();
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata().iter() {
        w.set(k, v.clone());
    }
    for t in f.tensors() {
        w.add_tensor(t.name.clone(), t.ggml_type, &t.shape, f.tensor_data(t))
            .unwrap();
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python_fixture.gguf");
    assert_eq!(w.to_bytes().unwrap(), std::fs::read(p).unwrap());
}

/// Needs `python3` with the `gguf` package (.ci/run installs it). Outside CI it is skipped,
/// loudly, where that package is missing; with `CI` set it fails instead.
#[test]
fn python_reads_a_file_we_wrote() {
    let ok = Command::new("python3").args(["-c", "import gguf"]).output();
    if !ok.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 cannot import gguf (pip install gguf==0.19.0)"
        );
        eprintln!("NOT RUN: python3 cannot import gguf (pip install gguf==0.19.0)");
        return;
    }
    let dir = common::temp_dir("py");
    let path = dir.join("ours.gguf");
    let mut w = common::small_writer();
    w.set("t.f64", 2.5f64);
    w.set(
        "t.nested",
        vec![Array::I32(vec![1, 2]), Array::String(vec!["z".into()])],
    );
    w.write_to_path(&path).unwrap();
    let script = r#"
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
f = r.fields
assert bytes(f["general.architecture"].parts[-1]) == b"llama"
assert f["t.f64"].parts[-1][0] == 2.5
assert [bytes(f["tokenizer.ggml.tokens"].parts[i]) for i in f["tokenizer.ggml.tokens"].data] == [b"<s>", b"a", b"b"]
ts = {t.name: t for t in r.tensors}
assert list(ts["token_embd.weight"].shape) == [8, 3]
assert ts["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
assert bytes(ts["output_norm.weight"].data.tobytes()) == bytes((i * 31 + 3) % 256 for i in range(32))
print("ok")
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
