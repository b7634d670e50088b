//! qwen4exp's hyper-connection and PLE element-wise ops on `[T][…]` f32 buffers: collapsing
//! the `hc` residual streams into one row, adding a block's output back into every stream,
//! and the PLE gate of each stream.
//!
//! Each op records one dispatch; the formulas are strata-engine's CPU ops (`ops/hyper.rs`,
//! `ops/ple.rs`), which the conformance cases compare against.

use crate::buffer::Buffer;
use crate::error::VkError;
use crate::kernels::{check_f32, push, u32_of, Kernels};
use crate::recorder::Recorder;
use crate::shaders;

/// Workgroup size of [`Kernels::ple_gate`] (a power of two: its reduction halves it).
const PLE_WG: u32 = 64;

fn streams(op: &'static str, n_t: usize, hc: usize, d: usize) -> Result<[u32; 2], VkError> {
    if hc == 0 || d == 0 {
        return Err(VkError::Shape {
            op,
            what: format!("{n_t} rows of {hc} streams of {d}"),
        });
    }
    Ok([u32_of(op, d)?, u32_of(op, hc)?])
}

impl Kernels {
    /// Records `out[t] = (1/hc) · Σ_s σ(g[t][s]) ⊙ rn[t][s]` for `n_t` rows: `rn`, `g`
    /// `[n_t][hc·d]`, `out` `[n_t][d]`.
    ///
    /// Errors: [`VkError::Shape`] for zero streams or width, or a buffer too small.
    #[allow(clippy::too_many_arguments)]
    pub fn hc_collapse<'a>(
        &self,
        rec: &mut Recorder<'a>,
        rn: &'a Buffer,
        g: &'a Buffer,
        out: &'a Buffer,
        n_t: usize,
        hc: usize,
        d: usize,
    ) -> Result<(), VkError> {
        let extra = streams("hc_collapse", n_t, hc, d)?;
        check_f32("hc_collapse", "rn", rn, n_t * hc * d)?;
        check_f32("hc_collapse", "g", g, n_t * hc * d)?;
        check_f32("hc_collapse", "out", out, n_t * d)?;
        self.elementwise(
            rec,
            ("hc_collapse", shaders::HC_COLLAPSE),
            &[rn, g, out],
            n_t * d,
            &extra,
            &[],
        )
    }

    /// Records `r[t][s] += 2·σ(inj[t][s] / hc) · y[t]` for `n_t` rows: `r` `[n_t][hc·d]`,
    /// `y` `[n_t][d]`, `inj` `[n_t][hc]`.
    ///
    /// Errors: [`VkError::Shape`] for zero streams or width, or a buffer too small.
    #[allow(clippy::too_many_arguments)]
    pub fn hc_expand_add<'a>(
        &self,
        rec: &mut Recorder<'a>,
        r: &'a Buffer,
        y: &'a Buffer,
        inj: &'a Buffer,
        n_t: usize,
        hc: usize,
        d: usize,
    ) -> Result<(), VkError> {
        let extra = streams("hc_expand_add", n_t, hc, d)?;
        check_f32("hc_expand_add", "r", r, n_t * hc * d)?;
        check_f32("hc_expand_add", "y", y, n_t * d)?;
        check_f32("hc_expand_add", "inj", inj, n_t * hc)?;
        self.elementwise(
            rec,
            ("hc_expand_add", shaders::HC_EXPAND_ADD),
            &[r, y, inj],
            n_t * hc * d,
            &extra,
            &[],
        )
    }

    /// Records the PLE gate `out[t][s] = σ(sign(σₛ)·√max(|σₛ|, 1e-6)) · val[t]`, `σₛ =
    /// key[t][s] · qry[t][s] / √d`, for `n_t` rows: `key`, `qry`, `out` `[n_t][hc·d]`, `val`
    /// `[n_t][d]`. One workgroup per (stream, row): at most 65535 rows.
    ///
    /// Errors: [`VkError::Shape`] for zero streams or width, or a buffer too small.
    #[allow(clippy::too_many_arguments)]
    pub fn ple_gate<'a>(
        &self,
        rec: &mut Recorder<'a>,
        (key, qry, val): (&'a Buffer, &'a Buffer, &'a Buffer),
        out: &'a Buffer,
        n_t: usize,
        hc: usize,
        d: usize,
    ) -> Result<(), VkError> {
        let [d32, hc32] = streams("ple_gate", n_t, hc, d)?;
        check_f32("ple_gate", "key", key, n_t * hc * d)?;
        check_f32("ple_gate", "qry", qry, n_t * hc * d)?;
        check_f32("ple_gate", "val", val, n_t * d)?;
        check_f32("ple_gate", "out", out, n_t * hc * d)?;
        if n_t == 0 {
            return Ok(());
        }
        let p = self.pipeline("ple_gate", shaders::PLE_GATE, 4, 12, &[PLE_WG])?;
        let args = push(&[u32_of("ple_gate", n_t)?, d32, hc32]);
        rec.dispatch(
            &p,
            &[key, qry, val, out],
            &args,
            [hc32, u32_of("ple_gate", n_t)?, 1],
        )
    }
}
