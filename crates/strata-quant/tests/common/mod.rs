//! Shared test support: a seeded random generator, the kernel paths a run tests (and the check
//! of those it requires), and the reader of the committed reference vectors
//! (tests/data/quant_vectors.bin, written by scripts/gen_quant_vectors.py).

#![allow(dead_code)]

use std::fmt;

use strata_quant::testing::AvxVnniTwin;
use strata_quant::{dot_f32_on, gemm_on, quantize_on, vec_dot_on, GgmlType, Isa, QuantError};

/// Environment variable naming paths (comma-separated [`Isa::name`]s, or [`AvxVnniTwin::NAME`])
/// that must be available: scripts/test_aarch64.sh sets `neon`, so an emulated CPU without
/// `dotprod` fails the SIMD tests instead of quietly skipping the path they are run for.
pub const REQUIRE_ISA_ENV: &str = "STRATA_TEST_REQUIRE_ISA";

/// A kernel path under test: one of [`Isa`], or the twin of the AVX-VNNI path that runs its
/// kernels with AVX-512 VNNI's encodings ([`AvxVnniTwin`]), since the CPUs the tests run on
/// lack AVX-VNNI itself.
#[derive(Clone, Copy, Debug)]
pub enum Path {
    Isa(Isa),
    AvxVnniTwin(AvxVnniTwin),
}

impl Path {
    pub fn vec_dot(self, ty: GgmlType, row: &[u8], act: &[u8]) -> Result<f32, QuantError> {
        match self {
            Path::Isa(isa) => vec_dot_on(isa, ty, row, act),
            Path::AvxVnniTwin(twin) => twin.vec_dot(ty, row, act),
        }
    }

    pub fn quantize(self, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
        match self {
            Path::Isa(isa) => quantize_on(isa, ty, src, dst),
            Path::AvxVnniTwin(twin) => twin.quantize(ty, src, dst),
        }
    }

    pub fn dot_f32(self, ty: GgmlType, row: &[u8], x: &[f32]) -> Result<f32, QuantError> {
        match self {
            Path::Isa(isa) => dot_f32_on(isa, ty, row, x),
            Path::AvxVnniTwin(twin) => twin.dot_f32(ty, row, x),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        self,
        ty: GgmlType,
        w: &[u8],
        n_rows: usize,
        acts: &[u8],
        n_tok: usize,
        out: &mut [f32],
        out_stride: usize,
    ) -> Result<(), QuantError> {
        match self {
            Path::Isa(isa) => gemm_on(isa, ty, w, n_rows, acts, n_tok, out, out_stride),
            Path::AvxVnniTwin(twin) => twin.gemm(ty, w, n_rows, acts, n_tok, out, out_stride),
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Isa(isa) => f.write_str(isa.name()),
            Path::AvxVnniTwin(_) => f.write_str(AvxVnniTwin::NAME),
        }
    }
}

/// The paths this CPU can run (the scalar one only when `with_scalar`), the AVX-VNNI twin
/// last; the others are named on stderr. Checks [`REQUIRE_ISA_ENV`] first.
pub fn available_paths(with_scalar: bool) -> Vec<Path> {
    check_required_paths();
    let (mut have, mut lack) = (Vec::new(), Vec::new());
    for isa in Isa::ALL {
        if isa == Isa::Scalar && !with_scalar {
            continue;
        }
        if isa.is_available() {
            have.push(Path::Isa(isa));
        } else {
            lack.push(isa.name());
        }
    }
    match AvxVnniTwin::new() {
        Some(twin) => have.push(Path::AvxVnniTwin(twin)),
        None => lack.push(AvxVnniTwin::NAME),
    }
    if !lack.is_empty() {
        eprintln!("skipping paths this CPU lacks: {lack:?}");
    }
    have
}

/// Panics when a path named by [`REQUIRE_ISA_ENV`] is unknown or missing on this CPU.
pub fn check_required_paths() {
    let Ok(names) = std::env::var(REQUIRE_ISA_ENV) else {
        return;
    };
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == AvxVnniTwin::NAME {
            assert!(
                AvxVnniTwin::new().is_some(),
                "{REQUIRE_ISA_ENV} requires the {name} path, which this CPU lacks"
            );
            continue;
        }
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
