//! Writer -> reader round trips.

mod common;

use common::{every_value, pattern, small_writer, temp_dir};
use strata_gguf::{GgmlType, GgufFile, GgufWriter, ALL_TYPES};

#[test]
fn every_value_type_and_nested_arrays_round_trip() {
    let mut w = GgufWriter::new();
    for (k, v) in every_value() {
        w.set(k, v);
    }
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.version(), 3);
    let got: Vec<_> = f.metadata().iter().map(|(k, v)| (k, v.clone())).collect();
    let want: Vec<_> = every_value();
    assert_eq!(got.len(), want.len());
    for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
        assert_eq!(gk, wk);
        assert_eq!(gv, wv, "{wk}");
    }
    assert!(f.tensors().is_empty());
}

#[test]
fn one_tensor_of_every_ggml_type_round_trips_with_its_bytes() {
    let mut w = GgufWriter::new();
    for (i, ty) in ALL_TYPES.iter().enumerate() {
        let row = ty.block_size() as u64 * 2;
        let shape = [row, 3, 1, 2];
        let n = ty.row_bytes(row).unwrap() as usize * 6;
        w.add_tensor(format!("t{i}.{ty}"), *ty, &shape, &pattern(n, i as u8))
            .unwrap();
    }
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.tensors().len(), ALL_TYPES.len());
    for (i, (t, ty)) in f.tensors().iter().zip(ALL_TYPES).enumerate() {
        assert_eq!(t.ggml_type, ty);
        assert_eq!(t.shape, [ty.block_size() as u64 * 2, 3, 1, 2]);
        assert_eq!(t.n_rows(), 6);
        assert_eq!(t.offset % 32, 0);
        assert_eq!(f.tensor_data(t), pattern(t.size_bytes as usize, i as u8));
    }
}

#[test]
fn version_2_and_custom_alignment_round_trip() {
    let mut w = small_writer().with_version(2).unwrap();
    w.set_alignment(256);
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.version(), 2);
    assert_eq!(f.alignment(), 256);
    assert_eq!(f.data_offset() % 256, 0);
    for t in f.tensors() {
        assert_eq!(t.offset % 256, 0, "{}", t.name);
    }
    assert!(GgufWriter::new().with_version(1).is_err());
}

#[test]
fn streamed_file_equals_in_memory_file() {
    let in_memory = small_writer().to_bytes().unwrap();

    let dir = temp_dir("stream");
    let path = dir.join("streamed.gguf");
    let source = GgufFile::from_bytes(in_memory.clone()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in source.metadata().iter() {
        w.set(k, v.clone());
    }
    for t in source.tensors() {
        w.declare_tensor(t.name.clone(), t.ggml_type, &t.shape)
            .unwrap();
    }
    let mut s = w.create(&path).unwrap();
    for t in source.tensors() {
        assert_eq!(s.next_tensor().unwrap().name, t.name);
        // Stream in small chunks, as a generator of huge files would.
        for chunk in source.tensor_data(t).chunks(5) {
            s.write_chunk(chunk).unwrap();
        }
    }
    assert!(s.next_tensor().is_none());
    s.finish().unwrap();

    assert_eq!(std::fs::read(&path).unwrap(), in_memory);
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.metadata(), source.metadata());
    assert_eq!(f.path(), Some(path.as_path()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn writer_rejects_misuse() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", GgmlType::F32, &[4], &[0; 16]).unwrap();
    assert!(
        w.add_tensor("a", GgmlType::F32, &[4], &[0; 16]).is_err(),
        "duplicate"
    );
    assert!(
        w.add_tensor("b", GgmlType::F32, &[4], &[0; 15]).is_err(),
        "wrong size"
    );
    assert!(
        w.declare_tensor("c", GgmlType::Q4_K, &[100],).is_err(),
        "partial block"
    );
    assert!(
        w.declare_tensor("d", GgmlType::F32, &[1, 1, 1, 1, 1])
            .is_err(),
        "5 dims"
    );
    assert!(
        w.declare_tensor("e", GgmlType::F32, &[0]).is_err(),
        "zero dim"
    );
    assert!(
        w.declare_tensor("f", GgmlType::F32, &[]).is_err(),
        "no dims"
    );

    w.declare_tensor("streamed", GgmlType::F32, &[2]).unwrap();
    assert!(w.to_bytes().is_err(), "declared tensor without data");
    let mut s = w.start(Vec::new(), "<mem>").unwrap();
    assert!(s.write_tensor(&[0; 8]).is_err(), "wrong size for 'a'");
    s.write_tensor(&[0; 16]).unwrap();
    assert!(s.write_chunk(&[0; 9]).is_err(), "past the end");
    s.write_chunk(&[0; 4]).unwrap();
    let s_err = s.finish().unwrap_err().to_string();
    assert!(s_err.contains("streamed"), "{s_err}");

    let mut w = GgufWriter::new();
    w.set_alignment(24);
    assert!(w.to_bytes().is_err(), "alignment not a power of two");
}
