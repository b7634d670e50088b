//! The 256-element k-quant formats Q2_K … Q6_K: layouts and reference dequantization.
//!
//! Layouts: `block_q2_K` … `block_q6_K` in llama.cpp's `ggml/src/ggml-common.h`. The element order
//! inside a block and the float operation order follow gguf-py's `dequantize_blocks` (which
//! matches ggml's `dequantize_row_*`): sub-block scale first (`d * sc`), then `* q`, then the
//! minimum subtracted, so outputs are bit-identical to both. The Q4_K/Q5_K/Q6_K quantizers live
//! in `k_quantize.rs`, the Q8_K activation format in `q8_k.rs`.

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, read_f16, Block};

/// Elements per k-quant block (`QK_K`).
pub const QK_K: usize = 256;
/// Bytes of the packed 6-bit scales and mins of Q4_K and Q5_K (`K_SCALE_SIZE`).
pub const K_SCALE_SIZE: usize = 12;

/// The 8 six-bit scales and 8 mins of a Q4_K/Q5_K block's packed bytes (ggml's
/// `get_scale_min_k4`, four at a time) as `(scales, mins)`, value `g` in byte `g` of each word:
/// values 0..4 are the low 6 bits of bytes 0..4 (scales) and 4..8 (mins); values 4..8 take
/// their low 4 bits from the nibbles of bytes 8..12 and their top 2 from bits 6..8 above.
/// For the SIMD kernels, which multiply by the scales as bytes.
#[inline(always)]
pub(crate) fn scales_mins_k4(packed: &[u8; K_SCALE_SIZE]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().unwrap());
    let (a, b, c) = (word(0), word(1), word(2));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let scales_hi = (c & LOW4) | (((a >> 6) & TOP2) << 4);
    let mins_hi = ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4);
    (
        (a & LOW6) as u64 | (scales_hi as u64) << 32,
        (b & LOW6) as u64 | (mins_hi as u64) << 32,
    )
}

/// Q2_K: 16 sub-blocks of 16; value `d * (sc & 15) * q - dmin * (sc >> 4)`, `q` 2-bit;
/// 84 bytes (`block_q2_K`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ2_K {
    /// Per sub-block: 4-bit scale (low nibble) and 4-bit min (high nibble).
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the scales, f16.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16.
    pub dmin: [u8; 2],
}

/// Q3_K: 16 sub-blocks of 16; value `d * (sc - 32) * (q - 4·!h)`, `q` 2-bit, `h` the high bit,
/// `sc` 6-bit; 110 bytes (`block_q3_K`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ3_K {
    /// High bits: bit `b` of byte `l` belongs to element `32 b + l`.
    pub hmask: [u8; QK_K / 8],
    /// Low 2 bits, four per byte.
    pub qs: [u8; QK_K / 4],
    /// 16 6-bit scales, packed (low nibbles in bytes 0..8, high 2-bit pairs in bytes 8..12).
    pub scales: [u8; 12],
    /// Super-block scale, f16.
    pub d: [u8; 2],
}

/// Q4_K: 8 sub-blocks of 32; value `d * sc * q - dmin * m`, `q` 4-bit, `sc`/`m` 6-bit;
/// 144 bytes (`block_q4_K`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ4_K {
    /// Super-block scale of the scales, f16.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16.
    pub dmin: [u8; 2],
    /// 8 scales and 8 mins, 6 bits each (see [`scale_min_k4`]).
    pub scales: [u8; K_SCALE_SIZE],
    /// Nibbles: byte `32 c + l` holds element `64 c + l` (low) and `64 c + 32 + l` (high).
    pub qs: [u8; QK_K / 2],
}

/// Q5_K: Q4_K with a 5th bit per quant; 176 bytes (`block_q5_K`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ5_K {
    /// Super-block scale of the scales, f16.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16.
    pub dmin: [u8; 2],
    /// 8 scales and 8 mins, 6 bits each (see [`scale_min_k4`]).
    pub scales: [u8; K_SCALE_SIZE],
    /// 5th bits: bit `g` of byte `l` belongs to element `32 g + l`.
    pub qh: [u8; QK_K / 8],
    /// Low nibbles, as in Q4_K.
    pub qs: [u8; QK_K / 2],
}

/// Q6_K: 16 sub-blocks of 16; value `d * sc * (q - 32)`, `q` 6-bit, `sc` i8; 210 bytes
/// (`block_q6_K`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ6_K {
    /// Low 4 bits of the quants.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits of the quants.
    pub qh: [u8; QK_K / 4],
    /// Sub-block scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale, f16.
    pub d: [u8; 2],
}

assert_block_layout!(BlockQ2_K, 84);
assert_block_layout!(BlockQ3_K, 110);
assert_block_layout!(BlockQ4_K, 144);
assert_block_layout!(BlockQ5_K, 176);
assert_block_layout!(BlockQ6_K, 210);

/// Scale and min `j` (< 8) of a Q4_K/Q5_K block: ggml's `get_scale_min_k4`. Bytes 0..4 hold
/// scales 0..4 (low 6 bits) and the high 2 bits of scales 4..8; bytes 4..8 the same for the
/// mins; bytes 8..12 the low nibbles of scale (low) and min (high) 4..8.
#[inline(always)]
pub fn scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 16 signed 6-bit scales of a Q3_K block, unpacked and offset by -32.
#[inline(always)]
pub fn q3_k_scales(sc: &[u8; 12]) -> [i8; 16] {
    std::array::from_fn(|i| {
        let low = if i < 8 { sc[i] & 0x0f } else { sc[i - 8] >> 4 };
        let high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        (low | (high << 4)) as i8 - 32
    })
}

#[inline(always)]
fn out256(out: &mut [f32]) -> &mut [f32; QK_K] {
    out.try_into()
        .expect("k-quant blocks dequantize into 256 values")
}

// The unpackers below are written as loops over whole 32-byte runs (no per-element index
// arithmetic) so that they compile to vector shifts and masks.

/// Element `e = 128 c + 32 s + l` of a 2-bit plane: bits `2 s` of byte `32 c + l`.
#[inline(always)]
fn two_bit_plane(qs: &[u8; QK_K / 4]) -> [u8; QK_K] {
    let mut out = [0u8; QK_K];
    for (out, qs) in out.chunks_exact_mut(128).zip(qs.chunks_exact(32)) {
        for (s, out) in out.chunks_exact_mut(32).enumerate() {
            for (o, &q) in out.iter_mut().zip(qs) {
                *o = (q >> (2 * s)) & 3;
            }
        }
    }
    out
}

/// Element `e = 64 c + 32 h + l` of a 4-bit plane: nibble `h` of byte `32 c + l`.
#[inline(always)]
fn nibble_plane(qs: &[u8; QK_K / 2]) -> [u8; QK_K] {
    let mut out = [0u8; QK_K];
    for (out, qs) in out.chunks_exact_mut(64).zip(qs.chunks_exact(32)) {
        let (lo, hi) = out.split_at_mut(32);
        for ((a, b), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
            *a = q & 0x0f;
            *b = q >> 4;
        }
    }
    out
}

/// Bit `e / 32` of `bits[e % 32]`, for every element `e`.
#[inline(always)]
fn bit_plane(bits: &[u8; QK_K / 8]) -> [u8; QK_K] {
    let mut out = [0u8; QK_K];
    for (b, out) in out.chunks_exact_mut(32).enumerate() {
        for (o, &h) in out.iter_mut().zip(bits) {
            *o = (h >> b) & 1;
        }
    }
    out
}

impl BlockQ2_K {
    /// The 256 quants (0..=3) in element order.
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        two_bit_plane(&self.qs)
    }
}

impl BlockQ3_K {
    /// The 256 quants (-4..=3) in element order: low 2 bits minus 4 where the `hmask` bit
    /// (bit `e / 32` of byte `e % 32`) is clear.
    #[inline]
    pub fn quants(&self) -> [i8; QK_K] {
        let (low, high) = (two_bit_plane(&self.qs), bit_plane(&self.hmask));
        let mut out = [0i8; QK_K];
        for ((o, &l), &h) in out.iter_mut().zip(&low).zip(&high) {
            *o = l as i8 - (((h ^ 1) << 2) as i8);
        }
        out
    }
}

impl BlockQ4_K {
    /// The 256 quants (0..=15) in element order.
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        nibble_plane(&self.qs)
    }
}

impl BlockQ5_K {
    /// The 256 quants (0..=31) in element order; the 5th bit of element `e` is bit `e / 32` of
    /// `qh[e % 32]`.
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        let (mut out, high) = (nibble_plane(&self.qs), bit_plane(&self.qh));
        for (o, &h) in out.iter_mut().zip(&high) {
            *o |= h << 4;
        }
        out
    }
}

impl BlockQ6_K {
    /// The 256 quants (-32..=31) in element order. Element `128 c + 32 t + l`: low nibble `t / 2`
    /// of `ql[64 c + 32 (t % 2) + l]`, high bits `2 t` of `qh[32 c + l]`.
    #[inline]
    pub fn quants(&self) -> [i8; QK_K] {
        let mut out = [0i8; QK_K];
        let halves = out
            .chunks_exact_mut(128)
            .zip(self.ql.chunks_exact(64))
            .zip(self.qh.chunks_exact(32));
        for ((out, ql), qh) in halves {
            for (t, out) in out.chunks_exact_mut(32).enumerate() {
                let ql = &ql[32 * (t % 2)..32 * (t % 2) + 32];
                for ((o, &l), &h) in out.iter_mut().zip(ql).zip(qh) {
                    let q = ((l >> (4 * (t / 2))) & 0x0f) | (((h >> (2 * t)) & 3) << 4);
                    *o = q as i8 - 32;
                }
            }
        }
        out
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ2_K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out256(out);
        let (d, dmin) = (read_f16(self.d), read_f16(self.dmin));
        let q = self.quants();
        for ((out, q), &sc) in out
            .chunks_exact_mut(16)
            .zip(q.chunks_exact(16))
            .zip(&self.scales)
        {
            let (dl, ml) = (d * (sc & 0x0f) as f32, dmin * (sc >> 4) as f32);
            for (o, &q) in out.iter_mut().zip(q) {
                *o = dl * q as f32 - ml;
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ3_K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out256(out);
        let d = read_f16(self.d);
        let q = self.quants();
        let scales = q3_k_scales(&self.scales);
        for ((out, q), &sc) in out
            .chunks_exact_mut(16)
            .zip(q.chunks_exact(16))
            .zip(&scales)
        {
            let dl = d * sc as f32;
            for (o, &q) in out.iter_mut().zip(q) {
                *o = dl * q as f32;
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ4_K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out256(out);
        let (d, dmin) = (read_f16(self.d), read_f16(self.dmin));
        let q = self.quants();
        for (g, (out, q)) in out.chunks_exact_mut(32).zip(q.chunks_exact(32)).enumerate() {
            let (sc, m) = scale_min_k4(g, &self.scales);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            for (o, &q) in out.iter_mut().zip(q) {
                *o = dl * q as f32 - ml;
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ5_K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out256(out);
        let (d, dmin) = (read_f16(self.d), read_f16(self.dmin));
        let q = self.quants();
        for (g, (out, q)) in out.chunks_exact_mut(32).zip(q.chunks_exact(32)).enumerate() {
            let (sc, m) = scale_min_k4(g, &self.scales);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            for (o, &q) in out.iter_mut().zip(q) {
                *o = dl * q as f32 - ml;
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ6_K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out = out256(out);
        let d = read_f16(self.d);
        let q = self.quants();
        for ((out, q), &sc) in out
            .chunks_exact_mut(16)
            .zip(q.chunks_exact(16))
            .zip(&self.scales)
        {
            let dl = d * sc as f32;
            for (o, &q) in out.iter_mut().zip(q) {
                *o = dl * q as f32;
            }
        }
    }
}
