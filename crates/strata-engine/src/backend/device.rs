//! Running whole forwards on a backend other than the CPU.
//!
//! The model's runner ([`crate::model::Model`]) holds host activations; a device backend
//! brings its own workspace. With partial offload the CPU runs the first layers and the
//! device the rest, from the residual rows the CPU hands over. [`OnDevice`] pairs a backend
//! with one and runs the model's [`Graph`] on it; the runner reaches it through the object-safe [`DeviceRun`], so the
//! engine never names a device type (`strata-vulkan` depends on the engine, not the reverse).

use std::ops::Range;
use std::sync::Mutex;

use super::{Backend, Memory, RowBuf};
use crate::arch::Graph;
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::linear::Activations;
use crate::session::SeqRun;
use crate::workspace::Workspace;

/// A backend that runs whole forwards for [`crate::model::Model`] (see the module docs).
pub trait DeviceRun: Send + Sync {
    /// The backend's name, for logs.
    fn name(&self) -> String;

    /// [`Graph::forward_layers`] over `run` = (positions `[T]`, sequences, tokens) through
    /// `layers` (which end at the last layer), leaving the final residual stream on the
    /// device. A range starting at 0 embeds the tokens on the device; any other range starts
    /// from `residual` (`[T][residual width]`, host rows: the stream after the layers before
    /// it), which is copied to the device first.
    ///
    /// Errors: as [`Graph::forward`], and the backend's [`Backend::finish`].
    fn forward(
        &self,
        graph: &Graph,
        cfg: &ModelConfig,
        run: (&[usize], &mut [SeqRun<'_>], &[u32]),
        layers: Range<usize>,
        residual: &[f32],
    ) -> Result<(), EngineError>;

    /// [`Graph::output`] of the last forward's `rows`, copied into host buffers:
    /// `logits` `[rows][n_vocab]`, `hidden` `[rows][residual width]`.
    ///
    /// Errors: as [`Graph::output`], and the backend's [`Backend::finish`].
    fn output(
        &self,
        graph: &Graph,
        cfg: &ModelConfig,
        rows: &[usize],
        logits: &mut Activations,
        hidden: &mut Activations,
    ) -> Result<(), EngineError>;
}

/// Backend `B` with its workspace (one run at a time).
pub struct OnDevice<B: Backend> {
    be: B,
    ws: Mutex<Workspace<B::Mem>>,
}

impl<B: Backend> OnDevice<B>
where
    Workspace<B::Mem>: Default,
{
    /// `be` with an empty workspace (buffers grow with the first runs).
    pub fn new(be: B) -> Self {
        OnDevice {
            be,
            ws: Mutex::new(Workspace::default()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.be
    }
}

impl<B> DeviceRun for OnDevice<B>
where
    B: Backend + Send,
    B::Mem: Send,
    Workspace<B::Mem>: Default + Send,
{
    fn name(&self) -> String {
        self.be.name()
    }

    fn forward(
        &self,
        graph: &Graph,
        cfg: &ModelConfig,
        (pos, seqs, tokens): (&[usize], &mut [SeqRun<'_>], &[u32]),
        layers: Range<usize>,
        residual: &[f32],
    ) -> Result<(), EngineError> {
        let mut ws = self.ws.lock().unwrap_or_else(|e| e.into_inner());
        ws.pos.clear();
        ws.pos.extend_from_slice(pos);
        if layers.start > 0 {
            self.be.upload(residual, cfg.residual_width(), &mut ws.x);
        }
        let run = graph.forward_layers(&self.be, cfg, &mut ws, seqs, tokens, layers);
        // The host state is the truth between forwards (checkpoints, snapshots).
        let synced = self.be.sync_state(seqs);
        let done = self.be.finish();
        run.and(synced).and(done)
    }

    fn output(
        &self,
        graph: &Graph,
        cfg: &ModelConfig,
        rows: &[usize],
        logits: &mut Activations,
        hidden: &mut Activations,
    ) -> Result<(), EngineError> {
        let mut ws = self.ws.lock().unwrap_or_else(|e| e.into_inner());
        let ws = &mut *ws;
        let run = graph.output(&self.be, cfg, ws, rows);
        self.be.finish().and(run)?;
        copy_out(&self.be, &mut ws.logits, logits);
        copy_out(&self.be, &mut ws.hidden, hidden);
        self.be.finish()
    }
}

/// `dst` = the contents of the device buffer `src`.
fn copy_out<B: Backend>(be: &B, src: &mut <B::Mem as Memory>::Buf, dst: &mut Activations) {
    let (rows, cols) = (src.rows(), src.cols());
    let host = be.host(src);
    dst.resize(rows, cols);
    let n = (rows * cols).min(host.len());
    dst.write()[..n].copy_from_slice(&host[..n]);
}
