//! Device copies of sessions' KV caches.
//!
//! The host cache ([`LayerKv`]) stays the source of truth: the backend writes every key and
//! value row to it as well, so snapshots, restores and truncation work as on the CPU. The
//! device keeps one mirror per host layer, keyed by the layer's [`LayerKv::id`] (renewed by
//! every restore or copy), valid for the positions it wrote under that id. A mirror that is
//! behind (a restored or new session continuing at a later position) is filled from the host
//! first (the copies recorded into the backend's open batch); a truncated session simply
//! overwrites its positions again. Mirrors not used for a
//! while are dropped (least recently used beyond [`MAX_MIRRORS`]).

use std::collections::HashMap;

use strata_engine::kv_cache::{KvRows, LayerKv};

use crate::buffer::{Buffer, Location};
use crate::error::VkError;
use crate::recorder::Recorder;
use crate::transfer;

/// Most layer mirrors kept (sessions × attention layers).
pub const MAX_MIRRORS: usize = 1024;

/// Positions a mirror grows by.
const GROW: usize = 256;

/// One layer's keys and values on the device, `[capacity][row]` f32 each.
pub struct Mirror {
    pub k: Buffer,
    pub v: Buffer,
    capacity: usize,
    /// Positions `0..valid` equal the host's.
    pub valid: usize,
    last_use: u64,
}

/// Every mirror of the backend.
#[derive(Default)]
pub struct Mirrors {
    by_id: HashMap<u64, Mirror>,
    tick: u64,
}

impl Mirrors {
    /// The mirror of `host`, able to hold `end` positions and holding the host's positions
    /// `0..pos0` once `rec` has run (the copies that grow it or fill it from the host where
    /// it is behind are recorded into `rec`, after what `rec` holds already).
    ///
    /// Errors: allocation and transfer errors.
    pub fn prepare(
        &mut self,
        rec: &mut Recorder<'_>,
        host: &LayerKv,
        pos0: usize,
        end: usize,
    ) -> Result<&mut Mirror, VkError> {
        let dev = &rec.device().clone();
        self.tick += 1;
        let id = host.id();
        if !self.by_id.contains_key(&id) {
            self.evict();
        }
        let row = host.row_len();
        let need = end.div_ceil(GROW).max(1) * GROW;
        let m = match self.by_id.remove(&id) {
            Some(m) if m.capacity >= need => m,
            Some(old) => grow(rec, old, need, row)?,
            None => Mirror {
                k: Buffer::new(dev, (need * row * 4) as u64, Location::Device)?,
                v: Buffer::new(dev, (need * row * 4) as u64, Location::Device)?,
                capacity: need,
                valid: 0,
                last_use: 0,
            },
        };
        let m = self.by_id.entry(id).or_insert(m);
        m.last_use = self.tick;
        if m.valid > pos0 {
            m.valid = pos0;
        }
        if m.valid < pos0 {
            let (k, v) = host_rows(host, m.valid, pos0);
            write_at(rec.scoped(), &m.k, m.valid * row, &k)?;
            write_at(rec.scoped(), &m.v, m.valid * row, &v)?;
            m.valid = pos0;
        }
        Ok(m)
    }

    /// Forgets every mirror (a batch that wrote them failed): they are filled from the host
    /// at their next use.
    pub fn clear(&mut self) {
        self.by_id.clear();
    }

    /// Bytes of device memory the mirrors hold.
    pub fn bytes(&self) -> u64 {
        self.by_id.values().map(|m| m.k.size() + m.v.size()).sum()
    }

    fn evict(&mut self) {
        while self.by_id.len() >= MAX_MIRRORS {
            let Some(oldest) = self
                .by_id
                .iter()
                .min_by_key(|(_, m)| m.last_use)
                .map(|(id, _)| *id)
            else {
                return;
            };
            self.by_id.remove(&oldest);
        }
    }
}

/// `old` moved into buffers of `need` positions (its valid rows copied by `rec`; the old
/// buffers are retired by the device until `rec` has run).
fn grow(rec: &mut Recorder<'_>, old: Mirror, need: usize, row: usize) -> Result<Mirror, VkError> {
    let dev = &rec.device().clone();
    let bytes = (need * row * 4) as u64;
    let m = Mirror {
        k: Buffer::new(dev, bytes, Location::Device)?,
        v: Buffer::new(dev, bytes, Location::Device)?,
        capacity: need,
        valid: old.valid,
        last_use: old.last_use,
    };
    let used = (old.valid * row * 4) as u64;
    rec.record_copy(&old.k, &m.k, used)?;
    rec.record_copy(&old.v, &m.v, used)?;
    Ok(m)
}

/// Host rows `from..to` of keys and values as f32 (`[to − from][row]` each).
fn host_rows(host: &LayerKv, from: usize, to: usize) -> (Vec<f32>, Vec<f32>) {
    let read = |rows: KvRows<'_>| -> Vec<f32> {
        let mut out = Vec::with_capacity((to - from) * host.row_len());
        for pos in from..to {
            match rows {
                KvRows::F32(p) => out.extend_from_slice(p.row(pos)),
                KvRows::F16(p) => out.extend(p.row(pos).iter().map(|h| h.to_f32())),
            }
        }
        out
    };
    (read(host.k_rows()), read(host.v_rows()))
}

/// Records a write of `data` at element `at` of `dst`.
fn write_at<'a>(
    rec: &mut Recorder<'a>,
    dst: &'a Buffer,
    at: usize,
    data: &[f32],
) -> Result<(), VkError> {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    transfer::write_at(rec, dst, (at * 4) as u64, &bytes)
}
