//! Reference quantizers for Q4_K, Q5_K and Q6_K.
//!
//! These follow ggml's `quantize_row_q4_K_ref`, `quantize_row_q5_K_ref` and
//! `quantize_row_q6_K_ref` (`ggml-quants.c`, the path taken without an importance matrix) step
//! for step, in the same float operation order, so the output is bit-identical to ggml's C
//! reference (tests/vectors.rs checks this against libggml).
//!
//! Q4_K/Q5_K: each 32-element sub-block gets an affine fit `x ≈ scale * q - min` from a weighted
//! search over candidate scales (`make_qkx2_quants`), then the 8 scales and 8 mins are themselves
//! quantized to 6 bits against the block maxima, and the quants are recomputed with those.
//! Q6_K: each 16-element sub-block gets a symmetric fit from `make_qx_quants` (search over 18
//! perturbed scales, weights x²), the 16 scales are quantized to i8, and the quants recomputed.

use crate::block::{nearest_int, read_f16, write_f16, Block, FromFloat};
use crate::k_quants::{scale_min_k4, BlockQ4_K, BlockQ5_K, BlockQ6_K, K_SCALE_SIZE, QK_K};

/// ggml's `GROUP_MAX_EPS`: below this a group counts as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// `make_qkx2_quants`: fits `x ≈ scale * L - min` with `L` in `0..=nmax` minimizing the
/// `weights`-weighted squared error, trying `nstep + 1` scales `(nmax + rmin + rdelta * is) /
/// (max - min)` after the plain min/max one. Writes `L`, returns `(scale, -min)` (`-min >= 0`).
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let mut laux = [0u8; 32];
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        min = if x[i] < min { x[i] } else { min };
        max = if x[i] > max { x[i] } else { max };
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * q as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let (w, q) = (weights[i], q as f32);
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                l.copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `make_qx_quants` with `rmse_type = 1` and no importance weights: fits `x ≈ scale * L`,
/// `L + nmax` in `0..2 nmax`, weights `x²`. Writes `L + nmax`, returns the (signed) scale.
fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for (li, &v) in l.iter_mut().zip(x) {
        *li = (quant(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                *li = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// The Q4_K/Q5_K recipe shared by both: per-32 affine fits, 6-bit scale/min quantization, final
/// quants in `0..=nmax`. Returns `(d, dmin, packed scales, L)`.
fn quantize_k_affine(
    x: &[f32; QK_K],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> ([u8; 2], [u8; 2], [u8; K_SCALE_SIZE], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2 = xs.iter().fold(0.0f32, |s, &v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|i| av_x + xs[i].abs());
        let (scale, min) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            rmin,
            0.1,
            nstep,
        );
        (scales[j], mins[j]) = (scale, min);
        max_scale = if scale > max_scale { scale } else { max_scale };
        max_min = if min > max_min { min } else { max_min };
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; K_SCALE_SIZE];
    for j in 0..QK_K / 32 {
        // ggml stores nearest_int into a uint8_t (wrapping) before clamping to 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let (d, dmin) = (write_f16(max_scale / 63.0), write_f16(max_min / 63.0));

    for j in 0..QK_K / 32 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dl = read_f16(d) * sc as f32;
        if dl == 0.0 {
            continue; // keep the sub-block's quants from the fit
        }
        let dm = read_f16(dmin) * m as f32;
        for i in 32 * j..32 * j + 32 {
            l[i] = nearest_int((x[i] + dm) / dl).clamp(0, nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

impl FromFloat for BlockQ4_K {
    /// `quantize_row_q4_K_ref` (bit-identical): `make_qkx2_quants(32, 15, …, -1, 0.1, 20)`.
    fn quantize_block(src: &[f32]) -> Self {
        let x: &[f32; QK_K] = src.try_into().expect("Q4_K quantizes 256 values");
        let (d, dmin, scales, l) = quantize_k_affine(x, 15, -1.0, 20);
        let mut qs = [0u8; QK_K / 2];
        for (c, q) in qs.chunks_exact_mut(32).enumerate() {
            for (i, q) in q.iter_mut().enumerate() {
                *q = l[64 * c + i] | (l[64 * c + 32 + i] << 4);
            }
        }
        BlockQ4_K {
            d,
            dmin,
            scales,
            qs,
        }
    }
}

impl FromFloat for BlockQ5_K {
    /// `quantize_row_q5_K_ref` (bit-identical): `make_qkx2_quants(32, 31, …, -0.5, 0.1, 15)`.
    fn quantize_block(src: &[f32]) -> Self {
        let x: &[f32; QK_K] = src.try_into().expect("Q5_K quantizes 256 values");
        let (d, dmin, scales, l) = quantize_k_affine(x, 31, -0.5, 15);
        let (mut qs, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 8]);
        for (c, q) in qs.chunks_exact_mut(32).enumerate() {
            for (i, q) in q.iter_mut().enumerate() {
                let (l1, l2) = (l[64 * c + i], l[64 * c + 32 + i]);
                *q = (l1 & 0x0f) | ((l2 & 0x0f) << 4);
                qh[i] |= ((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1));
            }
        }
        BlockQ5_K {
            d,
            dmin,
            scales,
            qh,
            qs,
        }
    }
}

impl FromFloat for BlockQ6_K {
    /// `quantize_row_q6_K_ref` (bit-identical): `make_qx_quants(16, 32, …, rmse_type 1)` per
    /// sub-block, scales to i8 against the largest-magnitude scale (`d = max_scale / -128`).
    fn quantize_block(src: &[f32]) -> Self {
        let x: &[f32; QK_K] = src.try_into().expect("Q6_K quantizes 256 values");
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for (ib, scale) in scales.iter_mut().enumerate() {
            let r = 16 * ib..16 * ib + 16;
            *scale = make_qx_quants(32, &x[r.clone()], &mut l[r]);
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = *scale;
            }
        }
        let mut block = BlockQ6_K::zeroed();
        if max_abs_scale < GROUP_MAX_EPS {
            return block;
        }
        let iscale = -128.0 / max_scale;
        block.d = write_f16(1.0 / iscale);
        for (s, &scale) in block.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale).min(127) as i8;
        }
        for (j, &s) in block.scales.iter().enumerate() {
            let dl = read_f16(block.d) * s as f32;
            if dl == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                l[i] = (nearest_int(x[i] / dl).clamp(-32, 31) + 32) as i8;
            }
        }
        for c in 0..QK_K / 128 {
            let (ql, qh) = (
                &mut block.ql[64 * c..64 * c + 64],
                &mut block.qh[32 * c..32 * c + 32],
            );
            let lq = |k: usize| l[128 * c + k] as u8;
            for i in 0..32 {
                ql[i] = (lq(i) & 0x0f) | ((lq(i + 64) & 0x0f) << 4);
                ql[i + 32] = (lq(i + 32) & 0x0f) | ((lq(i + 96) & 0x0f) << 4);
                qh[i] = (lq(i) >> 4)
                    | ((lq(i + 32) >> 4) << 2)
                    | ((lq(i + 64) >> 4) << 4)
                    | ((lq(i + 96) >> 4) << 6);
            }
        }
        block
    }
}
