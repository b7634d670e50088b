//! Per-sequence state of the Gated DeltaNet layers: the last `d_conv − 1` inputs of the
//! causal convolution and the `head_v_dim × head_k_dim` matrix of every value head; and, for
//! models with PLE (qwen4exp), the n-gram token window and the dilated convolution's history.
//!
//! Unlike a KV cache it summarises the whole history in a fixed size, so it cannot be cut
//! back to an earlier position: a session rewinds it by restoring a copy taken at or before
//! that position (see [`crate::Session::truncate`]). Sizes as in llama.cpp's `n_embd_r` /
//! `n_embd_s`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::{ModelConfig, PleConfig, SsmConfig};

/// A process-wide counter for [`RecurrentState::id`].
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

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
///
/// Its [`RecurrentState::id`] is renewed whenever the state is replaced as a whole (a new
/// state, a clone, [`RecurrentState::copy_from`], [`RecurrentState::reset`]): a device
/// backend that keeps a mirror of it (`strata_vulkan`) keys the mirror by the id, so a
/// restored, truncated or new session is refilled from the host. The backend's own ops
/// advance the state without renewing it, and [`crate::backend::Backend::sync_state`]
/// writes the device's state back into the host's after every forward. Code that edits the
/// public fields of a state a device may hold (other than through a backend's ops) calls
/// [`RecurrentState::renew_id`] after.
pub struct RecurrentState {
    pub layers: Vec<DeltaState>,
    pub ple: Option<PleState>,
    id: u64,
}

impl Clone for RecurrentState {
    /// A copy with a new id.
    fn clone(&self) -> Self {
        RecurrentState::from_parts(self.layers.clone(), self.ple.clone())
    }
}

impl PartialEq for RecurrentState {
    /// Equal states (the ids aside).
    fn eq(&self, other: &Self) -> bool {
        self.layers == other.layers && self.ple == other.ple
    }
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
        Some(RecurrentState::from_parts(layers, ple))
    }

    /// A state of the given parts, with a new id.
    pub fn from_parts(layers: Vec<DeltaState>, ple: Option<PleState>) -> RecurrentState {
        RecurrentState {
            layers,
            ple,
            id: next_id(),
        }
    }

    /// Identifies this state's contents for device mirrors: renewed whenever the state is
    /// replaced as a whole (see the type's docs), kept while ops advance it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Gives the state a new id: its contents changed other than by a backend's ops, so a
    /// device's copy of it is stale.
    pub fn renew_id(&mut self) {
        self.id = next_id();
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

    /// Overwrites this state with `other` (same shape) without allocating; renews the id.
    pub fn copy_from(&mut self, other: &RecurrentState) {
        self.renew_id();
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

    /// Back to the state before any token; renews the id.
    pub fn reset(&mut self) {
        self.renew_id();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_renewed_when_the_state_is_replaced_not_when_ops_advance_it() {
        let layer = DeltaState {
            conv: vec![1.0],
            ssm: vec![2.0],
        };
        let mut a = RecurrentState::from_parts(vec![layer], None);
        let id = a.id();
        a.layers[0].ssm[0] = 3.0; // an op advancing it
        assert_eq!(a.id(), id);
        let b = a.clone();
        assert_ne!(b.id(), id);
        assert!(a == b, "equal contents, other ids");
        a.copy_from(&b);
        assert_ne!(a.id(), id);
        let id = a.id();
        a.reset();
        assert_ne!(a.id(), id);
        let id = a.id();
        a.renew_id();
        assert_ne!(a.id(), id);
    }
}
