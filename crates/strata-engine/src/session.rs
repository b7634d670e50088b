//! Sequence state of one conversation: KV cache, recurrent (Gated DeltaNet) state, position,
//! and the reusable activation buffers of the forward pass.

use crate::config::ModelConfig;
use crate::kv_cache::{KvCache, KvType};
use crate::models::qwen3next::HybridScratch;
use crate::ops::linear::Activations;
use crate::ops::moe::MoeScratch;
use crate::recurrent_state::RecurrentState;

/// Activation buffers, grown to the largest batch seen and then reused (no allocation
/// per decoded token).
#[derive(Default)]
pub struct Workspace {
    /// Residual stream `[T][n_embd]`.
    pub x: Vec<f32>,
    /// Normed input of a block `[T][n_embd]`.
    pub xb: Activations,
    /// Block output before the residual add `[T][n_embd]`.
    pub xb2: Vec<f32>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    /// Attention output `[T][n_head·head_dim]`.
    pub att: Activations,
    /// FFN gate and up projections `[T][n_ff]`.
    pub hb: Activations,
    pub hb2: Vec<f32>,
    /// RoPE angles `[T][n_rot]` for full and windowed layers.
    pub rope_cs: Vec<f32>,
    pub rope_cs_swa: Vec<f32>,
    /// Logits `[rows][n_vocab]` of the last forward call.
    pub logits: Vec<f32>,
    /// Buffers of the routed-expert FFN (MoE models).
    pub moe: MoeScratch,
    /// Buffers of the Gated DeltaNet and gated attention layers (Qwen3-Next).
    pub hybrid: HybridScratch,
}

impl Workspace {
    /// Sizes every buffer for a batch of `t` tokens.
    pub fn prepare(&mut self, cfg: &ModelConfig, t: usize) {
        let q = cfg.n_head * cfg.head_dim;
        self.x.resize(t * cfg.n_embd, 0.0);
        self.xb.resize(t, cfg.n_embd);
        self.xb2.resize(t * cfg.n_embd, 0.0);
        self.q.resize(t * q, 0.0);
        self.k.resize(t * cfg.kv_row(), 0.0);
        self.v.resize(t * cfg.kv_row(), 0.0);
        self.att.resize(t, q);
        self.hb.resize(t, cfg.n_ff);
        self.hb2.resize(t * cfg.n_ff, 0.0);
        self.rope_cs.resize(t * cfg.rope.n_rot, 0.0);
        self.rope_cs_swa.resize(t * cfg.rope.n_rot, 0.0);
    }
}

/// All state of one sequence. `pos` tokens have been processed and are in the cache.
pub struct Session {
    /// Keys and values of the attention layers only, in layer order: recurrent layers have
    /// no entry (so `kv.layers[i]` is the i-th attention layer, not layer i).
    pub kv: KvCache,
    /// Convolution and DeltaNet state of the recurrent layers, if the model has any.
    pub recurrent: Option<RecurrentState>,
    pos: usize,
    /// Tokens that produced the cache, in order (length `pos`).
    tokens: Vec<u32>,
    pub(crate) ws: Workspace,
}

impl Session {
    /// A session of `n_ctx` positions with a `kv_type` cache.
    pub fn new(cfg: &ModelConfig, n_ctx: usize, kv_type: KvType) -> Session {
        Session {
            kv: KvCache::new(cfg.n_attn_layers(), n_ctx, cfg.kv_row(), kv_type),
            recurrent: RecurrentState::new(cfg),
            pos: 0,
            tokens: Vec::with_capacity(n_ctx),
            ws: Workspace::default(),
        }
    }

    /// Number of tokens in the cache.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Capacity in tokens.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx()
    }

    /// The tokens whose keys and values are cached.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Forgets every position from `n` on (n ≥ pos is a no-op). Later tokens overwrite them.
    ///
    /// A recurrent state cannot be rewound, so for models that have one (Qwen3-Next) any
    /// `n < pos` empties the session instead: `pos()` becomes 0 and the caller must feed the
    /// first `n` tokens again. Callers read `pos()` after truncating to know what is kept.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.pos {
            return;
        }
        match &mut self.recurrent {
            Some(r) => {
                r.reset();
                self.pos = 0;
                self.tokens.clear();
            }
            None => {
                self.pos = n;
                self.tokens.truncate(n);
            }
        }
    }

    /// Records that `tokens` were appended to the cache.
    pub(crate) fn advance(&mut self, tokens: &[u32]) {
        self.pos += tokens.len();
        self.tokens.extend_from_slice(tokens);
    }

    /// Logits `[rows][n_vocab]` of the last forward call.
    pub fn logits(&self) -> &[f32] {
        &self.ws.logits
    }
}
