//! Scalar reference `vec_dot` for the 32-element formats, after ggml's
//! `ggml_vec_dot_{q4_0_q8_0, q4_1_q8_1, q5_0_q8_0, q5_1_q8_1, q8_0_q8_0, iq4_nl_q8_0}_generic`:
//! an exact i32 sum of weight quants times activation quants per block, then one float
//! multiply by both scales (plus `m * s` for the affine Q4_1/Q5_1, where `s = d * Σq` of Q8_1).

use super::dot_i8;
use crate::block::{read_f16, VecDot};
use crate::iq4::BlockIQ4_NL;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

/// The 32 nibbles of a legacy block in element order (`j` low, `j + 16` high).
#[inline(always)]
fn nibbles(qs: &[u8; QK / 2]) -> [u8; QK] {
    std::array::from_fn(|j| {
        if j < 16 {
            qs[j] & 0x0f
        } else {
            qs[j - 16] >> 4
        }
    })
}

/// 5-bit values of Q5_0/Q5_1: nibble plus bit `j` of `qh` as bit 4.
#[inline(always)]
fn five_bits(qs: &[u8; QK / 2], qh: [u8; 4]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let low = nibbles(qs);
    std::array::from_fn(|j| low[j] | ((((qh >> j) & 1) as u8) << 4))
}

/// Σ over blocks of `dx * dy * Σ q_x q_y`, with `q_x` given by `quants` (signed).
#[inline(always)]
fn symmetric<X>(lhs: &[X], rhs: &[BlockQ8_0], quants: impl Fn(&X) -> ([i8; QK], [u8; 2])) -> f32 {
    assert_eq!(lhs.len(), rhs.len(), "vec_dot block counts");
    let mut sumf = 0.0f32;
    for (x, y) in lhs.iter().zip(rhs) {
        let (q, d) = quants(x);
        let sumi = dot_i8(&q, &y.qs);
        sumf += sumi as f32 * (read_f16(d) * read_f16(y.d));
    }
    sumf
}

/// Σ over blocks of `dx * dy * Σ q_x q_y + m_x * s_y` for unsigned `q_x` (Q4_1, Q5_1).
#[inline(always)]
fn affine<X>(
    lhs: &[X],
    rhs: &[BlockQ8_1],
    quants: impl Fn(&X) -> ([u8; QK], [u8; 2], [u8; 2]),
) -> f32 {
    assert_eq!(lhs.len(), rhs.len(), "vec_dot block counts");
    let mut sumf = 0.0f32;
    for (x, y) in lhs.iter().zip(rhs) {
        let (q, d, m) = quants(x);
        let sumi: i32 = q
            .iter()
            .zip(&y.qs)
            .map(|(&a, &b)| a as i32 * b as i32)
            .sum();
        sumf += (read_f16(d) * read_f16(y.d)) * sumi as f32 + read_f16(m) * read_f16(y.s);
    }
    sumf
}

impl VecDot for BlockQ4_0 {
    type VecDotType = BlockQ8_0;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_0]) -> f32 {
        symmetric(lhs, rhs, |x| (nibbles(&x.qs).map(|q| q as i8 - 8), x.d))
    }
}

impl VecDot for BlockQ5_0 {
    type VecDotType = BlockQ8_0;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_0]) -> f32 {
        symmetric(lhs, rhs, |x| {
            (five_bits(&x.qs, x.qh).map(|q| q as i8 - 16), x.d)
        })
    }
}

impl VecDot for BlockQ8_0 {
    type VecDotType = BlockQ8_0;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_0]) -> f32 {
        symmetric(lhs, rhs, |x| (x.qs, x.d))
    }
}

impl VecDot for BlockIQ4_NL {
    type VecDotType = BlockQ8_0;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_0]) -> f32 {
        symmetric(lhs, rhs, |x| {
            (nibbles(&x.qs).map(|q| KVALUES_IQ4NL[q as usize]), x.d)
        })
    }
}

impl VecDot for BlockQ4_1 {
    type VecDotType = BlockQ8_1;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_1]) -> f32 {
        affine(lhs, rhs, |x| (nibbles(&x.qs), x.d, x.m))
    }
}

impl VecDot for BlockQ5_1 {
    type VecDotType = BlockQ8_1;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_1]) -> f32 {
        affine(lhs, rhs, |x| (five_bits(&x.qs, x.qh), x.d, x.m))
    }
}
