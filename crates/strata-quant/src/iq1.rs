//! The 1-bit i-quants IQ1_S and IQ1_M: layouts and reference dequantization.
//!
//! Layouts: `block_iq1_s`, `block_iq1_m` in llama.cpp's `ggml-common.h`. Each group of 8 weights
//! is one ternary lattice point (`IQ1S_GRID`, values -1/0/+1) shifted by ±1/8 (`IQ1S_DELTA`) and
//! scaled by an odd 3-bit sub-block multiplier: `dl * (grid + delta)`, as gguf-py computes it.

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, f16_to_f32, read_f16, Block};
use crate::iq_tables::IQ1S_GRID;
use crate::k_quants::QK_K;

/// The lattice offset of IQ1_S and IQ1_M (`IQ1S_DELTA`, `IQ1M_DELTA`).
pub const IQ1_DELTA: f32 = 0.125;

/// IQ1_S: 1.5625 bits per weight; 50 bytes (`block_iq1_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ1_S {
    /// Super-block scale, f16.
    pub d: [u8; 2],
    /// Low 8 bits of each 8-weight group's 11-bit grid index.
    pub qs: [u8; QK_K / 8],
    /// Per 32 weights a little-endian u16: bits `3 l .. 3 l + 3` are index bits 8..11 of group
    /// `l`, bits 12..15 the scale `s` (multiplier `2 s + 1`), bit 15 the sign of the delta.
    pub qh: [u8; QK_K / 16],
}

/// IQ1_M: 1.75 bits per weight; 56 bytes (`block_iq1_m`). It has no f16 field of its own: the
/// super-block scale's 16 bits are the top nibbles of the four `scales` u16 words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIQ1_M {
    /// Low 8 bits of each 8-weight group's 11-bit grid index.
    pub qs: [u8; QK_K / 8],
    /// One nibble per group (low nibble first): index bits 8..11, then the delta sign (bit 3).
    pub qh: [u8; QK_K / 16],
    /// Four little-endian u16: 3-bit scales for each 16 weights in bits 0..12 (4 per word),
    /// and nibble `k` of the f16 super-block scale in bits 12..16 of word `k`.
    pub scales: [u8; QK_K / 32],
}

assert_block_layout!(BlockIQ1_S, 50);
assert_block_layout!(BlockIQ1_M, 56);

impl BlockIQ1_M {
    /// The four `scales` words.
    #[inline(always)]
    pub fn scale_words(&self) -> [u16; 4] {
        std::array::from_fn(|k| u16::from_le_bytes([self.scales[2 * k], self.scales[2 * k + 1]]))
    }

    /// The super-block scale assembled from the top nibbles of the scale words.
    #[inline(always)]
    pub fn super_scale(&self) -> f32 {
        let sc = self.scale_words();
        let bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        f16_to_f32(bits)
    }
}

/// The signed bytes of IQ1S_GRID point `index`.
#[inline(always)]
pub(crate) fn iq1_grid(index: usize) -> [i8; 8] {
    IQ1S_GRID[index].to_le_bytes().map(|b| b as i8)
}

#[inline(always)]
fn put_group(out: &mut [f32], dl: f32, grid: [i8; 8], delta: f32) {
    for (o, &g) in out.iter_mut().zip(&grid) {
        *o = dl * (g as f32 + delta);
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ1_S {
    const TYPE: GgmlType = GgmlType::IQ1_S;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ1_S dequantizes 256 values");
        let d = read_f16(self.d);
        for (ib, out) in out.chunks_exact_mut(32).enumerate() {
            let qh = u16::from_le_bytes([self.qh[2 * ib], self.qh[2 * ib + 1]]) as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 {
                -IQ1_DELTA
            } else {
                IQ1_DELTA
            };
            for (l, out) in out.chunks_exact_mut(8).enumerate() {
                let index = self.qs[4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                put_group(out, dl, iq1_grid(index), delta);
            }
        }
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockIQ1_M {
    const TYPE: GgmlType = GgmlType::IQ1_M;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("IQ1_M dequantizes 256 values");
        let d = self.super_scale();
        let sc = self.scale_words();
        for (k, out) in out.chunks_exact_mut(8).enumerate() {
            // Group k: 32-weight block ib = k / 4, its 16-weight half k / 2 % 2.
            let s = (sc[k / 8] >> (3 * ((k / 2) % 4))) & 7;
            let dl = d * (2 * s + 1) as f32;
            let nibble = (self.qh[k / 2] >> (4 * (k % 2))) as usize;
            let index = self.qs[k] as usize | ((nibble & 7) << 8);
            let delta = if nibble & 8 != 0 {
                -IQ1_DELTA
            } else {
                IQ1_DELTA
            };
            put_group(out, dl, iq1_grid(index), delta);
        }
    }
}
