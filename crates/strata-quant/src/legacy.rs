//! The 32-element "legacy" formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1.
//!
//! Layouts: `block_q4_0` … `block_q8_1` in llama.cpp's `ggml/src/ggml-common.h`. Within a block,
//! element `j < 16` sits in the low nibble of byte `j` and element `j + 16` in its high nibble;
//! the 5th bit of element `j` of Q5_0/Q5_1 is bit `j` of the little-endian `qh` word.
//! Quantization follows `quantize_row_*_ref` in `ggml-quants.c`; it is bit-identical to gguf-py's
//! `quantize` (and ggml's) for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (tests/vectors.rs).

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, read_f16, write_f16, Block, FromFloat};

/// Elements per legacy block: ggml's `QK4_0` = `QK4_1` = `QK5_0` = `QK5_1` = `QK8_0` = `QK8_1` = 32.
pub const QK: usize = 32;

/// Q4_0: 32 weights as 4-bit `q` with value `d * (q - 8)`; 18 bytes (`block_q4_0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// Nibbles: element `j` low, `j + 16` high.
    pub qs: [u8; QK / 2],
}

/// Q4_1: 32 weights as 4-bit `q` with value `d * q + m`; 20 bytes (`block_q4_1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ4_1 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// Minimum (offset), f16.
    pub m: [u8; 2],
    /// Nibbles: element `j` low, `j + 16` high.
    pub qs: [u8; QK / 2],
}

/// Q5_0: 32 weights as 5-bit `q` with value `d * (q - 16)`; 22 bytes (`block_q5_0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ5_0 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// 5th bits, little-endian u32: bit `j` belongs to element `j`.
    pub qh: [u8; 4],
    /// Low nibbles: element `j` low, `j + 16` high.
    pub qs: [u8; QK / 2],
}

/// Q5_1: 32 weights as 5-bit `q` with value `d * q + m`; 24 bytes (`block_q5_1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ5_1 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// Minimum (offset), f16.
    pub m: [u8; 2],
    /// 5th bits, little-endian u32: bit `j` belongs to element `j`.
    pub qh: [u8; 4],
    /// Low nibbles: element `j` low, `j + 16` high.
    pub qs: [u8; QK / 2],
}

/// Q8_0: 32 values as i8 `q` with value `d * q`; 34 bytes (`block_q8_0`). Also the activation
/// format of Q4_0, Q5_0, Q8_0 and IQ4_NL dot products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// Quants.
    pub qs: [i8; QK],
}

/// Q8_1: Q8_0 plus `s = d * Σq`; 36 bytes (`block_q8_1`). The activation format of Q4_1 and
/// Q5_1 dot products, where `s` folds the weight minimum in with one multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_1 {
    /// Scale, f16.
    pub d: [u8; 2],
    /// `d * Σ qs`, f16.
    pub s: [u8; 2],
    /// Quants.
    pub qs: [i8; QK],
}

assert_block_layout!(BlockQ4_0, 18);
assert_block_layout!(BlockQ4_1, 20);
assert_block_layout!(BlockQ5_0, 22);
assert_block_layout!(BlockQ5_1, 24);
assert_block_layout!(BlockQ8_0, 34);
assert_block_layout!(BlockQ8_1, 36);

#[inline(always)]
fn out32(out: &mut [f32]) -> &mut [f32; QK] {
    out.try_into()
        .expect("legacy blocks dequantize into 32 values")
}

#[inline(always)]
fn in32(src: &[f32]) -> &[f32; QK] {
    src.try_into().expect("legacy blocks quantize 32 values")
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let d = read_f16(self.d);
        for (j, &q) in self.qs.iter().enumerate() {
            out[j] = d * ((q & 0x0f) as i32 - 8) as f32;
            out[j + 16] = d * ((q >> 4) as i32 - 8) as f32;
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let (d, m) = (read_f16(self.d), read_f16(self.m));
        for (j, &q) in self.qs.iter().enumerate() {
            out[j] = d * (q & 0x0f) as f32 + m;
            out[j + 16] = d * (q >> 4) as f32 + m;
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let d = read_f16(self.d);
        let qh = u32::from_le_bytes(self.qh);
        for (j, &q) in self.qs.iter().enumerate() {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            out[j] = d * (((q & 0x0f) as u32 | h0) as i32 - 16) as f32;
            out[j + 16] = d * (((q >> 4) as u32 | h1) as i32 - 16) as f32;
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let (d, m) = (read_f16(self.d), read_f16(self.m));
        let qh = u32::from_le_bytes(self.qh);
        for (j, &q) in self.qs.iter().enumerate() {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            out[j] = d * ((q & 0x0f) as u32 | h0) as f32 + m;
            out[j + 16] = d * ((q >> 4) as u32 | h1) as f32 + m;
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let d = read_f16(self.d);
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ8_1 {
    const TYPE: GgmlType = GgmlType::Q8_1;
    const BLOCK_SIZE: usize = QK;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out32(out);
        let d = read_f16(self.d);
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

/// The value of largest magnitude (the first one on ties), keeping its sign.
#[inline]
fn signed_absmax(x: &[f32; QK]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

#[inline]
fn min_max(x: &[f32; QK]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

#[inline]
fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// Symmetric 8-bit quants `round(x / d)` with `d = amax / 127` (round half away from zero,
/// `roundf`), as `quantize_row_q8_0_ref` computes them.
#[inline]
fn q8_symmetric(x: &[f32; QK]) -> (f32, [i8; QK]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    let mut qs = [0i8; QK];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    (d, qs)
}

/// Packs 32 values < 16 (or their low nibbles) as ggml does: `j` low, `j + 16` high.
#[inline]
fn pack_nibbles(q: &[u8; QK]) -> [u8; QK / 2] {
    std::array::from_fn(|j| (q[j] & 0x0f) | (q[j + 16] << 4))
}

/// Collects the 5th bits of 32 values into the little-endian `qh` word.
#[inline]
fn pack_high_bits(q: &[u8; QK]) -> [u8; 4] {
    let qh = q
        .iter()
        .enumerate()
        .fold(0u32, |acc, (j, &v)| acc | (((v as u32) >> 4) & 1) << j);
    qh.to_le_bytes()
}

impl FromFloat for BlockQ4_0 {
    fn quantize_block(src: &[f32]) -> Self {
        let x = in32(src);
        let d = signed_absmax(x) / -8.0;
        let id = inverse(d);
        let q: [u8; QK] = std::array::from_fn(|j| ((x[j] * id + 8.5).trunc() as u8).min(15));
        BlockQ4_0 {
            d: write_f16(d),
            qs: pack_nibbles(&q),
        }
    }
}

impl FromFloat for BlockQ4_1 {
    fn quantize_block(src: &[f32]) -> Self {
        let x = in32(src);
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        let q: [u8; QK] =
            std::array::from_fn(|j| (((x[j] - min) * id + 0.5).trunc() as u8).min(15));
        BlockQ4_1 {
            d: write_f16(d),
            m: write_f16(min),
            qs: pack_nibbles(&q),
        }
    }
}

impl FromFloat for BlockQ5_0 {
    fn quantize_block(src: &[f32]) -> Self {
        let x = in32(src);
        let d = signed_absmax(x) / -16.0;
        let id = inverse(d);
        let q: [u8; QK] = std::array::from_fn(|j| ((x[j] * id + 16.5).trunc() as u8).min(31));
        BlockQ5_0 {
            d: write_f16(d),
            qh: pack_high_bits(&q),
            qs: pack_nibbles(&q),
        }
    }
}

impl FromFloat for BlockQ5_1 {
    fn quantize_block(src: &[f32]) -> Self {
        let x = in32(src);
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        let q: [u8; QK] =
            std::array::from_fn(|j| (((x[j] - min) * id + 0.5).trunc() as u8).min(31));
        BlockQ5_1 {
            d: write_f16(d),
            m: write_f16(min),
            qh: pack_high_bits(&q),
            qs: pack_nibbles(&q),
        }
    }
}

impl FromFloat for BlockQ8_0 {
    fn quantize_block(src: &[f32]) -> Self {
        let (d, qs) = q8_symmetric(in32(src));
        BlockQ8_0 {
            d: write_f16(d),
            qs,
        }
    }
}

impl FromFloat for BlockQ8_1 {
    fn quantize_block(src: &[f32]) -> Self {
        let (d, qs) = q8_symmetric(in32(src));
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        BlockQ8_1 {
            d: write_f16(d),
            s: write_f16(sum as f32 * d),
            qs,
        }
    }
}
