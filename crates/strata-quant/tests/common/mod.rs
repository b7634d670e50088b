//! Shared test support: a seeded random generator, the check of the paths a run requires, and
//! the reader of the committed reference vectors (tests/data/quant_vectors.bin, written by
//! scripts/gen_quant_vectors.py).

#![allow(dead_code)]

use strata_quant::{GgmlType, Isa};

/// Environment variable naming paths (comma-separated [`Isa::name`]s) that must be available:
/// scripts/test_aarch64.sh sets `neon`, so an emulated CPU without `dotprod` fails the SIMD
/// tests instead of quietly skipping the path they are run for.
pub const REQUIRE_ISA_ENV: &str = "STRATA_TEST_REQUIRE_ISA";

/// Panics when a path named by [`REQUIRE_ISA_ENV`] is unknown or missing on this CPU.
pub fn check_required_paths() {
    let Ok(names) = std::env::var(REQUIRE_ISA_ENV) else {
        return;
    };
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let isa = Isa::from_name(name)
            .unwrap_or_else(|| panic!("{REQUIRE_ISA_ENV}: unknown path {name:?}"));
        assert!(
            isa.is_available(),
            "{REQUIRE_ISA_ENV} requires the {isa} path, which this CPU lacks"
        );
    }
}

/// SplitMix64: small, seeded, good enough for test inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }

    pub fn normals(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * scale).collect()
    }
}

/// What a reference record checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `a` = block bytes, `b` = expected f32 outputs.
    Dequantize,
    /// `a` = f32 inputs, `b` = expected block bytes.
    Quantize,
    /// `a` = weight row, `b` = activation row, `c` = expected f32 result.
    VecDot,
}

/// One reference record.
pub struct Record {
    pub kind: Kind,
    /// "gguf-py" or "ggml".
    pub source: &'static str,
    pub ty: GgmlType,
    pub elements: usize,
    pub a: Vec<u8>,
    pub b: Vec<u8>,
    pub c: Vec<u8>,
}

/// Reads little-endian f32s.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.data[self.at..self.at + n];
        self.at += n;
        s
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }

    fn field(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        self.take(n).to_vec()
    }
}

/// The metadata header and every record of the committed vector file.
pub fn load_vectors() -> (serde_json::Value, Vec<Record>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/quant_vectors.bin");
    let data = std::fs::read(path).expect("read tests/data/quant_vectors.bin");
    let mut cur = Cursor { data: &data, at: 0 };
    assert_eq!(cur.take(4), b"SQV1", "vector file magic");
    let header_len = cur.u32() as usize;
    let header: serde_json::Value =
        serde_json::from_slice(cur.take(header_len)).expect("header JSON");
    let mut records = Vec::new();
    while cur.at < data.len() {
        let head = cur.take(4);
        let kind = match head[0] {
            0 => Kind::Dequantize,
            1 => Kind::Quantize,
            2 => Kind::VecDot,
            k => panic!("unknown record kind {k}"),
        };
        let source = if head[1] == 0 { "gguf-py" } else { "ggml" };
        let id = cur.u32();
        let ty = GgmlType::from_id(id).unwrap_or_else(|| panic!("unknown type id {id}"));
        let elements = cur.u32() as usize;
        let (a, b, c) = (cur.field(), cur.field(), cur.field());
        records.push(Record {
            kind,
            source,
            ty,
            elements,
            a,
            b,
            c,
        });
    }
    (header, records)
}
