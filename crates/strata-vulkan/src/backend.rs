//! [`Vulkan`]: the engine's [`Backend`] on one Vulkan device — the ops of dense models
//! (llama, qwen2, qwen3, gemma3) on device buffers, weights uploaded once and found again by
//! their address, KV caches mirrored on the device ([`crate::kv_mirror`]).
//!
//! Each op records its kernels and waits for them (one submission per op): correctness first;
//! batching a whole forward into few submissions is the next step for speed. Ops the dense
//! graph does not use (recurrent layers, MoE, hyper-connections, QSA, PLE) are reported as
//! [`EngineError::Unsupported`]: those that return nothing record the error, which
//! [`Backend::finish`] returns at the end of the run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use strata_engine::backend::{Backend, DeltaBufs, Glu, Memory, QsaBufs, RowBuf};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::delta_net::DeltaShape;
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::MoeWeights;
use strata_engine::ops::qsa::{BlockKeyWeights, QsaShape};
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::session::SeqRun;
use strata_engine::EngineError;

use crate::attention::AttnDims;
use crate::buffer::{Buffer, Location};
use crate::device::Device;
use crate::elementwise::{GluAct, RopePairs};
use crate::error::VkError;
use crate::kernels::Kernels;
use crate::kv_mirror::Mirrors;
use crate::matmul::QMatrix;
use crate::recorder::Recorder;
use crate::transfer;

/// Device memory: activations in [`VkBuf`]; no MoE scratch (MoE is not supported yet).
#[derive(Default)]
pub struct VkMem;

impl Memory for VkMem {
    type Buf = VkBuf;
    type MoeScratch = ();
}

/// A `[rows][cols]` f32 activation buffer in device memory, allocated by the first op that
/// writes it (and grown by later ones), with a host mirror filled by [`Backend::host`].
#[derive(Default)]
pub struct VkBuf {
    rows: usize,
    cols: usize,
    buf: Option<Buffer>,
    host: Vec<f32>,
}

impl RowBuf for VkBuf {
    fn resize(&mut self, rows: usize, cols: usize) {
        self.rows = rows;
        self.cols = cols;
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }
}

impl VkBuf {
    fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// The device buffer of an input.
    fn input(&self, op: &'static str) -> Result<&Buffer, VkError> {
        self.buf.as_ref().ok_or_else(|| VkError::Shape {
            op,
            what: "an input buffer was never written".into(),
        })
    }
}

/// A weight matrix on the device: one [`QMatrix`] per row range, each within the device's
/// storage-buffer limit (one range for all but the largest matrices: a big vocabulary's
/// embedding or LM head).
struct Weight {
    /// (first row, the range's rows).
    parts: Vec<(usize, QMatrix)>,
    rows: usize,
}

impl Weight {
    fn upload(dev: &Device, w: &Matrix<'_>, limit: u64) -> Result<Weight, VkError> {
        let row_bytes = w.data.len().checked_div(w.rows).unwrap_or(0);
        let limit = limit.min(dev.info().max_storage_buffer_range) as usize;
        let per = (limit / row_bytes.max(1)).clamp(1, w.rows.max(1));
        let mut parts = Vec::new();
        let mut r0 = 0;
        while r0 < w.rows {
            let n = per.min(w.rows - r0);
            let bytes = &w.data[r0 * row_bytes..(r0 + n) * row_bytes];
            parts.push((r0, QMatrix::upload(dev, w.ty, n, w.cols, bytes)?));
            r0 += n;
        }
        Ok(Weight {
            parts,
            rows: w.rows,
        })
    }

    fn bytes(&self) -> u64 {
        self.parts.iter().map(|(_, m)| m.buf.size()).sum()
    }
}

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
    /// The first error of an op that returns none, reported by [`Backend::finish`].
    error: Mutex<Option<EngineError>>,
    weight_bytes: AtomicU64,
    /// Most bytes of one weight buffer (below the device's binding limit: tests).
    part_limit: u64,
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
            error: Mutex::new(None),
            weight_bytes: AtomicU64::new(0),
            part_limit: u64::MAX,
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

    fn unsupported(&self, op: &'static str) -> EngineError {
        EngineError::Unsupported {
            backend: "vulkan".into(),
            op,
        }
    }

    fn device_err(&self, e: VkError) -> EngineError {
        EngineError::Device {
            backend: self.name(),
            message: e.to_string(),
        }
    }

    /// Runs `f`'s recording and waits for it.
    fn submit<'a>(
        &self,
        f: impl FnOnce(&mut Recorder<'a>) -> Result<(), VkError>,
    ) -> Result<(), VkError> {
        let mut rec = Recorder::new(&self.dev)?;
        f(&mut rec)?;
        rec.submit()
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
                self.submit(|r| {
                    self.k
                        .rms_norm(r, xb, &wb, w.len(), ob, n / group, group, eps)
                })
            }
            None => {
                let xb = x.input("rms_norm")?;
                self.submit(|r| {
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
        out: &Buffer,
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
        let mut mirrors = lock(&self.kv);
        let m = mirrors.prepare(&self.dev, host, s.pos0, s.pos0 + n_t)?;
        let (kb, vb, qb) = (
            k.input("attention")?,
            v.input("attention")?,
            q.input("attention")?,
        );
        let dims = AttnDims {
            n_t,
            row0: s.rows.start,
            pos0: s.pos0,
            n_head: shape.n_head,
            n_kv_head: shape.n_kv_head,
            head_dim: shape.head_dim,
            scale: shape.scale,
            window: shape.window.unwrap_or(0),
            round_q_f16: host.is_f16(),
        };
        let round = host.is_f16();
        let (kc, vc) = (&m.k, &m.v);
        self.submit(|r| {
            self.k.kv_store(
                r,
                (kb, vb),
                (kc, vc),
                row,
                (s.rows.start, s.pos0, n_t),
                round,
            )?;
            self.k.attention(r, &dims, qb, kc, vc, out)
        })?;
        m.valid = s.pos0 + n_t;
        Ok(())
    }

    fn read(&self, b: &VkBuf) -> Result<Vec<f32>, VkError> {
        if b.len() == 0 {
            return Ok(Vec::new());
        }
        transfer::read_f32(&self.dev, b.input("read")?, b.len())
    }
}

impl Backend for Vulkan {
    type Mem = VkMem;

    fn name(&self) -> String {
        format!("vulkan ({})", self.dev.info().name)
    }

    fn finish(&self) -> Result<(), EngineError> {
        match lock(&self.error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn embed(
        &self,
        table: &Matrix<'_>,
        scale: f32,
        tokens: &[u32],
        x: &mut VkBuf,
    ) -> Result<(), EngineError> {
        if let Some(bad) = tokens.iter().find(|t| **t as usize >= table.rows) {
            return Err(EngineError::InvalidToken {
                id: *bad,
                n_vocab: table.rows,
            });
        }
        let t = self.matrix(table).map_err(|e| self.device_err(e))?;
        if let [(_, part)] = &t.parts[..] {
            let mut run = || -> Result<(), VkError> {
                self.output(x, tokens.len(), table.cols)?;
                let xb = x.input("embed")?;
                self.submit(|r| self.k.get_rows(r, part, tokens, scale, xb))
            };
            return run().map_err(|e| self.device_err(e));
        }
        // A table split into row ranges: the run's rows are dequantized on the host.
        let mut rows = vec![0.0f32; tokens.len() * table.cols];
        for (id, row) in tokens.iter().zip(rows.chunks_exact_mut(table.cols)) {
            table.dequantize_row(*id as usize, row)?;
            row.iter_mut().for_each(|v| *v *= scale);
        }
        self.write(&rows, tokens.len(), table.cols, x)
            .map_err(|e| self.device_err(e))
    }

    fn embed_rows(
        &self,
        _: &Matrix<'_>,
        _: &[u32],
        _: usize,
        _: &mut VkBuf,
    ) -> Result<(), EngineError> {
        Err(self.unsupported("embed_rows"))
    }

    fn rope_angles(&self, rope: &Rope, pos: &[usize], cs: &mut VkBuf) {
        let n_rot = rope.n_rot;
        let mut host = vec![0.0f32; pos.len() * n_rot];
        for (p, c) in pos.iter().zip(host.chunks_exact_mut(n_rot.max(1))) {
            rope.angles(*p, c);
        }
        self.upload(&host, n_rot, cs);
        cs.resize(pos.len(), n_rot);
    }

    fn matmul(
        &self,
        w: &Matrix<'_>,
        bias: Option<&[f32]>,
        x: &mut VkBuf,
        y: &mut VkBuf,
    ) -> Result<(), EngineError> {
        let mut run = || -> Result<(), VkError> {
            let m = self.matrix(w)?;
            let b = bias.map(|b| self.vector(b)).transpose()?;
            self.output(y, x.rows, w.rows)?;
            let (xb, yb) = (x.input("matmul")?, y.input("matmul")?);
            let n_t = x.rows;
            self.submit(|r| {
                for (r0, part) in &m.parts {
                    self.k.matmul_into(r, part, xb, n_t, yb, (m.rows, *r0))?;
                }
                match b.as_deref() {
                    Some(b) => self.k.add_row(r, yb, b, m.rows, n_t * m.rows),
                    None => Ok(()),
                }
            })
        };
        run().map_err(|e| self.device_err(e))
    }

    fn rms_norm(&self, x: &VkBuf, w: &[f32], eps: f32, out: &mut VkBuf) {
        self.check(self.rms(x, w, w.len(), eps, Some(out)));
    }

    fn rms_norm_grouped(&self, x: &VkBuf, w: &[f32], group: usize, eps: f32, out: &mut VkBuf) {
        self.check(self.rms(x, w, group, eps, Some(out)));
    }

    fn rms_norm_in_place(&self, x: &mut VkBuf, w: &[f32], eps: f32) {
        self.check(self.rms(x, w, w.len(), eps, None));
    }

    fn l2_norm_heads(&self, _: &mut VkBuf, _: usize, _: f32) {
        self.fail(self.unsupported("l2_norm_heads"));
    }

    fn rope(&self, rope: &Rope, x: &mut VkBuf, head_dim: usize, cs: &VkBuf) {
        let pairs = match rope.style {
            RopeStyle::Normal => RopePairs::Normal,
            RopeStyle::Neox => RopePairs::Neox,
        };
        let run = || -> Result<(), VkError> {
            let (xb, cb) = (x.input("rope")?, cs.input("rope")?);
            self.submit(|r| {
                self.k
                    .rope(r, pairs, xb, cb, x.rows, x.cols, head_dim, rope.n_rot)
            })
        };
        self.check(run());
    }

    fn attend(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        q: &VkBuf,
        k: &VkBuf,
        v: &VkBuf,
        shape: &AttnShape,
        out: &mut VkBuf,
    ) {
        let mut run = || -> Result<(), VkError> {
            // The host cache stays the source of truth (snapshots, restores): the keys and
            // values go there too.
            let (kh, vh) = (self.read(k)?, self.read(v)?);
            self.output(out, q.rows, shape.n_head * shape.head_dim)?;
            let ob = out.input("attention")?;
            for s in seqs.iter_mut() {
                self.attend_seq(s, layer, (q, k, v), (&kh, &vh), shape, ob)?;
            }
            Ok(())
        };
        self.check(run());
    }

    fn attend_qsa(
        &self,
        _: &mut [SeqRun<'_>],
        _: usize,
        _: QsaBufs<'_, Self>,
        _: &AttnShape,
        _: &QsaShape,
        _: BlockKeyWeights<'_>,
        _: &mut VkBuf,
    ) {
        self.fail(self.unsupported("attend_qsa"));
    }

    fn conv1d(&self, _: &mut [SeqRun<'_>], _: usize, _: &VkBuf, _: &[f32], _: &mut VkBuf) {
        self.fail(self.unsupported("conv1d"));
    }

    fn ple_conv(&self, _: &mut [SeqRun<'_>], _: &VkBuf, _: &[f32], _: usize, _: &mut VkBuf) {
        self.fail(self.unsupported("ple_conv"));
    }

    fn delta_rule(
        &self,
        _: &mut [SeqRun<'_>],
        _: usize,
        _: &DeltaShape,
        _: DeltaBufs<'_, Self>,
        _: &mut VkBuf,
    ) {
        self.fail(self.unsupported("delta_rule"));
    }

    fn delta_gates(&self, _: &VkBuf, _: &[f32], _: &[f32], _: usize, _: &mut VkBuf, _: &mut VkBuf) {
        self.fail(self.unsupported("delta_gates"));
    }

    fn add(&self, a: &mut VkBuf, b: &VkBuf) {
        let run = || -> Result<(), VkError> {
            let (ab, bb) = (a.input("add")?, b.input("add")?);
            self.submit(|r| self.k.add(r, ab, bb, a.len()))
        };
        self.check(run());
    }

    fn scale(&self, x: &mut VkBuf, s: f32) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("scale")?;
            self.submit(|r| self.k.scale(r, xb, x.len(), s))
        };
        self.check(run());
    }

    fn hc_collapse(&self, _: &VkBuf, _: &VkBuf, _: usize, _: &mut VkBuf) {
        self.fail(self.unsupported("hc_collapse"));
    }

    fn hc_expand_add(&self, _: &mut VkBuf, _: &VkBuf, _: &VkBuf) {
        self.fail(self.unsupported("hc_expand_add"));
    }

    fn ple_gate(&self, _: &VkBuf, _: &VkBuf, _: &VkBuf, _: &mut VkBuf) {
        self.fail(self.unsupported("ple_gate"));
    }

    fn glu(&self, act: Glu, gate: &mut VkBuf, up: &VkBuf) {
        let act = match act {
            Glu::SwiGlu => GluAct::SwiGlu,
            Glu::GegluTanh => GluAct::GegluTanh,
        };
        let run = || -> Result<(), VkError> {
            let (gb, ub) = (gate.input("glu")?, up.input("glu")?);
            self.submit(|r| self.k.glu(r, act, gb, ub, gate.len()))
        };
        self.check(run());
    }

    fn silu(&self, x: &mut VkBuf) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("silu")?;
            self.submit(|r| self.k.silu(r, xb, x.len()))
        };
        self.check(run());
    }

    fn mul_silu(&self, _: &mut VkBuf, _: &VkBuf) {
        self.fail(self.unsupported("mul_silu"));
    }

    fn mul_sigmoid(&self, _: &mut VkBuf, _: &VkBuf) {
        self.fail(self.unsupported("mul_sigmoid"));
    }

    fn add_gated(&self, _: &mut VkBuf, _: &VkBuf, _: &VkBuf) {
        self.fail(self.unsupported("add_gated"));
    }

    fn softcap(&self, x: &mut VkBuf, cap: f32) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("softcap")?;
            self.submit(|r| self.k.softcap(r, xb, x.len(), cap))
        };
        self.check(run());
    }

    fn split(&self, _: &VkBuf, _: &[usize], _: &mut [&mut VkBuf]) {
        self.fail(self.unsupported("split"));
    }

    fn concat(&self, _: &[&VkBuf], _: &mut VkBuf) {
        self.fail(self.unsupported("concat"));
    }

    fn gather_rows(&self, x: &VkBuf, rows: &[usize], out: &mut VkBuf) {
        // The output rows of a run (a few): through the host.
        let mut run = || -> Result<(), VkError> {
            let cols = x.cols;
            let all = self.read(x)?;
            let mut picked = Vec::with_capacity(rows.len() * cols);
            for &r in rows {
                let src = all
                    .get(r * cols..(r + 1) * cols)
                    .ok_or_else(|| VkError::Shape {
                        op: "gather_rows",
                        what: format!("row {r} of {}", x.rows),
                    })?;
                picked.extend_from_slice(src);
            }
            self.write(&picked, rows.len(), cols, out)
        };
        self.check(run());
    }

    fn moe(
        &self,
        _: &MoeWeights,
        _: &mut VkBuf,
        _: &mut VkBuf,
        _: &mut (),
    ) -> Result<(), EngineError> {
        Err(self.unsupported("moe (routed experts)"))
    }

    fn upload(&self, src: &[f32], cols: usize, b: &mut VkBuf) {
        let rows = src.len().checked_div(cols).unwrap_or(0);
        self.check(self.write(src, rows, cols, b));
    }

    fn host<'a>(&self, b: &'a mut VkBuf) -> &'a mut Vec<f32> {
        match self.read(b) {
            Ok(v) => b.host = v,
            Err(e) => {
                self.check(Err(e));
                b.host.clear();
            }
        }
        &mut b.host
    }
}

impl Vulkan {
    fn write(&self, src: &[f32], rows: usize, cols: usize, b: &mut VkBuf) -> Result<(), VkError> {
        self.output(b, rows, cols)?;
        if src.is_empty() {
            return Ok(());
        }
        let bb = b.input("upload")?;
        let bytes: Vec<u8> = src.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.submit(|r| transfer::write(r, bb, &bytes))
    }
}
