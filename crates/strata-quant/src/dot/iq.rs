//! Scalar reference `vec_dot` of the i-quants against Q8_K, after ggml's
//! `ggml_vec_dot_iq*_q8_K_generic`: per block, exact i32 sums of the odd integer sub-block
//! multiplier × Σ(signed lattice value × activation quant), then one float multiply. The
//! constant factors of the scale formulas (1/8 for IQ2, 1/4 for IQ3_XXS) are applied at the end,
//! as ggml does; the IQ1 lattice offset (±1/8) uses the activation's `bsums` or a direct sum.

use super::dot_i8;
use crate::block::{read_f16, VecDot};
use crate::iq1::{iq1_grid, BlockIQ1_M, BlockIQ1_S, IQ1_DELTA};
use crate::iq2::{BlockIQ2_S, BlockIQ2_XS, BlockIQ2_XXS};
use crate::iq3::{BlockIQ3_S, BlockIQ3_XXS};
use crate::iq4::BlockIQ4_XS;
use crate::iq_tables::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL,
};
use crate::q8_k::BlockQ8_K;

/// 8 lattice bytes with sign bit `j` applied (set = negative). Lattice bytes are <= 62.
#[inline(always)]
fn signed(grid: [u8; 8], signs: u8) -> [i8; 8] {
    std::array::from_fn(|j| {
        if (signs >> j) & 1 != 0 {
            -(grid[j] as i8)
        } else {
            grid[j] as i8
        }
    })
}

#[inline(always)]
fn pair(g1: u32, g2: u32) -> [u8; 8] {
    let (a, b) = (g1.to_le_bytes(), g2.to_le_bytes());
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

/// Σ over blocks of `d_x * d_y * block_sum(x, y)`, times `factor`.
#[inline(always)]
fn blocks<X>(
    lhs: &[X],
    rhs: &[BlockQ8_K],
    factor: f32,
    f: impl Fn(&X, &BlockQ8_K) -> (f32, f32),
) -> f32 {
    assert_eq!(lhs.len(), rhs.len(), "vec_dot block counts");
    let mut sumf = 0.0f32;
    for (x, y) in lhs.iter().zip(rhs) {
        let (d, s) = f(x, y);
        sumf += d * y.scale() * s;
    }
    factor * sumf
}

impl VecDot for BlockIQ2_XXS {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 0.125, |x, y| {
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let aux1 = u32::from_le_bytes(x.qs[8 * ib + 4..8 * ib + 8].try_into().unwrap());
                let mut sumi = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let grid = IQ2XXS_GRID[x.qs[8 * ib + l] as usize].to_le_bytes();
                    let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize];
                    sumi += dot_i8(&signed(grid, signs), q8);
                }
                bsum += sumi * (2 * (aux1 >> 28) as i32 + 1);
            }
            (read_f16(x.d), bsum as f32)
        })
    }
}

impl VecDot for BlockIQ2_XS {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 0.125, |x, y| {
            let mut bsum = 0i32;
            for (k, q8) in y.qs.chunks_exact(8).enumerate() {
                let q = u16::from_le_bytes([x.qs[2 * k], x.qs[2 * k + 1]]);
                let grid = IQ2XS_GRID[(q & 511) as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                let s = (x.scales[k / 4] >> (4 * ((k / 2) % 2))) & 0x0f;
                bsum += (2 * s as i32 + 1) * dot_i8(&signed(grid, signs), q8);
            }
            (read_f16(x.d), bsum as f32)
        })
    }
}

impl VecDot for BlockIQ2_S {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 0.125, |x, y| {
            let mut bsum = 0i32;
            for (k, q8) in y.qs.chunks_exact(8).enumerate() {
                let (ib, l) = (k / 4, k % 4);
                let high = ((x.qh[ib] >> (2 * l)) & 3) as usize;
                let grid = IQ2S_GRID[x.qs[k] as usize | (high << 8)].to_le_bytes();
                let s = (x.scales[ib] >> (4 * (l / 2))) & 0x0f;
                bsum += (2 * s as i32 + 1) * dot_i8(&signed(grid, x.qs[32 + k]), q8);
            }
            (read_f16(x.d), bsum as f32)
        })
    }
}

impl VecDot for BlockIQ3_XXS {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 0.25, |x, y| {
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let at = 64 + 4 * ib;
                let aux = u32::from_le_bytes(x.qs[at..at + 4].try_into().unwrap());
                let mut sumi = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let g1 = IQ3XXS_GRID[x.qs[8 * ib + 2 * l] as usize];
                    let g2 = IQ3XXS_GRID[x.qs[8 * ib + 2 * l + 1] as usize];
                    let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                    sumi += dot_i8(&signed(pair(g1, g2), signs), q8);
                }
                bsum += sumi * (2 * (aux >> 28) as i32 + 1);
            }
            (read_f16(x.d), bsum as f32)
        })
    }
}

impl VecDot for BlockIQ3_S {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 1.0, |x, y| {
            let mut bsum = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let qh = x.qh[ib] as usize;
                let mut sumi = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let k = 2 * l;
                    let i1 = x.qs[8 * ib + k] as usize | (((qh >> k) & 1) << 8);
                    let i2 = x.qs[8 * ib + k + 1] as usize | (((qh >> (k + 1)) & 1) << 8);
                    let grid = pair(IQ3S_GRID[i1], IQ3S_GRID[i2]);
                    sumi += dot_i8(&signed(grid, x.signs[4 * ib + l]), q8);
                }
                let s = (x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
                bsum += sumi * (1 + 2 * s as i32);
            }
            (read_f16(x.d), bsum as f32)
        })
    }
}

impl VecDot for BlockIQ1_S {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 1.0, |x, y| {
            let (mut sumi, mut sumi1) = (0i32, 0i32);
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let qh = u16::from_le_bytes([x.qh[2 * ib], x.qh[2 * ib + 1]]) as usize;
                let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
                let mut lsum = 0i32;
                for (l, q8) in q8.chunks_exact(8).enumerate() {
                    let index = x.qs[4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                    lsum += dot_i8(&iq1_grid(index), q8);
                }
                let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
                sumi += ls * lsum;
                sumi1 += ls * delta * (y.bsum(2 * ib) + y.bsum(2 * ib + 1));
            }
            (read_f16(x.d), sumi as f32 + IQ1_DELTA * sumi1 as f32)
        })
    }
}

impl VecDot for BlockIQ1_M {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 1.0, |x, y| {
            let sc = x.scale_words();
            let (mut sumi1, mut sumi2) = (0i32, 0i32);
            for (k, q8) in y.qs.chunks_exact(8).enumerate() {
                let ls = 2 * ((sc[k / 8] >> (3 * ((k / 2) % 4))) & 7) as i32 + 1;
                let nibble = (x.qh[k / 2] >> (4 * (k % 2))) as usize;
                let index = x.qs[k] as usize | ((nibble & 7) << 8);
                let delta = if nibble & 8 != 0 { -1 } else { 1 };
                sumi1 += ls * dot_i8(&iq1_grid(index), q8);
                sumi2 += ls * delta * q8.iter().map(|&q| q as i32).sum::<i32>();
            }
            (x.super_scale(), sumi1 as f32 + IQ1_DELTA * sumi2 as f32)
        })
    }
}

impl VecDot for BlockIQ4_XS {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        blocks(lhs, rhs, 1.0, |x, y| {
            let mut sumi = 0i32;
            for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
                let qs = &x.qs[16 * ib..16 * ib + 16];
                let v: [i8; 32] = std::array::from_fn(|j| {
                    let code = if j < 16 {
                        qs[j] & 0x0f
                    } else {
                        qs[j - 16] >> 4
                    };
                    KVALUES_IQ4NL[code as usize]
                });
                sumi += x.scale(ib) * dot_i8(&v, q8);
            }
            (read_f16(x.d), sumi as f32)
        })
    }
}
