//! Scalar reference `vec_dot` of the k-quants against Q8_K, after ggml's
//! `ggml_vec_dot_q{2,3,4,5,6}_K_q8_K_generic`: per block, exact i32 sums of sub-block scale ×
//! Σ(weight quant × activation quant), one float multiply by `d_x * d_y`, and the minimum term
//! taken from the activation's precomputed 16-element sums (`bsums`).

use crate::block::{read_f16, VecDot};
use crate::k_quants::{
    q3_k_scales, scale_min_k4, BlockQ2_K, BlockQ3_K, BlockQ4_K, BlockQ5_K, BlockQ6_K,
};
use crate::q8_k::BlockQ8_K;

/// Σ_g `scales[g]` · Σ over sub-block `g` (of `len` elements) of `q · q8`.
#[inline(always)]
fn scaled_sum<Q: Copy + Into<i32>>(q: &[Q], q8: &[i8], scales: &[i32], len: usize) -> i32 {
    let mut isum = 0i32;
    for ((q, q8), &sc) in q.chunks_exact(len).zip(q8.chunks_exact(len)).zip(scales) {
        let s: i32 = q.iter().zip(q8).map(|(&a, &b)| a.into() * b as i32).sum();
        isum += sc * s;
    }
    isum
}

fn check(lhs: usize, rhs: usize) {
    assert_eq!(lhs, rhs, "vec_dot block counts");
}

impl VecDot for BlockQ2_K {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        check(lhs.len(), rhs.len());
        let mut sumf = 0.0f32;
        for (x, y) in lhs.iter().zip(rhs) {
            let scales = x.scales.map(|s| (s & 0x0f) as i32);
            let isum = scaled_sum(&x.quants(), &y.qs, &scales, 16);
            let summs: i32 = (0..16).map(|j| y.bsum(j) * (x.scales[j] >> 4) as i32).sum();
            let dall = y.scale() * read_f16(x.d);
            let dmin = y.scale() * read_f16(x.dmin);
            sumf += dall * isum as f32 - dmin * summs as f32;
        }
        sumf
    }
}

impl VecDot for BlockQ3_K {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        check(lhs.len(), rhs.len());
        let mut sumf = 0.0f32;
        for (x, y) in lhs.iter().zip(rhs) {
            let scales = q3_k_scales(&x.scales).map(|s| s as i32);
            let isum = scaled_sum(&x.quants(), &y.qs, &scales, 16);
            sumf += read_f16(x.d) * y.scale() * isum as f32;
        }
        sumf
    }
}

/// Q4_K and Q5_K share scales, mins and sub-block shape; only the quants differ.
#[inline(always)]
fn affine_k(
    quants: &[u8; 256],
    packed: &[u8; 12],
    d: [u8; 2],
    dmin: [u8; 2],
    y: &BlockQ8_K,
) -> f32 {
    let (mut scales, mut mins) = ([0i32; 8], 0i32);
    for (g, s) in scales.iter_mut().enumerate() {
        let (sc, m) = scale_min_k4(g, packed);
        *s = sc as i32;
        mins += m as i32 * (y.bsum(2 * g) + y.bsum(2 * g + 1));
    }
    let isum = scaled_sum(quants, &y.qs, &scales, 32);
    read_f16(d) * y.scale() * isum as f32 - read_f16(dmin) * y.scale() * mins as f32
}

impl VecDot for BlockQ4_K {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        check(lhs.len(), rhs.len());
        lhs.iter()
            .zip(rhs)
            .map(|(x, y)| affine_k(&x.quants(), &x.scales, x.d, x.dmin, y))
            .sum()
    }
}

impl VecDot for BlockQ5_K {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        check(lhs.len(), rhs.len());
        lhs.iter()
            .zip(rhs)
            .map(|(x, y)| affine_k(&x.quants(), &x.scales, x.d, x.dmin, y))
            .sum()
    }
}

impl VecDot for BlockQ6_K {
    type VecDotType = BlockQ8_K;

    fn vec_dot(lhs: &[Self], rhs: &[BlockQ8_K]) -> f32 {
        check(lhs.len(), rhs.len());
        let mut sumf = 0.0f32;
        for (x, y) in lhs.iter().zip(rhs) {
            let scales = x.scales.map(|s| s as i32);
            let isum = scaled_sum(&x.quants(), &y.qs, &scales, 16);
            sumf += read_f16(x.d) * y.scale() * isum as f32;
        }
        sumf
    }
}
