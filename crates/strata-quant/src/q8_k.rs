//! Q8_K, the activation format of every k- and i-quant dot product: layout, dequantization and
//! ggml's reference quantizer `quantize_row_q8_K_ref` (bit-identical, tests/vectors.rs).

use strata_gguf::GgmlType;

use crate::block::{assert_block_layout, nearest_int, Block, FromFloat};
use crate::k_quants::QK_K;

/// Q8_K: the activation format of every k- and i-quant dot product: value `d * q`, with the sums
/// of each 16 quants precomputed; 292 bytes (`block_q8_K`).
///
/// ggml declares `d` as `float` and `bsums` as `int16_t[16]`; here they are little-endian byte
/// arrays so the block has alignment 1 like every other block (accessors below).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_K {
    /// Scale, f32.
    pub d: [u8; 4],
    /// Quants.
    pub qs: [i8; QK_K],
    /// Σ of quants `16 i .. 16 i + 16`, i16.
    pub bsums: [[u8; 2]; QK_K / 16],
}

assert_block_layout!(BlockQ8_K, 292);

impl BlockQ8_K {
    /// The scale.
    #[inline(always)]
    pub fn scale(&self) -> f32 {
        f32::from_le_bytes(self.d)
    }

    /// Σ of quants `16 i .. 16 i + 16` (`i < 16`).
    #[inline(always)]
    pub fn bsum(&self, i: usize) -> i32 {
        i16::from_le_bytes(self.bsums[i]) as i32
    }
}

// SAFETY: repr(C), u8/i8 arrays only; size and alignment 1 asserted by assert_block_layout!.
unsafe impl Block for BlockQ8_K {
    const TYPE: GgmlType = GgmlType::Q8_K;
    const BLOCK_SIZE: usize = QK_K;

    fn dequantize_block(&self, out: &mut [f32]) {
        let out: &mut [f32; QK_K] = out.try_into().expect("Q8_K dequantizes 256 values");
        let d = self.scale();
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = d * q as f32;
        }
    }
}

impl FromFloat for BlockQ8_K {
    /// `quantize_row_q8_K_ref`: with `max` the signed value of largest magnitude and
    /// `iscale = -127 / max`, `q = min(127, nearest_int(iscale * x))`, `d = 1 / iscale`, and the
    /// sums of each 16 quants. An all-zero input gives
    /// an all-zero block (ggml leaves `bsums` unwritten there).
    fn quantize_block(src: &[f32]) -> Self {
        let x: &[f32; QK_K] = src.try_into().expect("Q8_K quantizes 256 values");
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut block = BlockQ8_K::zeroed();
        if amax == 0.0 {
            return block;
        }
        let iscale = -127.0 / max;
        for (q, &v) in block.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (sum, qs) in block.bsums.iter_mut().zip(block.qs.chunks_exact(16)) {
            *sum = (qs.iter().map(|&q| q as i16).sum::<i16>()).to_le_bytes();
        }
        block.d = (1.0 / iscale).to_le_bytes();
        block
    }
}
