//! Rotary position embedding (Su et al., "RoFormer", 2021), in ggml's two pair layouts.

use super::par_chunks;
use crate::pool::Pool;

/// Which elements of a head form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` — ggml `LLAMA_ROPE_TYPE_NORM` (llama; the GGUF
    /// converter permutes q/k rows to this order).
    Normal,
    /// Half-split pairs `(x[i], x[i + n_rot/2])` — ggml `LLAMA_ROPE_TYPE_NEOX` (Qwen, Gemma).
    Neox,
}

/// Rotation parameters of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    pub style: RopeStyle,
    /// Rotated dimensions per head (`{arch}.rope.dimension_count`, default head dim).
    pub n_rot: usize,
    /// `{arch}.rope.freq_base`.
    pub freq_base: f32,
    /// Linear position scale (1 / `rope.scaling.factor`); 1.0 means none.
    pub freq_scale: f32,
}

impl Rope {
    /// Fills `cos_sin` (length `n_rot`: `[cos0, sin0, cos1, sin1, …]`) for position `pos`.
    /// θᵢ = pos · scale · base^(−2i/n_rot), computed by repeated multiplication in f32 as
    /// ggml's `ggml_rope_cache_init` does, so angles agree with llama.cpp to the last bit.
    pub fn angles(&self, pos: usize, cos_sin: &mut [f32]) {
        let theta_scale = self.freq_base.powf(-2.0 / self.n_rot as f32);
        let mut theta = pos as f32;
        for cs in cos_sin[..self.n_rot].chunks_exact_mut(2) {
            let t = theta * self.freq_scale;
            cs[0] = t.cos();
            cs[1] = t.sin();
            theta *= theta_scale;
        }
    }

    /// Rotates every token row of `x` (`[T][row]`, each row `n_heads × head_dim`) by its own
    /// angles: row `t` by `cos_sin[t·n_rot..(t + 1)·n_rot]` (as [`Rope::angles`] fills them).
    /// Groups of rows run in parallel on `pool`.
    pub fn apply_rows(
        &self,
        pool: &Pool,
        x: &mut [f32],
        row: usize,
        head_dim: usize,
        cos_sin: &[f32],
    ) {
        let n_rot = self.n_rot;
        par_chunks(pool, x, row, |r, x| {
            let t0 = r.start / row;
            for (t, xr) in x.chunks_exact_mut(row).enumerate() {
                let angles = &cos_sin[(t0 + t) * n_rot..(t0 + t + 1) * n_rot];
                self.apply(xr, head_dim, angles);
            }
        });
    }

    /// Rotates every head of `x` (`n_heads × head_dim`, contiguous) by precomputed angles.
    pub fn apply(&self, x: &mut [f32], head_dim: usize, cos_sin: &[f32]) {
        let half = self.n_rot / 2;
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (c, s) = (cos_sin[2 * i], cos_sin[2 * i + 1]);
                let (a, b) = match self.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_preserves_norm_and_position_zero_is_identity() {
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let rope = Rope {
                style,
                n_rot: 8,
                freq_base: 10000.0,
                freq_scale: 1.0,
            };
            let mut cs = [0.0f32; 8];
            let orig: Vec<f32> = (0..16).map(|i| i as f32 - 7.5).collect();
            let mut x = orig.clone();
            rope.angles(0, &mut cs);
            rope.apply(&mut x, 16, &cs);
            assert_eq!(x, orig);
            rope.angles(17, &mut cs);
            rope.apply(&mut x, 16, &cs);
            let n0: f32 = orig.iter().map(|v| v * v).sum();
            let n1: f32 = x.iter().map(|v| v * v).sum();
            assert!((n0 - n1).abs() < 1e-3);
            assert_eq!(&x[8..], &orig[8..], "dims past n_rot are untouched");
        }
    }

    #[test]
    fn neox_and_normal_rotate_different_pairs() {
        let mut cs = [0.0f32; 4];
        let r = Rope {
            style: RopeStyle::Neox,
            n_rot: 4,
            freq_base: 10000.0,
            freq_scale: 1.0,
        };
        r.angles(1, &mut cs);
        let mut x = [1.0f32, 0.0, 0.0, 0.0];
        r.apply(&mut x, 4, &cs);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[2] - 1f32.sin()).abs() < 1e-6);
        let n = Rope {
            style: RopeStyle::Normal,
            ..r
        };
        let mut y = [1.0f32, 0.0, 0.0, 0.0];
        n.apply(&mut y, 4, &cs);
        assert!((y[1] - 1f32.sin()).abs() < 1e-6 && y[2] == 0.0);
    }
}
