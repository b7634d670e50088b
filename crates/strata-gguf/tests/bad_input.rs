//! Every kind of malformed input gives the right error, naming the field and byte offset.

mod common;

use strata_gguf::{GgmlType, GgufError, GgufFile};

/// Raw GGUF bytes, for files the writer refuses to produce.
#[derive(Clone, Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, tensors: u64, kvs: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(tensors).u64(kvs);
        r
    }
    fn u32(&mut self, x: u32) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u64(&mut self, x: u64) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A kv pair with a u32 value.
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key).u32(4).u32(v)
    }
    fn tensor(&mut self, name: &str, shape: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(shape.len() as u32);
        for &d in shape {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Zero padding to 32 then `n` data bytes.
    fn data(&mut self, n: usize) -> &mut Self {
        let pad = self.0.len().div_ceil(32) * 32 - self.0.len();
        self.0.resize(self.0.len() + pad + n, 0);
        self
    }
    fn parse(&self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes(self.0.clone())
    }
}

/// A valid file with one F32 tensor of 4 elements.
fn one_tensor(name: &str, shape: &[u64], ty: u32, offset: u64) -> Raw {
    let mut r = Raw::header(3, 1, 1);
    r.kv_u32("k", 1).tensor(name, shape, ty, offset).data(64);
    r
}

fn err(r: &Raw) -> String {
    match r.parse() {
        Ok(_) => panic!("parsed a bad file"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn assert_malformed(r: &Raw, offset: u64, field: &str, reason: &str) {
    match r.parse() {
        Err(GgufError::Malformed {
            offset: o,
            field: f,
            reason: why,
        }) => {
            assert_eq!(o, offset, "offset for {f}: {why}");
            assert!(f.contains(field), "field {f:?} lacks {field:?} ({why})");
            assert!(why.contains(reason), "reason {why:?} lacks {reason:?}");
        }
        Err(e) => panic!("expected Malformed {field}, got {e}"),
        Ok(_) => panic!("parsed a bad file, expected {field}"),
    }
}

#[test]
fn baseline_raw_file_is_valid() {
    let f = one_tensor("w", &[4], 0, 0).parse().unwrap();
    assert_eq!(f.tensors()[0].size_bytes, 16);
}

#[test]
fn empty_file() {
    assert_malformed(&Raw::default(), 0, "magic", "empty");
}

#[test]
fn truncated_at_every_byte() {
    let full = common::small_writer().to_bytes().unwrap();
    for len in 0..full.len() {
        match GgufFile::from_bytes(full[..len].to_vec()) {
            Err(GgufError::Malformed { reason, .. }) => assert!(
                reason.contains("truncated")
                    || reason.contains("empty")
                    || reason.contains("past the end")
                    || reason.contains("impossible"),
                "len {len}: {reason}"
            ),
            other => panic!("len {len}: {other:?}"),
        }
    }
}

#[test]
fn wrong_magic_and_plain_text() {
    let mut r = one_tensor("w", &[4], 0, 0);
    r.0[..4].copy_from_slice(b"GGML");
    assert!(matches!(r.parse(), Err(GgufError::BadMagic { .. })));
    let text = Raw(b"Hello, this is a README, not a model.\n".to_vec());
    let e = err(&text);
    assert!(e.contains("not a GGUF file") && e.contains("Hell"), "{e}");
    assert!(matches!(
        Raw(b"GG".to_vec()).parse(),
        Err(GgufError::Malformed { .. })
    ));
    assert!(matches!(
        Raw(b"{}".to_vec()).parse(),
        Err(GgufError::BadMagic { .. })
    ));
}

#[test]
fn wrong_versions() {
    let e = err(&Raw::header(1, 0, 0));
    assert!(e.contains("version 1") && e.contains("v1"), "{e}");
    let e = err(&Raw::header(4, 0, 0));
    assert!(e.contains("unsupported GGUF version 4"), "{e}");
    let e = err(&Raw::header(3u32.swap_bytes(), 0, 0));
    assert!(e.contains("big-endian"), "{e}");
}

#[test]
fn absurd_counts_and_lengths_are_errors_not_allocations() {
    assert_malformed(&Raw::header(3, 1 << 60, 0), 8, "tensor_count", "impossible");
    assert_malformed(&Raw::header(3, 0, u64::MAX), 16, "kv_count", "impossible");
    let mut r = Raw::header(3, 0, 1);
    r.u64(1 << 60).bytes(&[b'k'; 32]);
    assert_malformed(&r, 24, "metadata key #0", "impossible");
    for (elem_type, count) in [
        (8u32, 1u64 << 60),
        (10, 1 << 61),
        (0, u64::MAX),
        (9, 1 << 62),
    ] {
        let mut r = Raw::header(3, 0, 1);
        r.str("arr")
            .u32(9)
            .u32(elem_type)
            .u64(count)
            .bytes(&[0; 64]);
        assert_malformed(&r, 43, "key 'arr'", "impossible");
    }
    let mut r = Raw::header(3, 0, 1);
    r.str("s").u32(8).u64(u64::MAX - 3);
    assert_malformed(&r, 37, "key 's'", "impossible");
}

#[test]
fn misaligned_offset() {
    let r = one_tensor("w", &[4], 0, 8);
    let e = err(&r);
    assert!(
        e.contains("tensor 'w' offset") && e.contains("multiple of the alignment 32"),
        "{e}"
    );
}

#[test]
fn tensor_out_of_bounds() {
    let e = err(&one_tensor("w", &[4], 0, 64));
    assert!(
        e.contains("tensor 'w' offset") && e.contains("past the end"),
        "{e}"
    );
    let e = err(&one_tensor("w", &[4], 0, u64::MAX - 31));
    assert!(e.contains("past the end"), "{e}");
    let e = err(&one_tensor("w", &[1 << 40, 1 << 20], 0, 0));
    assert!(e.contains("past the end"), "{e}");
    let e = err(&one_tensor("w", &[1 << 40, 1 << 40], 0, 0));
    assert!(e.contains("overflows"), "{e}");
}

#[test]
fn duplicate_tensor_names_and_keys() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor("w", &[4], 0, 0).tensor("w", &[4], 0, 32).data(64);
    assert_malformed(&r, 57, "tensor 'w'", "duplicate tensor name");
    let mut r = Raw::header(3, 0, 2);
    r.kv_u32("k", 1).kv_u32("k", 2);
    assert_malformed(&r, 41, "key 'k'", "duplicate metadata key");
}

#[test]
fn overlapping_tensors() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[16], 0, 0)
        .tensor("b", &[4], 0, 32)
        .data(128);
    let e = err(&r);
    assert!(
        e.contains("tensor 'b' offset") && e.contains("overlaps tensor 'a'"),
        "{e}"
    );
}

#[test]
fn unknown_ggml_type_names_tensor_and_id() {
    for id in [4u32, 5, 31, 1000, u32::MAX] {
        match one_tensor("blk.0.attn_q.weight", &[32], id, 0).parse() {
            Err(GgufError::UnknownType {
                offset,
                id: got,
                tensor,
            }) => {
                assert_eq!(
                    (offset, got, tensor.as_str()),
                    (80, id, "blk.0.attn_q.weight")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn bad_dims() {
    // Tensor info starts at byte 41 (after the 24-byte header and one kv); n_dims at 50,
    // dims from 54.
    assert_malformed(
        &one_tensor("w", &[], 0, 0),
        50,
        "tensor 'w' n_dims",
        "n_dims is 0",
    );
    assert_malformed(
        &one_tensor("w", &[1; 5], 0, 0),
        50,
        "tensor 'w' n_dims",
        "n_dims is 5",
    );
    assert_malformed(
        &one_tensor("w", &[4, 0], 0, 0),
        62,
        "tensor 'w' dims",
        "dim 1 is 0",
    );
    let e = err(&one_tensor("w", &[1 << 63], 0, 0));
    assert_eq!(
        e,
        "byte 54: tensor 'w' dims: dim 0 is 9223372036854775808, must be 1 to 2^63-1"
    );
    let q4k = GgmlType::Q4_K.id();
    assert_malformed(
        &one_tensor("w", &[100], q4k, 0),
        62,
        "tensor 'w' shape",
        "not a multiple",
    );
}

#[test]
fn invalid_utf8_and_unknown_value_types() {
    let mut r = Raw::header(3, 0, 1);
    r.u64(2).bytes(&[0xc3, 0x28]).u32(4).u32(0);
    assert_malformed(&r, 24, "metadata key #0", "invalid UTF-8");
    let mut r = Raw::header(3, 0, 1);
    r.str("s").u32(8).u64(1).bytes(&[0xff]);
    assert_malformed(&r, 37, "key 's'", "invalid UTF-8");
    let mut r = one_tensor("w", &[4], 0, 0);
    r.0[49] = 0xff; // the tensor name's one byte
    assert_malformed(&r, 41, "tensor #0 name", "invalid UTF-8");
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u32(0);
    assert_malformed(&r, 33, "key 'k'", "unknown value type id 13");
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(9).u32(77).u64(0);
    assert_malformed(&r, 37, "key 'k'", "unknown value type id 77");
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(7).bytes(&[2]);
    assert_malformed(&r, 37, "key 'k'", "bool byte is 2");
}

#[test]
fn bad_alignment_values() {
    for (ty, bytes) in [
        (4u32, 0u32.to_le_bytes().to_vec()),
        (4, 3u32.to_le_bytes().to_vec()),
        (5, (-32i32).to_le_bytes().to_vec()),
    ] {
        let mut r = Raw::header(3, 0, 1);
        r.str("general.alignment").u32(ty).bytes(&bytes);
        assert_malformed(&r, 24, "general.alignment", "power of two");
    }
    let mut r = Raw::header(3, 0, 1);
    r.str("general.alignment").u32(8).str("32");
    assert_malformed(&r, 24, "general.alignment", "must be an integer");
    // A valid non-default alignment applies to the offsets.
    let mut r = Raw::header(3, 1, 1);
    r.kv_u32("general.alignment", 16)
        .tensor("w", &[4], 0, 16)
        .data(64);
    assert_eq!(r.parse().unwrap().alignment(), 16);
}

#[test]
fn deep_array_nesting_is_rejected() {
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(9);
    for _ in 0..20 {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    let e = err(&r);
    assert!(e.contains("nested more than 8 deep"), "{e}");
}

#[test]
fn missing_file_is_io_error_with_path() {
    let e = GgufFile::open(std::path::Path::new("/nonexistent/x.gguf")).unwrap_err();
    assert!(matches!(e, GgufError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/x.gguf"), "{e}");
}
