//! Causal attention over a device KV cache, appending to that cache, and the logit soft cap.

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, grid, push, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// Largest head dimension of [`Kernels::attention`] (`MAX_HD` in `attention.comp`).
pub const MAX_HEAD_DIM: usize = 256;

/// Workgroup size of the element-wise kernels (as in `elementwise.rs`).
const WG: u32 = 64;

/// How a device KV cache holds its keys and values (`kv_cache.glsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvFormat {
    /// f32 as computed: the session's host cache is f32.
    F32,
    /// f32, each value rounded through f16: the host cache is f16 but a cache row has an odd
    /// number of elements (no whole f16 pairs).
    F32RoundedF16,
    /// f16, two to a 32-bit word (half the memory and reads of f32): the host cache is f16.
    F16,
}

impl KvFormat {
    /// The device format that holds exactly the values of a host cache (`host_f16`: an f16
    /// cache) with rows of `row` elements.
    pub fn of(host_f16: bool, row: usize) -> Self {
        match (host_f16, row.is_multiple_of(2)) {
            (false, _) => KvFormat::F32,
            (true, true) => KvFormat::F16,
            (true, false) => KvFormat::F32RoundedF16,
        }
    }

    /// Bytes of one cached element.
    pub fn elem_bytes(self) -> usize {
        match self {
            KvFormat::F16 => 2,
            _ => 4,
        }
    }

    /// Whether the values are f16 values (the CPU then rounds the queries too).
    pub fn holds_f16(self) -> bool {
        self != KvFormat::F32
    }
}

/// Checks that a cache buffer holds `elems` elements of format `kv`.
pub(crate) fn check_cache(
    op: &'static str,
    what: &str,
    buf: &Buffer,
    elems: usize,
    kv: KvFormat,
) -> Result<(), VkError> {
    if (elems * kv.elem_bytes()) as u64 > buf.size() {
        return Err(VkError::Shape {
            op,
            what: format!(
                "{what} needs {elems} {kv:?} elements, its buffer holds {} bytes",
                buf.size()
            ),
        });
    }
    Ok(())
}

/// The shape of one sequence's part of an attention run.
#[derive(Clone, Copy, Debug)]
pub struct AttnDims {
    /// Query rows of the sequence, its first row in the run's buffers, and its position.
    pub n_t: usize,
    pub row0: usize,
    pub pos0: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Multiplies q·k before the softmax.
    pub scale: f32,
    /// Sliding window (keys at positions > pos − window), 0 = none.
    pub window: usize,
    /// The caches' format; over f16 values ([`KvFormat::holds_f16`]) the queries are
    /// rounded to f16 too, as the CPU does over an f16 cache.
    pub kv: KvFormat,
}

impl Kernels {
    /// `out` rows `row0..row0 + n_t` (`[T][n_head·head_dim]`) = causal attention of the same
    /// rows of `q` over the cache `k_cache`, `v_cache` (`[positions][n_kv_head·head_dim]` in
    /// format `d.kv`, positions `0..pos0 + n_t` written): query `t` at position `pos0 + t` sees positions
    /// `≤ pos0 + t` (within the window).
    ///
    /// Errors: [`VkError::Shape`] for a head dimension over [`MAX_HEAD_DIM`], heads that do
    /// not group, buffers too small.
    pub fn attention<'a>(
        &self,
        rec: &mut Recorder<'a>,
        d: &AttnDims,
        q: &'a Buffer,
        k_cache: &'a Buffer,
        v_cache: &'a Buffer,
        out: &'a Buffer,
    ) -> Result<(), VkError> {
        if d.head_dim == 0
            || d.head_dim > MAX_HEAD_DIM
            || d.n_kv_head == 0
            || !d.n_head.is_multiple_of(d.n_kv_head)
        {
            return Err(VkError::Shape {
                op: "attention",
                what: format!(
                    "{} heads of {} over {} kv heads (head_dim ≤ {MAX_HEAD_DIM})",
                    d.n_head, d.head_dim, d.n_kv_head
                ),
            });
        }
        let row = d.n_head * d.head_dim;
        let kv = (d.pos0 + d.n_t) * d.n_kv_head * d.head_dim;
        check_f32("attention", "q", q, (d.row0 + d.n_t) * row)?;
        check_f32("attention", "out", out, (d.row0 + d.n_t) * row)?;
        check_cache("attention", "k_cache", k_cache, kv, d.kv)?;
        check_cache("attention", "v_cache", v_cache, kv, d.kv)?;
        if d.n_t == 0 || d.n_head == 0 {
            return Ok(());
        }
        let p = match d.kv {
            KvFormat::F16 => {
                self.pipeline("attention_f16", shaders::ATTENTION_F16, 4, 36, &[self.wg])
            }
            _ => self.pipeline("attention", shaders::ATTENTION, 4, 36, &[self.wg]),
        }?;
        let args = push(&[
            u32_of("attention", d.n_t)?,
            u32_of("attention", d.row0)?,
            u32_of("attention", d.pos0)?,
            u32_of("attention", d.n_head)?,
            u32_of("attention", d.n_kv_head)?,
            u32_of("attention", d.head_dim)?,
            d.scale.to_bits(),
            u32_of("attention", d.window)?,
            u32::from(d.kv.holds_f16()),
        ]);
        let groups = [
            u32_of("attention", d.n_head)?,
            u32_of("attention", d.n_t)?,
            1,
        ];
        rec.dispatch(&p, &[q, k_cache, v_cache, out], &args, groups)
    }

    /// Writes rows `row0..row0 + n_t` of `k` and `v` (`[T][row]`) to positions
    /// `pos0..pos0 + n_t` of the caches, which hold format `kv` (f32 values rounded through
    /// f16 for [`KvFormat::F32RoundedF16`]).
    ///
    /// Errors: [`VkError::Shape`] for buffers too small, an odd `row` in [`KvFormat::F16`].
    #[allow(clippy::too_many_arguments)]
    pub fn kv_store<'a>(
        &self,
        rec: &mut Recorder<'a>,
        (k, v): (&'a Buffer, &'a Buffer),
        (k_cache, v_cache): (&'a Buffer, &'a Buffer),
        row: usize,
        (row0, pos0, n_t): (usize, usize, usize),
        kv: KvFormat,
    ) -> Result<(), VkError> {
        check_f32("kv_store", "k", k, (row0 + n_t) * row)?;
        check_f32("kv_store", "v", v, (row0 + n_t) * row)?;
        check_cache("kv_store", "k_cache", k_cache, (pos0 + n_t) * row, kv)?;
        check_cache("kv_store", "v_cache", v_cache, (pos0 + n_t) * row, kv)?;
        if kv == KvFormat::F16 && !row.is_multiple_of(2) {
            return Err(VkError::Shape {
                op: "kv_store",
                what: format!("an f16 cache needs rows of an even length, not {row}"),
            });
        }
        // An f16 cache is written a pair of elements per invocation.
        let n = match kv {
            KvFormat::F16 => n_t * row / 2,
            _ => n_t * row,
        };
        if n == 0 {
            return Ok(());
        }
        let p = match kv {
            KvFormat::F16 => self.pipeline("kv_store_f16", shaders::KV_STORE_F16, 4, 20, &[WG]),
            _ => self.pipeline("kv_store", shaders::KV_STORE, 4, 20, &[WG]),
        }?;
        let args = push(&[
            u32_of("kv_store", n)?,
            u32_of("kv_store", row)?,
            u32_of("kv_store", row0)?,
            u32_of("kv_store", pos0)?,
            u32::from(kv == KvFormat::F32RoundedF16),
        ]);
        let groups = grid(u32_of("kv_store", n.div_ceil(WG as usize))?);
        rec.dispatch(&p, &[k, v, k_cache, v_cache], &args, groups)
    }

    /// `x[i] = cap · tanh(x[i] / cap)` for `i < n`.
    ///
    /// Errors: [`VkError::Shape`] for a buffer too small.
    pub fn softcap<'a>(
        &self,
        rec: &mut Recorder<'a>,
        x: &'a Buffer,
        n: usize,
        cap: f32,
    ) -> Result<(), VkError> {
        check_f32("softcap", "x", x, n)?;
        if n == 0 {
            return Ok(());
        }
        let p = self.pipeline("softcap", shaders::SOFTCAP, 1, 8, &[WG])?;
        let args = push(&[u32_of("softcap", n)?, cap.to_bits()]);
        let groups = grid(u32_of("softcap", n.div_ceil(WG as usize))?);
        rec.dispatch(&p, &[x], &args, groups)
    }
}
