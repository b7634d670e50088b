//! A deterministic mutation loop over valid files: no input may panic, and whatever parses
//! must be internally consistent.

mod common;

use std::collections::BTreeMap;

use strata_gguf::{GgufError, GgufFile, GgufModel, GgufWriter};

/// splitmix64: tiny, deterministic, good enough to pick bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u64; 14] = [
    0,
    1,
    2,
    3,
    4,
    5,
    8,
    9,
    12,
    13,
    32,
    0x7fff_ffff,
    u32::MAX as u64,
    u64::MAX,
];

fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        if bytes.is_empty() {
            return;
        }
        let at = rng.below(bytes.len());
        match rng.below(7) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next() as u8,
            2 | 3 => {
                // An interesting u32 or u64 at a 4-aligned or random position.
                let v = match rng.below(3) {
                    0 => INTERESTING[rng.below(INTERESTING.len())],
                    1 => 1 << rng.below(64),
                    _ => bytes.len() as u64 + rng.below(64) as u64,
                };
                let width = if rng.below(2) == 0 { 4 } else { 8 };
                let at = if rng.below(2) == 0 { at & !3 } else { at };
                let le = v.to_le_bytes();
                for (i, b) in le[..width].iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = *b;
                    }
                }
            }
            4 => bytes.truncate(at),
            5 => {
                let n = rng.below(16);
                let chunk: Vec<u8> = bytes[at..(at + n).min(bytes.len())].to_vec();
                let to = rng.below(bytes.len());
                bytes.splice(to..to, chunk);
            }
            _ => {
                let end = (at + 1 + rng.below(8)).min(bytes.len());
                bytes.drain(at..end);
            }
        }
    }
}

/// Everything a caller can do with a parsed file, checking invariants.
fn exercise(f: GgufFile) {
    let m = f.metadata();
    for (k, v) in m.iter() {
        assert!(m.get(k).is_some());
        let _ = (
            m.u32(k),
            m.f32(k),
            m.str(k),
            m.string_array(k),
            m.i32_array(k),
            v.type_description(),
        );
    }
    assert!(f.alignment().is_power_of_two());
    assert!(f.data_offset() <= f.file_len());
    for t in f.tensors() {
        assert!((1..=4).contains(&t.shape.len()));
        assert_eq!(f.tensor_data(t).len() as u64, t.size_bytes, "{}", t.name);
        assert_eq!(t.row_bytes() * t.n_rows(), t.size_bytes);
        assert_eq!(t.offset % f.alignment(), 0);
    }
    let n = f.tensors().len();
    let model = GgufModel::from_files(vec![f], vec![]).unwrap();
    assert_eq!(model.tensors().count(), n);
}

fn seeds() -> Vec<Vec<u8>> {
    let mut all = GgufWriter::new();
    for (k, v) in common::every_value() {
        all.set(k, v);
    }
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python_fixture.gguf");
    vec![
        common::small_writer().to_bytes().unwrap(),
        all.to_bytes().unwrap(),
        std::fs::read(fixture).unwrap(),
    ]
}

#[test]
fn mutated_files_never_panic() {
    let mut rng = Rng(0x5eed_0f67_7566);
    let seeds = seeds();
    let mut outcomes: BTreeMap<&'static str, usize> = BTreeMap::new();
    for i in 0..30_000 {
        let mut bytes = seeds[i % seeds.len()].clone();
        mutate(&mut rng, &mut bytes);
        let kind = match GgufFile::from_bytes(bytes) {
            Ok(f) => {
                exercise(f);
                "ok"
            }
            Err(GgufError::Malformed { .. }) => "malformed",
            Err(GgufError::UnknownType { .. }) => "unknown type",
            Err(GgufError::BadMagic { .. }) => "bad magic",
            Err(GgufError::UnsupportedVersion { .. } | GgufError::BigEndian { .. }) => "version",
            Err(e) => panic!("unexpected error kind from parsing: {e}"),
        };
        *outcomes.entry(kind).or_default() += 1;
    }
    eprintln!("mutation outcomes: {outcomes:?}");
    // The loop must reach deep into the format, not stop at the magic.
    assert!(
        outcomes["ok"] > 1000 && outcomes["malformed"] > 1000,
        "{outcomes:?}"
    );
}
