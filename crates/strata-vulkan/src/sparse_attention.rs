//! Attention over a list of cached positions per query: QSA's kept tokens (qwen4exp).
//!
//! Which positions a query keeps is decided on the host, by strata-engine's own selection
//! (`ops::qsa::sparse_positions`: block keys, indexer scores, top-k): a few hundred scores a
//! query, exactly the CPU's choice. The attention over them runs here, on the device KV
//! mirror.

use crate::attention::{check_cache, KvFormat, MAX_HEAD_DIM};
use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, push, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// The shape of one sequence's part of a sparse attention run.
#[derive(Clone, Copy, Debug)]
pub struct SparseDims {
    /// Query rows of the sequence and its first row in the run's buffers.
    pub n_t: usize,
    pub row0: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax.
    pub scale: f32,
    /// Positions in the caches (every listed position is below it).
    pub n_pos: usize,
    /// The caches' format (queries are rounded to f16 where it holds f16 values, as the
    /// CPU rounds them: see `attention_sparse.comp`).
    pub kv: KvFormat,
}

/// The position lists of [`Kernels::attention_sparse`] as one `u32` buffer: for query `t`,
/// words `2t`, `2t + 1` = the offset of its positions in the buffer and their count (0: the
/// query is left as it is), then the positions.
pub fn position_lists(lists: &[Vec<usize>]) -> Vec<u32> {
    let mut idx = vec![0u32; 2 * lists.len()];
    for (t, l) in lists.iter().enumerate() {
        idx[2 * t] = idx.len() as u32;
        idx[2 * t + 1] = l.len() as u32;
        idx.extend(l.iter().map(|p| *p as u32));
    }
    idx
}

impl Kernels {
    /// `out` rows `row0..row0 + n_t` (`[T][n_head·head_dim]`) = attention of the same rows
    /// of `q` over the positions that `idx` ([`position_lists`]) lists for each, in the
    /// caches `k_cache`, `v_cache` (`[positions][n_kv_head·head_dim]` in format `d.kv`). Rows with no
    /// positions are not written.
    ///
    /// Errors: [`VkError::Shape`] for a head dimension over [`MAX_HEAD_DIM`], heads that do
    /// not group, buffers too small.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_sparse<'a>(
        &self,
        rec: &mut Recorder<'a>,
        d: &SparseDims,
        q: &'a Buffer,
        (k_cache, v_cache): (&'a Buffer, &'a Buffer),
        idx: &'a Buffer,
        out: &'a Buffer,
    ) -> Result<(), VkError> {
        if d.head_dim == 0
            || d.head_dim > MAX_HEAD_DIM
            || d.n_kv_head == 0
            || !d.n_head.is_multiple_of(d.n_kv_head)
        {
            return Err(VkError::Shape {
                op: "attention_sparse",
                what: format!(
                    "{} heads of {} over {} kv heads (head_dim ≤ {MAX_HEAD_DIM})",
                    d.n_head, d.head_dim, d.n_kv_head
                ),
            });
        }
        let row = d.n_head * d.head_dim;
        let kv = d.n_pos * d.n_kv_head * d.head_dim;
        check_f32("attention_sparse", "q", q, (d.row0 + d.n_t) * row)?;
        check_f32("attention_sparse", "out", out, (d.row0 + d.n_t) * row)?;
        check_cache("attention_sparse", "k_cache", k_cache, kv, d.kv)?;
        check_cache("attention_sparse", "v_cache", v_cache, kv, d.kv)?;
        check_f32("attention_sparse", "idx", idx, 2 * d.n_t)?;
        if d.n_t == 0 || d.n_head == 0 {
            return Ok(());
        }
        let (name, spirv) = match d.kv {
            KvFormat::F16 => ("attention_sparse_f16", shaders::ATTENTION_SPARSE_F16),
            _ => ("attention_sparse", shaders::ATTENTION_SPARSE),
        };
        let p = self.pipeline(name, spirv, 5, 28, &[self.wg])?;
        let args = push(&[
            u32_of("attention_sparse", d.n_t)?,
            u32_of("attention_sparse", d.row0)?,
            u32_of("attention_sparse", d.n_head)?,
            u32_of("attention_sparse", d.n_kv_head)?,
            u32_of("attention_sparse", d.head_dim)?,
            d.scale.to_bits(),
            u32::from(d.kv.holds_f16()),
        ]);
        let groups = [
            u32_of("attention_sparse", d.n_head)?,
            u32_of("attention_sparse", d.n_t)?,
            1,
        ];
        rec.dispatch(&p, &[q, k_cache, v_cache, out, idx], &args, groups)
    }
}
