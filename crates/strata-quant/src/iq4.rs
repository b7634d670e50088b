//! The 4-bit non-linear formats IQ4_NL and IQ4_XS: layouts and reference dequantization.
//!
//! Layouts: `block_iq4_nl`, `block_iq4_xs` in llama.cpp's `ggml-common.h`. A 4-bit code selects
//! one of the 16 levels of `KVALUES_IQ4NL` (-127..113); element `j` of each 32 is the low nibble
//! of byte `j`, element `j + 16` its high nibble.

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, read_f16, Block};
use crate::iq_tables::KVALUES_IQ4NL;
use crate::k_quants::QK_K;

/// Elements per IQ4_NL block (`QK4_NL`).
pub const QK4_NL: usize = 32;

/// IQ4_NL: 32 weights, value `d * KVALUES_IQ4NL[q]`; 18 bytes (`block_iq4_nl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ4_NL {
    /// Scale, f16.
    pub d: [u8; 2],
    /// Codes: element `j` low nibble, `j + 16` high nibble.
    pub qs: [u8; QK4_NL / 2],
}

/// IQ4_XS: 256 weights in 8 sub-blocks of 32 with 6-bit scales, value
/// `d * (ls - 32) * KVALUES_IQ4NL[q]`; 136 bytes (`block_iq4_xs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ4_XS {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// High 2 bits of the 8 scales, little-endian u16 (scale `ib` at bit `2 ib`).
    pub scales_h: [u8; 2],
    /// Low 4 bits of the 8 scales (scale `ib` in nibble `ib % 2` of byte `ib / 2`).
    pub scales_l: [u8; QK_K / 64],
    /// Codes, 16 bytes per sub-block, nibble order as in IQ4_NL.
    pub qs: [u8; QK_K / 2],
}

assert_block_layout!(BlockIQ4_NL, 18);
assert_block_layout!(BlockIQ4_XS, 136);

impl BlockIQ4_XS {
    /// Sub-block `ib`'s 6-bit scale minus 32.
    #[inline(always)]
    pub fn scale(&self, ib: usize) -> i32 {
        let low = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let high = (u16::from_le_bytes(self.scales_h) >> (2 * ib)) & 3;
        (low as i32 | (high as i32) << 4) - 32
    }
}

/// Writes 32 values `dl * KVALUES_IQ4NL[code]` from 16 code bytes.
#[inline(always)]
fn put32(out: &mut [f32], dl: f32, qs: &[u8]) {
    let (lo, hi) = out.split_at_mut(16);
    for ((a, b), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
        *a = dl * KVALUES_IQ4NL[(q & 0x0f) as usize] as f32;
        *b = dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ4_NL {
    const TYPE: GgmlType = GgmlType::IQ4_NL;
    const BLOCK_SIZE: usize = QK4_NL;

    #[inline]
    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK4_NL] = out.try_into().expect("IQ4_NL dequantizes 32 values");
        put32(out, read_f16(self.d), &self.qs);
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ4_XS {
    const TYPE: GgmlType = GgmlType::IQ4_XS;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ4_XS dequantizes 256 values");
        let d = read_f16(self.d);
        for (ib, (out, qs)) in out
            .chunks_exact_mut(32)
            .zip(self.qs.chunks_exact(16))
            .enumerate()
        {
            put32(out, d * self.scale(ib) as f32, qs);
        }
    }
}
