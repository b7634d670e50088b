//! Device memory of the backend: activation buffers and weight matrices.

use strata_engine::backend::{Memory, RowBuf};
use strata_engine::ops::linear::Matrix;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::VkError;
use crate::matmul::QMatrix;

/// Device memory: activations in [`VkBuf`]; no MoE scratch (the routed experts allocate
/// their few buffers per call: simple first).
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
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) buf: Option<Buffer>,
    pub(super) host: Vec<f32>,
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
    pub(super) fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// The device buffer of an input.
    pub(super) fn input(&self, op: &'static str) -> Result<&Buffer, VkError> {
        self.buf.as_ref().ok_or_else(|| VkError::Shape {
            op,
            what: "an input buffer was never written".into(),
        })
    }
}

/// A weight matrix on the device: one [`QMatrix`] per row range, each within the device's
/// storage-buffer limit (one range for all but the largest matrices: a big vocabulary's
/// embedding or LM head).
pub(super) struct Weight {
    /// (first row, the range's rows).
    pub(super) parts: Vec<(usize, QMatrix)>,
    pub(super) rows: usize,
}

impl Weight {
    pub(super) fn upload(dev: &Device, w: &Matrix<'_>, limit: u64) -> Result<Weight, VkError> {
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

    pub(super) fn bytes(&self) -> u64 {
        self.parts.iter().map(|(_, m)| m.buf.size()).sum()
    }
}
