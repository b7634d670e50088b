//! Shapes of the Gated DeltaNet layers of a hybrid model and which layers they are, read from
//! the `{arch}.ssm.*` keys (names from llama.cpp's `src/llama-arch.cpp`; meaning from
//! `llama_model_qwen3next::load_arch_hparams`).

use strata_gguf::{Array, Metadata};

use crate::error::EngineError;

/// Gated DeltaNet ("linear attention") shapes and the recurrent/attention layer pattern.
#[derive(Clone, Debug)]
pub struct SsmConfig {
    /// Causal convolution width (`ssm.conv_kernel`, 4 in Qwen3-Next).
    pub d_conv: usize,
    /// Width of one key head (`ssm.state_size`); value heads have the same width.
    pub head_k_dim: usize,
    /// Key (and query) heads (`ssm.group_count`).
    pub n_k_heads: usize,
    /// Value heads (`ssm.time_step_rank`), a multiple of `n_k_heads`.
    pub n_v_heads: usize,
    /// Width of one value head: `ssm.inner_size / n_v_heads`.
    pub head_v_dim: usize,
    /// Per layer: true for a Gated DeltaNet layer, false for full attention
    /// (`attention.recurrent_layers`, else every `full_attention_interval`-th layer is attention).
    pub recurrent: Vec<bool>,
}

impl SsmConfig {
    /// Reads the keys under `{a}.ssm.` and the layer pattern.
    ///
    /// Errors: a missing key, or shapes llama.cpp would also reject (value heads not a
    /// multiple of key heads, key and value head widths that differ).
    pub fn from_metadata(meta: &Metadata, a: &str, n_layer: usize) -> Result<Self, EngineError> {
        let get = |k: &str| -> Result<usize, EngineError> {
            Ok(meta.u64(&format!("{a}.ssm.{k}"))? as usize)
        };
        let d_conv = get("conv_kernel")?;
        let head_k_dim = get("state_size")?;
        let n_k_heads = get("group_count")?;
        let n_v_heads = get("time_step_rank")?;
        let d_inner = get("inner_size")?;
        let bad = |reason: String| EngineError::BadMetadata {
            key: format!("{a}.ssm.inner_size"),
            reason,
        };
        if d_conv < 1 || n_k_heads == 0 || n_v_heads == 0 || n_v_heads % n_k_heads != 0 {
            return Err(bad(format!(
                "{n_v_heads} value heads over {n_k_heads} key heads, conv kernel {d_conv}"
            )));
        }
        if d_inner % n_v_heads != 0 || d_inner / n_v_heads != head_k_dim {
            return Err(bad(format!(
                "inner size {d_inner} over {n_v_heads} value heads must give the key head width {head_k_dim}"
            )));
        }
        Ok(SsmConfig {
            d_conv,
            head_k_dim,
            n_k_heads,
            n_v_heads,
            head_v_dim: d_inner / n_v_heads,
            recurrent: layer_pattern(meta, a, n_layer)?,
        })
    }

    /// Query/key channels: `n_k_heads · head_k_dim`.
    pub fn key_dim(&self) -> usize {
        self.n_k_heads * self.head_k_dim
    }

    /// Value channels (`ssm.inner_size`): `n_v_heads · head_v_dim`.
    pub fn value_dim(&self) -> usize {
        self.n_v_heads * self.head_v_dim
    }

    /// Channels that go through the convolution: q, k and v (`2·key_dim + value_dim`).
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }
}

/// `attention.recurrent_layers` when present, else layer `il` is recurrent unless
/// `(il + 1) % full_attention_interval == 0` (interval default 4, as in llama.cpp).
fn layer_pattern(meta: &Metadata, a: &str, n_layer: usize) -> Result<Vec<bool>, EngineError> {
    let key = format!("{a}.attention.recurrent_layers");
    if let Some(arr) = meta.opt_array(&key)? {
        return match arr {
            // The array may also cover MTP blocks after the trunk's `n_layer`.
            Array::Bool(v) if v.len() >= n_layer => Ok(v[..n_layer].to_vec()),
            _ => Err(EngineError::BadMetadata {
                key,
                reason: format!("expected at least {n_layer} booleans"),
            }),
        };
    }
    let interval = meta
        .opt_u64(&format!("{a}.full_attention_interval"))?
        .unwrap_or(4) as usize;
    if interval == 0 {
        return Err(EngineError::BadMetadata {
            key: format!("{a}.full_attention_interval"),
            reason: "must be at least 1".into(),
        });
    }
    Ok((0..n_layer).map(|il| (il + 1) % interval != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_gguf::Value;

    #[test]
    fn layer_pattern_from_the_array_or_the_interval() {
        let mut m = Metadata::new();
        m.set("a.full_attention_interval", 4u32);
        let p = layer_pattern(&m, "a", 8).unwrap();
        assert_eq!(p, [true, true, true, false, true, true, true, false]);
        m.set(
            "a.attention.recurrent_layers",
            Value::Array(Array::Bool(vec![false, true])),
        );
        assert_eq!(layer_pattern(&m, "a", 2).unwrap(), [false, true]);
        assert_eq!(
            layer_pattern(&m, "a", 1).unwrap(),
            [false],
            "MTP entries are dropped"
        );
        assert!(layer_pattern(&m, "a", 3).is_err(), "too short");
    }
}
