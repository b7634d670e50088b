//! The ops of hybrid models (qwen3next: Gated DeltaNet layers, gated attention, a gated
//! shared expert) on the device.
//!
//! **Recurrent state** lives on the device during a forward ([`crate::state_mirror`]):
//! `conv1d`, `ple_conv` and `delta_rule` continue each sequence's device copy of its state
//! (filled from the host state when the copy is missing or its id was renewed) and record
//! nothing for the host; [`Vulkan::state_sync`] (the engine's `Backend::sync_state`, called
//! at the end of every forward) copies what they advanced into the host state, which stays
//! the truth between forwards (checkpoints, snapshots, restores, the CPU's layers).

use strata_engine::session::SeqRun;

use super::{lock, VkBuf, Vulkan};
use crate::buffer::{Buffer, Location};
use crate::error::VkError;
use crate::gating::Cols;
use crate::recurrent::{ConvDims, DeltaDims};
use crate::state_mirror::Part;

/// The shape arguments of [`Vulkan::delta_run`] besides the sequences.
pub(super) struct DeltaRun<'b> {
    pub layer: usize,
    pub n_v_heads: usize,
    pub n_k_heads: usize,
    pub d_k: usize,
    pub d_v: usize,
    pub tiled: bool,
    /// q, k, v, log_decay, beta.
    pub x: [&'b VkBuf; 5],
}

/// The id of `s`'s host state and its part `part`.
///
/// Errors: [`VkError::Shape`] when the sequence has no such state.
fn host_part<'s>(s: &'s mut SeqRun<'_>, part: Part) -> Result<(u64, &'s mut Vec<f32>), VkError> {
    let missing = || VkError::Shape {
        op: "recurrent state",
        what: format!("the sequence has no state {part:?}"),
    };
    let rec = s.rec.as_deref_mut().ok_or_else(missing)?;
    let id = rec.id();
    let v = match part {
        Part::Conv(n) => rec.layers.get_mut(n).map(|l| &mut l.conv),
        Part::Ssm(n) => rec.layers.get_mut(n).map(|l| &mut l.ssm),
        Part::PleConv => rec.ple.as_mut().map(|p| &mut p.conv),
    };
    Ok((id, v.ok_or_else(missing)?))
}

/// `dst` = the first `dst.len()` f32 of a staging buffer that a finished batch filled.
fn read_into(st: &Buffer, dst: &mut [f32]) {
    if let Some(m) = st.mapped() {
        for (v, c) in dst.iter_mut().zip(m.chunks_exact(4)) {
            *v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    }
}

impl Vulkan {
    /// Every sequence's rows of `x` through the causal convolution `w` (`[C][K]`, taps
    /// `dilation` rows apart) continuing its history `part` (`Part::Conv` or
    /// `Part::PleConv`), into `out` (`[T][C]`).
    pub(super) fn conv_run(
        &self,
        seqs: &mut [SeqRun<'_>],
        part: Part,
        (x, w, dilation): (&VkBuf, &[f32], usize),
        out: &mut VkBuf,
    ) -> Result<(), VkError> {
        let c = x.cols;
        if c == 0 || w.is_empty() || !w.len().is_multiple_of(c) {
            return Err(VkError::Shape {
                op: "conv1d",
                what: format!("{} taps over {c} channels", w.len()),
            });
        }
        self.output(out, x.rows, c)?;
        let wb = self.vector(w)?;
        let (xb, ob) = (x.input("conv1d")?, out.input("conv1d")?);
        let mut mirrors = lock(&self.states);
        for s in seqs.iter_mut() {
            let d = ConvDims {
                c,
                k: w.len() / c,
                dilation,
                n_t: s.rows.len(),
                row0: s.rows.start,
            };
            let (id, hist) = host_part(s, part)?;
            if hist.len() != d.keep() * c {
                return Err(VkError::Shape {
                    op: "conv1d",
                    what: format!("a history of {} values, want {}", hist.len(), d.keep() * c),
                });
            }
            self.record(|r| {
                let slot = mirrors.slot(r, id, part, hist)?;
                let (st, next) = slot.pair(&self.dev)?;
                self.k.conv1d(r.scoped(), &d, xb, &wb, st, ob, next)?;
                slot.advance(true);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Every sequence's gated delta rule continuing its state of recurrent layer `a.layer`,
    /// into `out` (`[T][n_v_heads·d_v]`).
    pub(super) fn delta_run(
        &self,
        seqs: &mut [SeqRun<'_>],
        a: DeltaRun<'_>,
        out: &mut VkBuf,
    ) -> Result<(), VkError> {
        let [q, k, v, g, b] = a.x;
        self.output(out, q.rows, a.n_v_heads * a.d_v)?;
        let ob = out.input("delta_rule")?;
        let ins = (
            q.input("delta_rule")?,
            k.input("delta_rule")?,
            v.input("delta_rule")?,
        );
        let gates = (g.input("delta_rule")?, b.input("delta_rule")?);
        let want = a.n_v_heads * a.d_k * a.d_v;
        let mut mirrors = lock(&self.states);
        for s in seqs.iter_mut() {
            let d = DeltaDims {
                n_v_heads: a.n_v_heads,
                n_k_heads: a.n_k_heads,
                d_k: a.d_k,
                d_v: a.d_v,
                tiled: a.tiled,
                n_t: s.rows.len(),
                row0: s.rows.start,
            };
            let part = Part::Ssm(a.layer);
            let (id, ssm) = host_part(s, part)?;
            if ssm.len() != want {
                return Err(VkError::Shape {
                    op: "delta_rule",
                    what: format!("a state of {} values, want {want}", ssm.len()),
                });
            }
            self.record(|r| {
                let slot = mirrors.slot(r, id, part, ssm)?;
                self.k
                    .delta_rule(r.scoped(), &d, ins, gates, &slot.state, ob)?;
                slot.advance(false);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// `Backend::sync_state`: the parts of `seqs`' state that the ops advanced on the device,
    /// copied into their host state (one wait for all of them, which also runs the rest of
    /// the forward).
    ///
    /// Errors: allocation and submission errors (the mirrors are forgotten then: the next
    /// forward refills them from the host).
    pub(super) fn state_sync(&self, seqs: &mut [SeqRun<'_>]) -> Result<(), VkError> {
        let mut back = Vec::new();
        {
            let mut mirrors = lock(&self.states);
            for (i, s) in seqs.iter().enumerate() {
                let Some(rec) = s.rec.as_deref() else {
                    continue;
                };
                for (part, buf, len) in mirrors.take_dirty(rec.id()) {
                    let st = Buffer::new(&self.dev, 4 * len.max(1) as u64, Location::Host)?;
                    self.record(|r| r.copy(buf, &st, 4 * len as u64))?;
                    back.push((i, part, st));
                }
            }
        }
        if let Err(e) = self.flush() {
            lock(&self.states).clear();
            return Err(e);
        }
        for (i, part, st) in back {
            if let Some(s) = seqs.get_mut(i) {
                let (_, host) = host_part(s, part)?;
                read_into(&st, host);
            }
        }
        Ok(())
    }

    /// Piece `i` of every repeat of `widths` in each row of `x` into `outs[i]`.
    pub(super) fn split_run(
        &self,
        x: &VkBuf,
        widths: &[usize],
        outs: &mut [&mut VkBuf],
    ) -> Result<(), VkError> {
        // As the CPU: the row is `widths` repeated `reps` times, and the buffer is read as
        // `rows · reps` consecutive groups (the same thing when the groups fill the rows).
        let group: usize = widths.iter().sum();
        if group == 0 || widths.len() != outs.len() {
            return Err(VkError::Shape {
                op: "split",
                what: format!("rows of {} into pieces {widths:?}", x.cols),
            });
        }
        let reps = x.cols / group;
        for (o, w) in outs.iter_mut().zip(widths) {
            self.output(o, x.rows, reps * w)?;
        }
        let xb = x.input("split")?;
        let dsts = outs
            .iter()
            .map(|o| o.input("split"))
            .collect::<Result<Vec<_>, _>>()?;
        self.record(|r| {
            let mut off = 0;
            for (dst, w) in dsts.iter().zip(widths) {
                let from = Cols { stride: group, off };
                let to = Cols { stride: *w, off: 0 };
                self.k.copy_cols(r, xb, from, dst, to, x.rows * reps, *w)?;
                off += w;
            }
            Ok(())
        })
    }

    /// The rows of `parts` side by side into `out`.
    pub(super) fn concat_run(&self, parts: &[&VkBuf], out: &mut VkBuf) -> Result<(), VkError> {
        let rows = parts.first().map_or(0, |p| p.rows);
        if parts.iter().any(|p| p.rows != rows) {
            return Err(VkError::Shape {
                op: "concat",
                what: "parts with different row counts".into(),
            });
        }
        let width: usize = parts.iter().map(|p| p.cols).sum();
        self.output(out, rows, width)?;
        let ob = out.input("concat")?;
        let srcs = parts
            .iter()
            .map(|p| p.input("concat"))
            .collect::<Result<Vec<_>, _>>()?;
        self.record(|r| {
            let mut off = 0;
            for (src, p) in srcs.iter().zip(parts) {
                let from = Cols {
                    stride: p.cols,
                    off: 0,
                };
                let to = Cols { stride: width, off };
                self.k.copy_cols(r, src, from, ob, to, rows, p.cols)?;
                off += p.cols;
            }
            Ok(())
        })
    }
}
