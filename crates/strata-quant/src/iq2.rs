//! The 2-bit i-quants IQ2_XXS, IQ2_XS and IQ2_S: layouts and reference dequantization.
//!
//! Layouts: `block_iq2_xxs`, `block_iq2_xs`, `block_iq2_s` in llama.cpp's `ggml-common.h`. Each
//! group of 8 weights is one point of an E8-style lattice (`IQ2*_GRID`, byte values 8, 25, 43)
//! with 8 sign bits; sub-block scales are 4-bit `s` meaning `d * (0.5 + s) / 4`. Operation order
//! follows gguf-py (`db = d * (0.5 + s) * 0.25`, then `db * grid * sign`), bit-identical to it.

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, read_f16, Block};
use crate::iq_tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};
use crate::k_quants::QK_K;

/// IQ2_XXS: 2.0625 bits per weight; 66 bytes (`block_iq2_xxs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ2_XXS {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Per 32 weights, two little-endian u32: the first holds 4 grid indices (one per byte),
    /// the second four 7-bit sign indices into `KSIGNS_IQ2XS` (bits 0..28) and a 4-bit scale
    /// (bits 28..32).
    pub qs: [u8; QK_K / 4],
}

/// IQ2_XS: 2.3125 bits per weight; 74 bytes (`block_iq2_xs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ2_XS {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Per 8 weights, a little-endian u16: 9-bit grid index, 7-bit sign index.
    pub qs: [u8; QK_K / 4],
    /// Per 32 weights, two 4-bit scales (low nibble: first 16 weights).
    pub scales: [u8; QK_K / 32],
}

/// IQ2_S: 2.5625 bits per weight; 82 bytes (`block_iq2_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ2_S {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Bytes 0..32: low 8 bits of each 8-weight group's 10-bit grid index; bytes 32..64: the
    /// group's 8 sign bits (bit `j` set = weight `j` negative).
    pub qs: [u8; QK_K / 4],
    /// Per 32 weights, bits 8..10 of the 4 grid indices (2 bits each, group `l` at bit `2 l`).
    pub qh: [u8; QK_K / 32],
    /// Per 32 weights, two 4-bit scales (low nibble: first 16 weights).
    pub scales: [u8; QK_K / 32],
}

assert_block_layout!(BlockIQ2_XXS, 66);
assert_block_layout!(BlockIQ2_XS, 74);
assert_block_layout!(BlockIQ2_S, 82);

/// Writes `db * grid[j] * (±1)` for one 8-weight group; bit `j` of `signs` set means negative.
#[inline(always)]
pub(crate) fn put_group(out: &mut [f32], db: f32, grid: [u8; 8], signs: u8) {
    for (j, (o, &g)) in out.iter_mut().zip(&grid).enumerate() {
        let sign = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
        *o = db * g as f32 * sign;
    }
}

/// `d * (0.5 + s) * 0.25`, the gguf-py / ggml form of an IQ2 sub-block scale.
#[inline(always)]
pub(crate) fn iq2_scale(d: f32, s: u32) -> f32 {
    d * (0.5 + s as f32) * 0.25
}

#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ2_XXS {
    const TYPE: GgmlType = GgmlType::IQ2_XXS;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ2_XXS dequantizes 256 values");
        let d = read_f16(self.d);
        for (ib, out) in out.chunks_exact_mut(32).enumerate() {
            let aux1 = u32_at(&self.qs, 8 * ib + 4);
            let db = iq2_scale(d, aux1 >> 28);
            for (l, out) in out.chunks_exact_mut(8).enumerate() {
                let grid = IQ2XXS_GRID[self.qs[8 * ib + l] as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize];
                put_group(out, db, grid, signs);
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ2_XS {
    const TYPE: GgmlType = GgmlType::IQ2_XS;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ2_XS dequantizes 256 values");
        let d = read_f16(self.d);
        for (k, out) in out.chunks_exact_mut(8).enumerate() {
            let q = u16::from_le_bytes([self.qs[2 * k], self.qs[2 * k + 1]]);
            let s = (self.scales[k / 4] >> (4 * ((k / 2) % 2))) & 0x0f;
            let grid = IQ2XS_GRID[(q & 511) as usize].to_le_bytes();
            put_group(
                out,
                iq2_scale(d, s as u32),
                grid,
                KSIGNS_IQ2XS[(q >> 9) as usize],
            );
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ2_S {
    const TYPE: GgmlType = GgmlType::IQ2_S;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ2_S dequantizes 256 values");
        let d = read_f16(self.d);
        for (k, out) in out.chunks_exact_mut(8).enumerate() {
            let (ib, l) = (k / 4, k % 4);
            let high = ((self.qh[ib] >> (2 * l)) & 3) as usize;
            let grid = IQ2S_GRID[self.qs[k] as usize | (high << 8)].to_le_bytes();
            let s = (self.scales[ib] >> (4 * (l / 2))) & 0x0f;
            put_group(out, iq2_scale(d, s as u32), grid, self.qs[QK_K / 8 + k]);
        }
    }
}
