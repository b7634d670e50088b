//! Activation functions of feed-forward blocks.

/// SwiGLU gate in place: `gate[i] = silu(gate[i]) * up[i]`, silu(x) = x·σ(x).
/// Source: Shazeer, "GLU Variants Improve Transformer" (2020); llama.cpp `LLM_FFN_SILU` + `LLM_FFN_PAR`.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        let x = *g;
        *g = x / (1.0 + (-x).exp()) * u;
    }
}

/// GeGLU gate in place with the tanh approximation of GELU:
/// `gate[i] = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) * up[i]` (Gemma's `gelu_pytorch_tanh`).
pub fn geglu_tanh(gate: &mut [f32], up: &[f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    for (g, u) in gate.iter_mut().zip(up) {
        let x = *g;
        let gelu = 0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh());
        *g = gelu * u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_match_closed_forms() {
        let mut g = [0.0f32, 1.0, -2.0];
        swiglu(&mut g, &[1.0, 2.0, 1.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 2.0 * 0.731_058_6).abs() < 1e-6);
        assert!((g[2] + 0.238_405_84).abs() < 1e-6);
        let mut h = [1.0f32, -3.0];
        geglu_tanh(&mut h, &[1.0, 1.0]);
        assert!((h[0] - 0.841_192).abs() < 1e-5);
        assert!((h[1] + 0.003_637_392).abs() < 1e-5);
    }
}
