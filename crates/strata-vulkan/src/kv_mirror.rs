//! Device copies of sessions' KV caches.
//!
//! The host cache ([`LayerKv`]) stays the source of truth: the backend writes every key and
//! value row to it as well, so snapshots, restores and truncation work as on the CPU. The
//! device keeps one mirror per host layer, keyed by the layer's [`LayerKv::id`] (renewed by
//! every restore or copy), valid for the positions it wrote under that id. A mirror that is
//! behind (a restored or new session continuing at a later position) is filled from the host
//! first (the copies recorded into the backend's open batch); a truncated session simply
//! overwrites its positions again. Mirrors not used for a while are dropped (least recently
//! used beyond [`MAX_MIRRORS`]). A mirror of an f16 host cache holds f16 values (half the
//! memory of f32: [`KvFormat::of`]).

use std::collections::HashMap;

use strata_engine::kv_cache::{KvRows, LayerKv};

use crate::attention::KvFormat;
use crate::buffer::{Buffer, Location};
use crate::error::VkError;
use crate::recorder::Recorder;
use crate::transfer;

/// Most layer mirrors kept (sessions × attention layers).
pub const MAX_MIRRORS: usize = 1024;

/// Positions a mirror grows by.
const GROW: usize = 256;

/// One layer's keys and values on the device, `[capacity][row]` each, in format `format`.
pub struct Mirror {
    pub k: Buffer,
    pub v: Buffer,
    pub format: KvFormat,
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
        let format = KvFormat::of(host.is_f16(), row);
        let bytes = |positions: usize| (positions * row * format.elem_bytes()) as u64;
        let need = end.div_ceil(GROW).max(1) * GROW;
        let m = match self.by_id.remove(&id) {
            Some(m) if m.capacity >= need => m,
            Some(old) => {
                let used = bytes(old.valid);
                grow(rec, old, need, bytes(need), used)?
            }
            None => Mirror {
                k: Buffer::new(dev, bytes(need), Location::Device)?,
                v: Buffer::new(dev, bytes(need), Location::Device)?,
                format,
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
            let (k, v) = host_rows(host, m.valid, pos0, format);
            let at = bytes(m.valid);
            transfer::write_at(rec.scoped(), &m.k, at, &k)?;
            transfer::write_at(rec.scoped(), &m.v, at, &v)?;
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

/// `old` moved into buffers of `need` positions (`bytes` each; its valid rows, `used` bytes,
/// copied by `rec`; the old buffers are retired by the device until `rec` has run).
fn grow(
    rec: &mut Recorder<'_>,
    old: Mirror,
    need: usize,
    bytes: u64,
    used: u64,
) -> Result<Mirror, VkError> {
    let dev = &rec.device().clone();
    let m = Mirror {
        k: Buffer::new(dev, bytes, Location::Device)?,
        v: Buffer::new(dev, bytes, Location::Device)?,
        format: old.format,
        capacity: need,
        valid: old.valid,
        last_use: old.last_use,
    };
    rec.record_copy(&old.k, &m.k, used)?;
    rec.record_copy(&old.v, &m.v, used)?;
    Ok(m)
}

/// Host rows `from..to` of keys and values as the bytes of a mirror in `format`
/// (`[to − from][row]` elements each, little-endian): an f16 host cache's values as they are
/// for [`KvFormat::F16`], else as f32.
fn host_rows(host: &LayerKv, from: usize, to: usize, format: KvFormat) -> (Vec<u8>, Vec<u8>) {
    let read = |rows: KvRows<'_>| -> Vec<u8> {
        let mut out = Vec::with_capacity((to - from) * host.row_len() * format.elem_bytes());
        for pos in from..to {
            match (rows, format) {
                (KvRows::F32(p), _) => out.extend(p.row(pos).iter().flat_map(|x| x.to_le_bytes())),
                (KvRows::F16(p), KvFormat::F16) => {
                    out.extend(p.row(pos).iter().flat_map(|h| h.to_bits().to_le_bytes()))
                }
                (KvRows::F16(p), _) => {
                    out.extend(p.row(pos).iter().flat_map(|h| h.to_f32().to_le_bytes()))
                }
            }
        }
        out
    };
    (read(host.k_rows()), read(host.v_rows()))
}
