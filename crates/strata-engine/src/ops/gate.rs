//! Gate functions of hybrid (Gated DeltaNet) layers, in the forms of ggml's CPU backend
//! (`ggml-cpu/unary-ops.cpp`, `vec.h`), with `eˣ` from [`super::exp`] (as ggml's vector
//! paths, an approximation of a few ulp rather than libm's) so that the element loops run as
//! vector code.

use super::exp::{exp, map, map2};

/// Logistic sigmoid `1 / (1 + e^−x)`.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// SiLU (swish) `x·σ(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// Softplus `ln(1 + eˣ)`, returning x itself above 20 (ggml's `op_softplus`) where the two
/// agree to f32 precision and `eˣ` would lose it.
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// `x[i] *= silu(z[i])`: the output gate of a Gated DeltaNet mixer (llama.cpp's
/// `ggml_mul(norm, ggml_silu(z))`), in chunks on `pool`. `z.len() == x.len()`.
pub fn mul_silu_in_place(pool: &crate::pool::Pool, x: &mut [f32], z: &[f32]) {
    debug_assert_eq!(x.len(), z.len());
    super::par_chunks(pool, x, 1, |r, x| map2(x, &z[r], |y, zi| y * silu(zi)));
}

/// SiLU of every element in place, in chunks on `pool`.
pub fn silu_in_place(pool: &crate::pool::Pool, x: &mut [f32]) {
    super::par_chunks(pool, x, 1, |_, x| map(x, silu));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_match_closed_forms() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!((softplus(0.0) - std::f32::consts::LN_2).abs() < 1e-7);
        assert_eq!(softplus(30.0), 30.0);
        assert!(softplus(-30.0) >= 0.0 && softplus(-30.0) < 1e-12);
    }
}
