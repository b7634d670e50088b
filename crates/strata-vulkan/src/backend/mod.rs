//! [`Vulkan`]: the engine's [`Backend`] on one Vulkan device — the ops of dense models
//! (llama, qwen2, qwen3, gemma3), qwen3moe's routed experts, qwen3next's Gated DeltaNet
//! layers, gated attention and shared experts, and qwen4exp's hyper-connections, PLE and QSA
//! sparse attention on device buffers, weights uploaded once and found again by their
//! address, KV caches mirrored on the device ([`crate::kv_mirror`]), recurrent state kept on
//! the device during a forward and written back at its end ([`crate::state_mirror`],
//! `hybrid.rs`).
//!
//! **One open batch.** Ops append their dispatches and copies to one [`Recorder`] that stays
//! open across ops; it is submitted and waited on only where the host must see device data
//! (`host`, and the read-backs of `attend`, `attend_qsa`, `moe`, `gather_rows`:
//! [`Vulkan::read_all`]; the recurrent state at `sync_state`) and at [`Backend::finish`].
//! Every command is followed by a full barrier, so each sees the results of the ones before
//! it, across ops.
//! A buffer an op replaces or drops while the batch is open is retired by the device until
//! the batch has run (`crate::retired`). Ops that return nothing record their first error,
//! and an error of a submission without an op to return it (the one in `finish`) is
//! returned by [`Backend::finish`] at the end of the run.
//!
//! `memory.rs`: the buffers (`VkBuf`) and device weights; `ops.rs`: the ops; `moe.rs`: the
//! routed experts; `hybrid.rs`: the recurrent ops' per-sequence state, split and concat;
//! `qsa.rs`: QSA's kept positions chosen on the host, then the sparse attention pass.

mod hybrid;
mod memory;
mod moe;
mod ops;
mod qsa;

pub use memory::{VkBuf, VkMem};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use strata_engine::backend::{Backend, RowBuf};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::linear::Matrix;
use strata_engine::session::SeqRun;
use strata_engine::EngineError;

use crate::attention::{AttnDims, KvFormat};
use crate::buffer::{Buffer, Location};
use crate::device::Device;
use crate::error::VkError;
use crate::kernels::Kernels;
use crate::kv_mirror::Mirrors;
use crate::recorder::Recorder;
use crate::sparse_attention::SparseDims;
use crate::state_mirror::StateMirrors;
use crate::transfer;
use memory::Weight;

/// The engine's backend on one Vulkan device (see the module docs).
pub struct Vulkan {
    dev: Device,
    k: Kernels,
    /// Weight matrices by the address and length of their bytes (a model's weights live in
    /// its mapping as long as the model: the address identifies them).
    weights: Mutex<HashMap<(usize, usize), Arc<Weight>>>,
    /// Norm weights and biases by (address, length).
    vectors: Mutex<HashMap<(usize, usize), Arc<Buffer>>>,
    kv: Mutex<Mirrors>,
    /// Sequences' recurrent state on the device.
    states: Mutex<StateMirrors>,
    /// The first error of an op that returns none, reported by [`Backend::finish`].
    error: Mutex<Option<EngineError>>,
    weight_bytes: AtomicU64,
    /// Most bytes of one weight buffer (below the device's binding limit: tests).
    part_limit: u64,
    /// The open batch of the ops recorded since the last read-back or `finish`.
    batch: Mutex<Option<Recorder<'static>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Vulkan {
    /// The backend on adapter `index` (an index of [`crate::adapters`]).
    ///
    /// Errors: [`VkError::NoLoader`], [`VkError::NoDevice`], device creation errors.
    pub fn new(index: usize) -> Result<Self, VkError> {
        let dev = Device::new(index)?;
        Ok(Self::on(&dev))
    }

    /// The backend on an opened device.
    pub fn on(dev: &Device) -> Self {
        Vulkan {
            dev: dev.clone(),
            k: Kernels::new(dev),
            weights: Mutex::new(HashMap::new()),
            vectors: Mutex::new(HashMap::new()),
            kv: Mutex::new(Mirrors::default()),
            states: Mutex::new(StateMirrors::default()),
            error: Mutex::new(None),
            weight_bytes: AtomicU64::new(0),
            part_limit: u64::MAX,
            batch: Mutex::new(None),
        }
    }

    /// Splits weights into row ranges of at most `bytes` (they are split at the device's
    /// storage-buffer limit anyway): the tests use it to run the split path on small
    /// matrices. Takes effect for weights not uploaded yet.
    pub fn with_weight_part_limit(mut self, bytes: u64) -> Self {
        self.part_limit = bytes.max(1);
        self
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Uploads `mats` now (a model's weights at load) rather than at their first use.
    ///
    /// Errors: an unsupported type, a matrix over the device's buffer limit, out of memory.
    pub fn preload(&self, mats: &[&Matrix<'_>]) -> Result<(), VkError> {
        for m in mats {
            self.matrix(m)?;
        }
        Ok(())
    }

    /// Bytes of weights uploaded so far.
    pub fn weight_bytes(&self) -> u64 {
        self.weight_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of the sessions' KV mirrors.
    pub fn kv_bytes(&self) -> u64 {
        lock(&self.kv).bytes()
    }

    /// Bytes of the sequences' recurrent state kept on the device.
    pub fn state_bytes(&self) -> u64 {
        lock(&self.states).bytes()
    }

    fn matrix(&self, w: &Matrix<'_>) -> Result<Arc<Weight>, VkError> {
        let key = (w.data.as_ptr() as usize, w.data.len());
        let mut map = lock(&self.weights);
        if let Some(m) = map.get(&key) {
            return Ok(m.clone());
        }
        let m = Arc::new(Weight::upload(&self.dev, w, self.part_limit)?);
        self.weight_bytes.fetch_add(m.bytes(), Ordering::Relaxed);
        map.insert(key, m.clone());
        Ok(m)
    }

    /// A model's small host vector (a norm weight, a bias) on the device. They live as long
    /// as the model, so their address identifies them.
    fn vector(&self, v: &[f32]) -> Result<Arc<Buffer>, VkError> {
        let key = (v.as_ptr() as usize, v.len());
        let mut map = lock(&self.vectors);
        if let Some(b) = map.get(&key) {
            return Ok(b.clone());
        }
        let b = Arc::new(transfer::upload_f32(&self.dev, v)?);
        map.insert(key, b.clone());
        Ok(b)
    }

    /// Sizes `b` to `[rows][cols]` and makes sure its device buffer holds that many.
    fn output(&self, b: &mut VkBuf, rows: usize, cols: usize) -> Result<(), VkError> {
        b.resize(rows, cols);
        let need = (rows * cols).max(1) as u64 * 4;
        if b.buf.as_ref().is_none_or(|x| x.size() < need) {
            b.buf = None;
            b.buf = Some(Buffer::new(&self.dev, need, Location::Device)?);
        }
        Ok(())
    }

    /// Records the first error of an op that returns none.
    fn check(&self, r: Result<(), VkError>) {
        if let Err(e) = r {
            self.fail(EngineError::Device {
                backend: self.name(),
                message: e.to_string(),
            });
        }
    }

    fn fail(&self, e: EngineError) {
        let mut err = lock(&self.error);
        if err.is_none() {
            *err = Some(e);
        }
    }

    fn device_err(&self, e: VkError) -> EngineError {
        EngineError::Device {
            backend: self.name(),
            message: e.to_string(),
        }
    }

    /// Appends `f`'s commands to the open batch (opening one if none is); they run at the
    /// next [`Vulkan::flush`]. Buffers `f` records may be dropped before then (the device
    /// retires them until the batch has run).
    fn record<'a>(
        &self,
        f: impl FnOnce(&mut Recorder<'a>) -> Result<(), VkError>,
    ) -> Result<(), VkError> {
        let mut batch = lock(&self.batch);
        if batch.is_none() {
            *batch = Some(Recorder::new(&self.dev)?);
        }
        match batch.as_mut() {
            Some(rec) => f(rec.scoped()),
            None => Ok(()),
        }
    }

    /// Submits the open batch and waits for it (nothing when none is open).
    ///
    /// Errors: the submission's ([`VkError::Call`]: device lost, out of memory). The KV and
    /// recurrent-state mirrors are then forgotten (the batch that wrote them may not have
    /// run): the next run fills them from the host again.
    pub(super) fn flush(&self) -> Result<(), VkError> {
        let done = match lock(&self.batch).as_mut() {
            Some(rec) => rec.submit(),
            None => Ok(()),
        };
        if done.is_err() {
            lock(&self.kv).clear();
            lock(&self.states).clear();
        }
        done
    }

    /// The contents of `bufs` on the host (`[rows·cols]` f32 each), copied into staging
    /// buffers by the open batch, which is then submitted: one wait for all of them.
    ///
    /// Errors: allocation and submission errors.
    pub(super) fn read_all(&self, bufs: &[&VkBuf]) -> Result<Vec<Vec<f32>>, VkError> {
        let mut staging = Vec::with_capacity(bufs.len());
        for b in bufs {
            staging.push(match b.len() {
                0 => None,
                n => Some(Buffer::new(&self.dev, 4 * n as u64, Location::Host)?),
            });
        }
        self.record(|r| {
            for (b, st) in bufs.iter().zip(&staging) {
                if let Some(st) = st {
                    r.copy(b.input("read")?, st, 4 * b.len() as u64)?;
                }
            }
            Ok(())
        })?;
        self.flush()?;
        Ok(bufs
            .iter()
            .zip(&staging)
            .map(|(b, st)| st.as_ref().map_or_else(Vec::new, |st| f32s(st, b.len())))
            .collect())
    }

    fn rms(
        &self,
        x: &VkBuf,
        w: &[f32],
        group: usize,
        eps: f32,
        out: Option<&mut VkBuf>,
    ) -> Result<(), VkError> {
        let wb = self.vector(w)?;
        let n = x.len();
        if group == 0 || !n.is_multiple_of(group) {
            return Err(VkError::Shape {
                op: "rms_norm",
                what: format!("{n} elements are not whole pieces of {group}"),
            });
        }
        match out {
            Some(out) => {
                self.output(out, x.rows, x.cols)?;
                let (xb, ob) = (x.input("rms_norm")?, out.input("rms_norm")?);
                self.record(|r| {
                    self.k
                        .rms_norm(r, xb, &wb, w.len(), ob, n / group, group, eps)
                })
            }
            None => {
                let xb = x.input("rms_norm")?;
                self.record(|r| {
                    self.k
                        .rms_norm(r, xb, &wb, w.len(), xb, n / group, group, eps)
                })
            }
        }
    }

    fn attend_seq(
        &self,
        s: &mut SeqRun<'_>,
        layer: usize,
        (q, k, v): (&VkBuf, &VkBuf, &VkBuf),
        (kh, vh): (&[f32], &[f32]),
        shape: &AttnShape,
        (out, sparse): (&Buffer, Option<&Buffer>),
    ) -> Result<(), VkError> {
        let n_t = s.rows.len();
        let row = shape.n_kv_head * shape.head_dim;
        let host = s.kv.get_mut(layer).ok_or_else(|| VkError::Shape {
            op: "attention",
            what: format!("the session has no KV layer {layer}"),
        })?;
        for t in 0..n_t {
            let r = (s.rows.start + t) * row;
            host.write(s.pos0 + t, &kh[r..r + row], &vh[r..r + row]);
        }
        // The mirror's format (`Mirrors::prepare` picks the same one).
        let format = KvFormat::of(host.is_f16(), row);
        let dims = AttnDims {
            n_t,
            row0: s.rows.start,
            pos0: s.pos0,
            n_head: shape.n_head,
            n_kv_head: shape.n_kv_head,
            head_dim: shape.head_dim,
            scale: shape.scale,
            window: shape.window.unwrap_or(0),
            kv: format,
        };
        let (kb, vb, qb) = (
            k.input("attention")?,
            v.input("attention")?,
            q.input("attention")?,
        );
        let mut mirrors = lock(&self.kv);
        self.record(|r| {
            let m = mirrors.prepare(r, host, s.pos0, s.pos0 + n_t)?;
            let (kc, vc) = (&m.k, &m.v);
            self.k.kv_store(
                r.scoped(),
                (kb, vb),
                (kc, vc),
                row,
                (s.rows.start, s.pos0, n_t),
                format,
            )?;
            self.k.attention(r.scoped(), &dims, qb, kc, vc, out)?;
            if let Some(idx) = sparse {
                // QSA's sparse queries over their kept positions (`qsa.rs`).
                let sd = SparseDims {
                    n_t,
                    row0: s.rows.start,
                    n_head: shape.n_head,
                    n_kv_head: shape.n_kv_head,
                    head_dim: shape.head_dim,
                    scale: shape.scale,
                    n_pos: s.pos0 + n_t,
                    kv: format,
                };
                self.k
                    .attention_sparse(r.scoped(), &sd, qb, (kc, vc), idx, out)?;
            }
            // Valid once the batch has run (a failed submission forgets the mirrors).
            m.valid = s.pos0 + n_t;
            Ok(())
        })
    }

    fn read(&self, b: &VkBuf) -> Result<Vec<f32>, VkError> {
        Ok(self.read_all(&[b])?.pop().unwrap_or_default())
    }
}

/// The first `n` f32 of a staging buffer that a finished batch filled.
fn f32s(st: &Buffer, n: usize) -> Vec<f32> {
    st.mapped()
        .and_then(|m| m.get(..4 * n))
        .map(|m| {
            m.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
        .unwrap_or_default()
}

impl Vulkan {
    fn write(&self, src: &[f32], rows: usize, cols: usize, b: &mut VkBuf) -> Result<(), VkError> {
        self.output(b, rows, cols)?;
        if src.is_empty() {
            return Ok(());
        }
        let bb = b.input("upload")?;
        let bytes = transfer::f32_bytes(src);
        self.record(|r| transfer::write(r, bb, &bytes))
    }
}
