//! Sequence state of one conversation: attention KV cache, recurrent (Gated DeltaNet) state,
//! the tokens fed and the position — and the logits of its last forward call. Scratch of the
//! forward pass belongs to the model's runner ([`crate::workspace`]), not to a sequence.
//!
//! A session can be copied out whole ([`Session::snapshot`], [`Session::restore`]) and cut
//! back ([`Session::truncate`]). The KV cache is positional, so cutting it back is free; a
//! recurrent state summarises all its tokens, so the session keeps copies of it taken as it
//! goes ([`RECURRENT_CHECKPOINTS`]) and truncating restores the latest one at or below the cut.

use std::ops::Range;

use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::kv_cache::LayerKv;
use crate::kv_cache::{KvCache, KvType, KV_PAGE};
use crate::recurrent_state::{DeltaState, PleState, RecurrentState};

/// Recurrent-state copies a session keeps for [`Session::truncate`] (the newest ones).
pub const RECURRENT_CHECKPOINTS: usize = 8;
/// Decoded tokens between two automatic recurrent-state copies (a multi-token call always
/// ends with one).
pub const CHECKPOINT_EVERY: usize = 256;

/// All state of one sequence. `pos` tokens have been processed and are in the cache.
pub struct Session {
    /// Keys and values of the attention layers only, in layer order: recurrent layers have
    /// no entry (so `kv.layers[i]` is the i-th attention layer, not layer i); then those of
    /// the MTP draft layers, if the model runs any ([`ModelConfig::n_kv_layers`]).
    pub kv: KvCache,
    /// Convolution and DeltaNet state of the recurrent layers, if the model has any.
    pub recurrent: Option<RecurrentState>,
    pos: usize,
    /// Tokens that produced the cache, in order (length `pos`).
    tokens: Vec<u32>,
    /// Logits `[rows][n_vocab]` of the last forward call.
    pub(crate) logits: Vec<f32>,
    /// Copies of the recurrent state, by position, oldest first.
    checkpoints: Vec<(usize, RecurrentState)>,
}

/// An owned copy of a session's state at one position ([`Session::snapshot`]).
#[derive(Clone)]
pub struct Checkpoint {
    pos: usize,
    tokens: Vec<u32>,
    kv: KvCache,
    recurrent: Option<RecurrentState>,
}

impl Checkpoint {
    /// Tokens covered.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The tokens covered, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Bytes held: the KV pages of the covered positions, the recurrent state and the tokens.
    pub fn size_bytes(&self) -> usize {
        self.kv.size_bytes()
            + self
                .recurrent
                .as_ref()
                .map_or(0, RecurrentState::size_bytes)
            + 4 * self.tokens.len()
    }
}

impl Session {
    /// A session of at most `n_ctx` positions with a `kv_type` cache. The KV cache takes
    /// memory as tokens are fed, not for `n_ctx` up front.
    pub fn new(cfg: &ModelConfig, n_ctx: usize, kv_type: KvType) -> Session {
        Session {
            kv: KvCache::new(cfg.n_kv_layers(), n_ctx, cfg.kv_row(), kv_type)
                .with_index_keys(&cfg.index_key_widths()),
            recurrent: RecurrentState::new(cfg),
            pos: 0,
            tokens: Vec::new(),
            logits: Vec::new(),
            checkpoints: Vec::new(),
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

    /// Logits `[rows][n_vocab]` of the last forward call.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Bytes of sequence state held now: KV pages, recurrent state and its checkpoints.
    pub fn size_bytes(&self) -> usize {
        self.kv.size_bytes()
            + self
                .recurrent
                .as_ref()
                .map_or(0, RecurrentState::size_bytes)
            + self
                .checkpoints
                .iter()
                .map(|(_, r)| r.size_bytes())
                .sum::<usize>()
    }

    /// Positions at which a copy of the recurrent state is kept (empty for models without
    /// recurrent layers, where any position can be cut back to).
    pub fn checkpoint_positions(&self) -> Vec<usize> {
        self.checkpoints.iter().map(|(p, _)| *p).collect()
    }

    /// An owned copy of the whole state (KV pages of the positions in use, recurrent state,
    /// tokens), to [`Session::restore`] later into this or another session of the same model.
    pub fn snapshot(&self) -> Checkpoint {
        Checkpoint {
            pos: self.pos,
            tokens: self.tokens.clone(),
            kv: self.kv.prefix(self.pos),
            recurrent: self.recurrent.clone(),
        }
    }

    /// Puts the session in the state of `c`: continuing from it gives the logits, bit for bit,
    /// that continuing the snapshotted session would have given.
    ///
    /// Errors: `c` comes from a model with other layers or from another KV type
    /// ([`EngineError::CheckpointMismatch`]), or holds more tokens than this context.
    pub fn restore(&mut self, c: &Checkpoint) -> Result<(), EngineError> {
        let rec_ok = match (&self.recurrent, &c.recurrent) {
            (Some(a), Some(b)) => a.same_layout(b),
            (None, None) => true,
            _ => false,
        };
        if !rec_ok || !self.kv.same_layout(&c.kv) {
            return Err(EngineError::CheckpointMismatch);
        }
        if c.pos > self.n_ctx() {
            return Err(EngineError::ContextFull {
                needed: c.pos,
                n_ctx: self.n_ctx(),
            });
        }
        self.kv.copy_pages_from(&c.kv);
        if let (Some(a), Some(b)) = (&mut self.recurrent, &c.recurrent) {
            a.copy_from(b);
        }
        self.pos = c.pos;
        self.tokens.clear();
        self.tokens.extend_from_slice(&c.tokens);
        self.checkpoints.clear();
        self.checkpoint_recurrent();
        Ok(())
    }

    /// Forgets every position from `n` on (`n ≥ pos` is a no-op); later tokens overwrite them.
    ///
    /// Without recurrent layers the session keeps exactly `n` tokens. With them, it goes back
    /// to its latest recurrent checkpoint at or below `n` (position 0 if none), so `pos()` may
    /// end below `n`: callers read `pos()` after truncating and feed the tokens from there.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.pos {
            return;
        }
        let keep = match &mut self.recurrent {
            None => n,
            Some(r) => {
                self.checkpoints.retain(|(p, _)| *p <= n);
                match self.checkpoints.last() {
                    Some((p, c)) => {
                        r.copy_from(c);
                        *p
                    }
                    None => {
                        r.reset();
                        0
                    }
                }
            }
        };
        self.pos = keep;
        self.tokens.truncate(keep);
    }

    /// Records that `tokens` were appended to the cache in one forward call, and keeps a copy
    /// of the recurrent state after a multi-token call or every [`CHECKPOINT_EVERY`] tokens.
    pub(crate) fn advance(&mut self, tokens: &[u32]) {
        self.pos += tokens.len();
        // Grown a KV page at a time, as the cache is: no allocation per decoded token.
        let need = self.pos.div_ceil(KV_PAGE) * KV_PAGE;
        if self.tokens.capacity() < need {
            self.tokens.reserve_exact(need - self.tokens.len());
        }
        self.tokens.extend_from_slice(tokens);
        if self.recurrent.is_none() {
            return;
        }
        let last = self.checkpoints.last().map_or(0, |(p, _)| *p);
        if tokens.len() > 1 || self.pos >= last + CHECKPOINT_EVERY {
            self.checkpoint_recurrent();
        }
    }

    /// Keeps a copy of the recurrent state at the current position (the oldest copy is dropped
    /// beyond [`RECURRENT_CHECKPOINTS`]; its buffers are reused).
    fn checkpoint_recurrent(&mut self) {
        let Some(r) = &self.recurrent else { return };
        if self.checkpoints.last().is_some_and(|(p, _)| *p == self.pos) {
            return;
        }
        if self.checkpoints.len() == RECURRENT_CHECKPOINTS {
            let (_, mut oldest) = self.checkpoints.remove(0);
            oldest.copy_from(r);
            self.checkpoints.push((self.pos, oldest));
        } else {
            self.checkpoints.push((self.pos, r.clone()));
        }
    }
}

/// One sequence's share of a run: its state, and the rows of the run that are its tokens.
pub struct SeqRun<'a> {
    /// The sequence's attention caches, one per attention layer in order.
    pub kv: &'a mut [LayerKv],
    /// Its recurrent state, for models that have recurrent layers.
    pub rec: Option<&'a mut RecurrentState>,
    /// Position of the first row.
    pub pos0: usize,
    /// The rows of the run's activations (`[T][…]`) that hold its tokens, in order.
    pub rows: Range<usize>,
}

impl SeqRun<'_> {
    /// The sequence's state of recurrent layer `layer`.
    ///
    /// Panics if the sequence has no recurrent state: sessions of a model with recurrent
    /// layers always have it ([`RecurrentState::new`]).
    pub fn delta_state(&mut self, layer: usize) -> &mut DeltaState {
        let rec = self
            .rec
            .as_mut()
            .expect("sessions of a model with recurrent layers have recurrent state");
        &mut rec.layers[layer]
    }

    /// The sequence's PLE state.
    ///
    /// Panics if the sequence has none: sessions of a model with PLE always have it
    /// ([`RecurrentState::new`]; PLE models are hybrid models).
    pub fn ple_state(&mut self) -> &mut PleState {
        self.rec
            .as_mut()
            .and_then(|r| r.ple.as_mut())
            .expect("sessions of a model with PLE have PLE state")
    }
}
