//! Device copies of sequences' recurrent state (conv histories, delta-rule matrices, the PLE
//! conv history), so the recurrent ops of a forward neither upload nor read back state.
//!
//! A sequence's mirror is keyed by its host state's [`RecurrentState::id`], which the engine
//! renews whenever the host state is replaced as a whole (a new session, a clone, a restore,
//! a truncation to a checkpoint, a reset). A part is filled from the host the first time an
//! op uses it under that id; the ops then advance the device copy only and mark it dirty, and
//! [`StateMirrors::take_dirty`] hands the dirty parts to the backend's `sync_state`, which
//! copies them into the host state at the end of every forward (the host copy is the truth
//! between forwards: the session checkpoints and snapshots it). Clean mirrors not used for a
//! while are dropped (least recently used beyond [`MAX_SEQUENCES`]); dirty ones never are.
//!
//! [`RecurrentState::id`]: strata_engine::recurrent_state::RecurrentState::id

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::buffer::{Buffer, Location};
use crate::device::Device;
use crate::error::VkError;
use crate::recorder::Recorder;
use crate::transfer;

/// Most sequences whose state is kept on the device (beyond the ones a run still has to
/// write back).
pub const MAX_SEQUENCES: usize = 16;

/// A part of a sequence's recurrent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// `DeltaState::conv` of recurrent layer `n`.
    Conv(usize),
    /// `DeltaState::ssm` of recurrent layer `n`.
    Ssm(usize),
    /// `PleState::conv`.
    PleConv,
}

/// One part on the device: `[len]` f32, and a second buffer for kernels that write the new
/// state beside the old one (the convolutions).
pub struct Slot {
    pub state: Buffer,
    spare: Option<Buffer>,
    len: usize,
    dirty: bool,
}

impl Slot {
    /// The state and a buffer of its size for the next state (allocated on first use):
    /// a kernel reads the first and writes the second; then [`Slot::advance`].
    pub fn pair(&mut self, dev: &Device) -> Result<(&Buffer, &Buffer), VkError> {
        if self.spare.is_none() {
            self.spare = Some(Buffer::new(dev, self.state.size(), Location::Device)?);
        }
        match &self.spare {
            Some(next) => Ok((&self.state, next)),
            None => Err(VkError::Shape {
                op: "state",
                what: "no buffer for the next state".into(),
            }),
        }
    }

    /// The state was written by a kernel: in place (`swapped` false) or into the spare
    /// buffer of [`Slot::pair`] (`swapped` true), which becomes the state.
    pub fn advance(&mut self, swapped: bool) {
        if swapped {
            if let Some(next) = self.spare.as_mut() {
                std::mem::swap(&mut self.state, next);
            }
        }
        self.dirty = true;
    }
}

#[derive(Default)]
struct SeqMirror {
    parts: HashMap<Part, Slot>,
    last_use: u64,
}

/// The device's copies of every sequence's recurrent state.
#[derive(Default)]
pub struct StateMirrors {
    by_id: HashMap<u64, SeqMirror>,
    tick: u64,
}

impl StateMirrors {
    /// Part `part` of the state with id `id` on the device, equal to `host` once `rec` has
    /// run: filled from `host` (the write recorded into `rec`) unless the mirror already
    /// holds it under this id.
    ///
    /// Errors: allocation errors.
    pub fn slot(
        &mut self,
        rec: &mut Recorder<'_>,
        id: u64,
        part: Part,
        host: &[f32],
    ) -> Result<&mut Slot, VkError> {
        self.tick += 1;
        if !self.by_id.contains_key(&id) {
            self.evict();
        }
        let seq = self.by_id.entry(id).or_default();
        seq.last_use = self.tick;
        if seq.parts.get(&part).is_some_and(|s| s.len != host.len()) {
            seq.parts.remove(&part);
        }
        match seq.parts.entry(part) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let bytes = 4 * host.len().max(1) as u64;
                let state = Buffer::new(rec.device(), bytes, Location::Device)?;
                if !host.is_empty() {
                    transfer::write(rec.scoped(), &state, &transfer::f32_bytes(host))?;
                }
                Ok(e.insert(Slot {
                    state,
                    spare: None,
                    len: host.len(),
                    dirty: false,
                }))
            }
        }
    }

    /// The parts of state `id` that ops advanced since the last call (part, device buffer,
    /// values), marked clean: the caller copies them into the host state.
    pub fn take_dirty(&mut self, id: u64) -> Vec<(Part, &Buffer, usize)> {
        let Some(seq) = self.by_id.get_mut(&id) else {
            return Vec::new();
        };
        seq.parts
            .iter_mut()
            .filter(|(_, s)| s.dirty)
            .map(|(p, s)| {
                s.dirty = false;
                (*p, &s.state, s.len)
            })
            .collect()
    }

    /// Forgets every mirror (a batch that advanced them failed): refilled from the host.
    pub fn clear(&mut self) {
        self.by_id.clear();
    }

    /// Bytes of device memory the mirrors hold.
    pub fn bytes(&self) -> u64 {
        let slot = |s: &Slot| s.state.size() + s.spare.as_ref().map_or(0, |b| b.size());
        self.by_id
            .values()
            .flat_map(|m| m.parts.values())
            .map(slot)
            .sum()
    }

    fn evict(&mut self) {
        while self.by_id.len() >= MAX_SEQUENCES {
            let oldest = self
                .by_id
                .iter()
                .filter(|(_, m)| m.parts.values().all(|s| !s.dirty))
                .min_by_key(|(_, m)| m.last_use)
                .map(|(id, _)| *id);
            match oldest {
                Some(id) => self.by_id.remove(&id),
                None => return,
            };
        }
    }
}
