//! Activation functions of feed-forward blocks.

use std::sync::OnceLock;

use super::exp::map2;
use super::gate::silu;
use super::par_chunks;
use crate::pool::Pool;

/// SwiGLU gate in place: `gate[i] = silu(gate[i]) * up[i]`, silu(x) = x·σ(x); chunks of
/// elements run in parallel on `pool`.
/// Source: Shazeer, "GLU Variants Improve Transformer" (2020); llama.cpp `LLM_FFN_SILU` + `LLM_FFN_PAR`.
pub fn swiglu(pool: &Pool, gate: &mut [f32], up: &[f32]) {
    debug_assert_eq!(gate.len(), up.len());
    par_chunks(pool, gate, 1, |r, gate| {
        map2(gate, &up[r], |x, u| silu(x) * u)
    });
}

/// GeGLU gate in place with the tanh approximation of GELU:
/// `gate[i] = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) * up[i]` (Gemma's `gelu_pytorch_tanh`);
/// chunks of elements run in parallel on `pool`.
///
/// As ggml's CPU `ggml_vec_geglu_f32` (built with `GGML_GELU_FP16`): for -10 < x < 10 the GELU
/// is looked up at the f16-rounded x and rounded to f16 (its `ggml_table_gelu_f16`); x ≤ -10
/// gives 0 and x ≥ 10 gives x. Exact f32 GELU moved tiny gemma3 logits by ~8e-4 from llama.cpp.
/// The table is built once per process (65536 f32, 256 KiB) from [`gelu_f16`].
pub fn geglu_tanh(pool: &Pool, gate: &mut [f32], up: &[f32]) {
    debug_assert_eq!(gate.len(), up.len());
    let table = gelu_table();
    par_chunks(pool, gate, 1, |r, gate| {
        for (g, u) in gate.iter_mut().zip(&up[r]) {
            let x = *g;
            let gelu = if x <= -10.0 {
                0.0
            } else if x >= 10.0 {
                x
            } else {
                table[half::f16::from_f32(x).to_bits() as usize]
            };
            *g = gelu * u;
        }
    });
}

/// GELU (tanh form) of an f16 value, rounded to f16: one entry of ggml's `ggml_table_gelu_f16`.
fn gelu_f16(x: half::f16) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    let x = x.to_f32();
    let y = 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh());
    half::f16::from_f32(y).to_f32()
}

/// [`gelu_f16`] of every f16 bit pattern, indexed by the bits.
fn gelu_table() -> &'static [f32] {
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|b| gelu_f16(half::f16::from_bits(b)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_match_closed_forms() {
        let mut g = [0.0f32, 1.0, -2.0];
        swiglu(crate::pool::global(), &mut g, &[1.0, 2.0, 1.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.0 * 0.731_058_6).abs() < 1e-6);
        assert!((g[2] + 0.238_405_84).abs() < 1e-6);
        let mut h = [1.0f32, -3.0];
        geglu_tanh(crate::pool::global(), &mut h, &[1.0, 1.0]);
        // GELU values are f16-rounded as in ggml (half an f16 ulp at 0.84 is 2.4e-4).
        assert!((h[0] - 0.841_192).abs() < 2.5e-4);
        assert!((h[1] + 0.003_637_392).abs() < 1e-5);
        let mut big = [-11.0f32, 12.0];
        geglu_tanh(crate::pool::global(), &mut big, &[2.0, 2.0]);
        assert_eq!(big, [0.0, 24.0]);
    }

    /// The formula before the table: GELU at the f16-rounded x, rounded to f16.
    fn geglu_direct(x: f32) -> f32 {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        const COEF_A: f32 = 0.044715;
        let f16 = |v: f32| half::f16::from_f32(v).to_f32();
        if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x
        } else {
            let x = f16(x);
            f16(0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh()))
        }
    }

    #[test]
    fn geglu_table_is_bit_identical_to_the_direct_formula() {
        // Every f16 value, and f32 values between them (they round to their f16 neighbours).
        let mut xs: Vec<f32> = (0..=u16::MAX)
            .map(|b| half::f16::from_bits(b).to_f32())
            .filter(|v| v.is_finite())
            .collect();
        xs.extend((0..200_000).map(|i| (i as f32 - 100_000.0) * 1.1e-4 + 1.3e-7));
        let mut g = xs.clone();
        geglu_tanh(crate::pool::global(), &mut g, &vec![1.0; xs.len()]);
        for (x, y) in xs.iter().zip(&g) {
            assert_eq!(y.to_bits(), geglu_direct(*x).to_bits(), "x = {x}");
        }
    }
}
