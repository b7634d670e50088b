//! The 3-bit i-quants IQ3_XXS and IQ3_S: layouts and reference dequantization.
//!
//! Layouts: `block_iq3_xxs`, `block_iq3_s` in llama.cpp's `ggml-common.h`. Each group of 4
//! weights is one lattice point (`IQ3XXS_GRID`: byte values 4..62; `IQ3S_GRID`: odd 1..15);
//! signs come 8 at a time. Operation order follows gguf-py (scale, then `db * grid * sign`).

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, read_f16, Block};
use crate::iq_tables::{IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::k_quants::QK_K;

/// IQ3_XXS: 3.0625 bits per weight; 98 bytes (`block_iq3_xxs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ3_XXS {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Bytes 0..64: one grid index per 4 weights. Bytes 64..96: per 32 weights a little-endian
    /// u32 of four 7-bit sign indices into `KSIGNS_IQ2XS` (bits 0..28) and a 4-bit scale `s`
    /// (bits 28..32) meaning `d * (0.5 + s) / 2`.
    pub qs: [u8; 3 * QK_K / 8],
}

/// IQ3_S: 3.4375 bits per weight; 110 bytes (`block_iq3_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ3_S {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Low 8 bits of each 4-weight group's 9-bit grid index.
    pub qs: [u8; QK_K / 4],
    /// Bit 8 of the grid indices: bit `k` of byte `i` for group `8 i + k`.
    pub qh: [u8; QK_K / 32],
    /// Sign bits, one per weight (bit `j` of byte `b` for weight `8 b + j`; set = negative).
    pub signs: [u8; QK_K / 8],
    /// Per 32 weights a 4-bit scale `s` (low nibble first) meaning `d * (1 + 2 s)`.
    pub scales: [u8; QK_K / 64],
}

assert_block_layout!(BlockIQ3_XXS, 98);
assert_block_layout!(BlockIQ3_S, 110);

/// Writes `db * grid[j] * (±1)` for 8 weights from two 4-byte lattice points.
#[inline(always)]
fn put_pair(out: &mut [f32], db: f32, g1: u32, g2: u32, signs: u8) {
    let (a, b) = (g1.to_le_bytes(), g2.to_le_bytes());
    let grid = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
    crate::iq2::put_group(out, db, grid, signs);
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ3_XXS {
    const TYPE: GgmlType = GgmlType::IQ3_XXS;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ3_XXS dequantizes 256 values");
        let d = read_f16(self.d);
        for (ib, out) in out.chunks_exact_mut(32).enumerate() {
            let at = QK_K / 4 + 4 * ib;
            let aux = u32::from_le_bytes(self.qs[at..at + 4].try_into().unwrap());
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for (l, out) in out.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let g1 = IQ3XXS_GRID[self.qs[8 * ib + 2 * l] as usize];
                let g2 = IQ3XXS_GRID[self.qs[8 * ib + 2 * l + 1] as usize];
                put_pair(out, db, g1, g2, signs);
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ3_S {
    const TYPE: GgmlType = GgmlType::IQ3_S;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ3_S dequantizes 256 values");
        let d = read_f16(self.d);
        for (ib, out) in out.chunks_exact_mut(32).enumerate() {
            let s = (self.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
            let db = d * (1 + 2 * s) as f32;
            let qh = self.qh[ib] as usize;
            for (l, out) in out.chunks_exact_mut(8).enumerate() {
                let k = 2 * l;
                let i1 = self.qs[8 * ib + k] as usize | (((qh >> k) & 1) << 8);
                let i2 = self.qs[8 * ib + k + 1] as usize | (((qh >> (k + 1)) & 1) << 8);
                put_pair(
                    out,
                    db,
                    IQ3S_GRID[i1],
                    IQ3S_GRID[i2],
                    self.signs[4 * ib + l],
                );
            }
        }
    }
}
