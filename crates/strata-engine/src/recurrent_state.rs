//! Per-sequence state of the Gated DeltaNet layers: the last `d_conv − 1` inputs of the
//! causal convolution and the `head_v_dim × head_k_dim` matrix of every value head.
//!
//! Unlike a KV cache it summarises the whole history in a fixed size, so it cannot be cut
//! back to an earlier position: a session rewinds it by restoring a copy taken at or before
//! that position (see [`crate::Session::truncate`]). Sizes as in llama.cpp's `n_embd_r` /
//! `n_embd_s`.

use crate::config::{ModelConfig, SsmConfig};

/// State of one Gated DeltaNet layer.
#[derive(Clone, PartialEq)]
pub struct DeltaState {
    /// Convolution inputs of the previous `d_conv − 1` positions, oldest first:
    /// `[d_conv − 1][conv_dim]` (zeros before the first token).
    pub conv: Vec<f32>,
    /// Recurrent matrices `[n_v_heads][head_v_dim][head_k_dim]`: row `j` of a head holds
    /// `S[·][j]`, the keys' weights for value channel `j` (ggml's transposed layout, so both
    /// `Sᵀk` and `Sᵀq` are row dot products).
    pub ssm: Vec<f32>,
}

/// The recurrent state of a sequence: one [`DeltaState`] per recurrent layer, in layer order.
#[derive(Clone, PartialEq)]
pub struct RecurrentState {
    pub layers: Vec<DeltaState>,
}

impl RecurrentState {
    /// Zero state for every recurrent layer of `cfg`, or `None` if the model has none.
    ///
    /// Memory per layer: `4 · ((d_conv − 1)·conv_dim + n_v_heads·head_v_dim·head_k_dim)` bytes
    /// (Qwen3-Next-80B: about 2.1 MB, 36 layers).
    pub fn new(cfg: &ModelConfig) -> Option<RecurrentState> {
        let ssm = cfg.ssm.as_ref()?;
        let n = ssm.recurrent.iter().filter(|r| **r).count();
        let layers = (0..n).map(|_| DeltaState::new(ssm)).collect();
        Some(RecurrentState { layers })
    }

    /// Bytes of state.
    pub fn size_bytes(&self) -> usize {
        let floats: usize = self.layers.iter().map(|l| l.conv.len() + l.ssm.len()).sum();
        4 * floats
    }

    /// Overwrites this state with `other` (same shape) without allocating.
    pub fn copy_from(&mut self, other: &RecurrentState) {
        for (a, b) in self.layers.iter_mut().zip(&other.layers) {
            a.conv.copy_from_slice(&b.conv);
            a.ssm.copy_from_slice(&b.ssm);
        }
    }

    /// Whether `other` has this state's layer count and sizes.
    pub fn same_layout(&self, other: &RecurrentState) -> bool {
        self.layers.len() == other.layers.len()
            && self
                .layers
                .iter()
                .zip(&other.layers)
                .all(|(a, b)| a.conv.len() == b.conv.len() && a.ssm.len() == b.ssm.len())
    }

    /// Back to the state before any token.
    pub fn reset(&mut self) {
        for l in &mut self.layers {
            l.conv.fill(0.0);
            l.ssm.fill(0.0);
        }
    }
}

impl DeltaState {
    fn new(s: &SsmConfig) -> DeltaState {
        DeltaState {
            conv: vec![0.0; (s.d_conv - 1) * s.conv_dim()],
            ssm: vec![0.0; s.n_v_heads * s.head_v_dim * s.head_k_dim],
        }
    }
}
