//! Per-sequence state of the Gated DeltaNet layers: the last `d_conv − 1` inputs of the
//! causal convolution and the `head_v_dim × head_k_dim` matrix of every value head; and, for
//! models with PLE (qwen4exp), the n-gram token window and the dilated convolution's history.
//!
//! Unlike a KV cache it summarises the whole history in a fixed size, so it cannot be cut
//! back to an earlier position: a session rewinds it by restoring a copy taken at or before
//! that position (see [`crate::Session::truncate`]). Sizes as in llama.cpp's `n_embd_r` /
//! `n_embd_s`.

use crate::config::{ModelConfig, PleConfig, SsmConfig};

/// State of one Gated DeltaNet layer.
#[derive(Clone, PartialEq)]
pub struct DeltaState {
    /// Convolution inputs of the previous `d_conv − 1` positions, oldest first:
    /// `[d_conv − 1][conv_dim]` (zeros before the first token).
    pub conv: Vec<f32>,
    /// Recurrent matrices `[n_v_heads][head_k_dim][head_v_dim]`, row-major: `S[i][j]` of a
    /// head is the weight of key dimension `i` for value channel `j` (the layout of
    /// [`crate::ops::delta_net`], the transpose of ggml's; the Vulkan backend's delta-rule
    /// kernel reads the same layout).
    pub ssm: Vec<f32>,
}

/// State of the PLE layer (qwen4exp): what the next token's n-grams and convolution read
/// from the tokens before it (transformers keeps both in its cache as conv states).
#[derive(Clone, PartialEq)]
pub struct PleState {
    /// The previous `ngram − 1` token ids, oldest first (EOS before the sequence start).
    pub tokens: Vec<u64>,
    /// The EOS id that fills the window at the start.
    pub eos: u64,
    /// The convolution's inputs of the previous `(K − 1)·ngram` positions, oldest first:
    /// `[(K − 1)·ngram][hc·n_embd]` (zeros before the first token).
    pub conv: Vec<f32>,
}

impl PleState {
    /// The state before any token, for residual rows of `width`.
    pub fn new(p: &PleConfig, width: usize) -> PleState {
        PleState {
            tokens: vec![p.eos; p.ngram - 1],
            eos: p.eos,
            conv: vec![0.0; p.conv_history() * width],
        }
    }
}

/// The recurrent state of a sequence: one [`DeltaState`] per recurrent layer, in layer order,
/// and the PLE layer's state if the model has one.
#[derive(Clone, PartialEq)]
pub struct RecurrentState {
    pub layers: Vec<DeltaState>,
    pub ple: Option<PleState>,
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
        let ple = cfg
            .ple
            .as_ref()
            .map(|p| PleState::new(p, cfg.residual_width()));
        Some(RecurrentState { layers, ple })
    }

    /// Bytes of state.
    pub fn size_bytes(&self) -> usize {
        let floats: usize = self.layers.iter().map(|l| l.conv.len() + l.ssm.len()).sum();
        let ple = self
            .ple
            .as_ref()
            .map_or(0, |p| 8 * p.tokens.len() + 4 * p.conv.len());
        4 * floats + ple
    }

    /// Overwrites this state with `other` (same shape) without allocating.
    pub fn copy_from(&mut self, other: &RecurrentState) {
        for (a, b) in self.layers.iter_mut().zip(&other.layers) {
            a.conv.copy_from_slice(&b.conv);
            a.ssm.copy_from_slice(&b.ssm);
        }
        if let (Some(a), Some(b)) = (&mut self.ple, &other.ple) {
            a.tokens.copy_from_slice(&b.tokens);
            a.conv.copy_from_slice(&b.conv);
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
            && match (&self.ple, &other.ple) {
                (Some(a), Some(b)) => {
                    a.tokens.len() == b.tokens.len() && a.conv.len() == b.conv.len()
                }
                (None, None) => true,
                _ => false,
            }
    }

    /// Back to the state before any token.
    pub fn reset(&mut self) {
        for l in &mut self.layers {
            l.conv.fill(0.0);
            l.ssm.fill(0.0);
        }
        if let Some(p) = &mut self.ple {
            p.tokens.fill(p.eos);
            p.conv.fill(0.0);
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
