//! The ops of hybrid models (qwen3next: Gated DeltaNet layers, gated attention, a gated
//! shared expert) on the device.
//!
//! **Recurrent state.** The session's host state ([`strata_engine::recurrent_state`]) stays
//! the source of truth, as the host KV cache does: for every sequence of a run, `conv1d` and
//! `delta_rule` record an upload of the sequence's state of that layer into a device buffer,
//! the kernel, and a copy of the updated state into a staging buffer; the open batch is then
//! submitted once for all sequences and the state written into the host state before the op
//! returns. So
//! snapshots, restores, truncation (which restores a snapshot) and new sessions need no
//! invalidation rule: the device holds no state between ops. The price is a round trip of
//! the state per recurrent layer and sequence (Qwen3-Next-80B: ~2 MB a layer); a device
//! mirror keyed like the KV mirrors is the next step for speed.

use strata_engine::session::SeqRun;

use super::{VkBuf, Vulkan};
use crate::buffer::{Buffer, Location};
use crate::error::VkError;
use crate::gating::Cols;
use crate::recurrent::{ConvDims, DeltaDims};
use crate::transfer;

/// Which part of a sequence's recurrent state an op continues.
#[derive(Clone, Copy)]
pub(super) enum ConvState {
    /// The conv history of recurrent layer `n` (`DeltaState::conv`).
    Layer(usize),
    /// The PLE layer's dilated convolution history (`PleState::conv`).
    Ple,
}

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

fn conv_history<'s>(s: &'s mut SeqRun<'_>, which: ConvState) -> &'s mut Vec<f32> {
    match which {
        ConvState::Layer(n) => &mut s.delta_state(n).conv,
        ConvState::Ple => &mut s.ple_state().conv,
    }
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
    /// A device buffer of `floats` f32 (at least one word) for a sequence's state.
    fn scratch(&self, floats: usize) -> Result<Buffer, VkError> {
        Buffer::new(&self.dev, 4 * floats.max(1) as u64, Location::Device)
    }

    /// A host-visible buffer of `floats` f32 (at least one word): a state read back.
    fn scratch_host(&self, floats: usize) -> Result<Buffer, VkError> {
        Buffer::new(&self.dev, 4 * floats.max(1) as u64, Location::Host)
    }

    /// Every sequence's rows of `x` through the causal convolution `w` (`[C][K]`, taps
    /// `dilation` rows apart) continuing its history `which`, into `out` (`[T][C]`).
    pub(super) fn conv_run(
        &self,
        seqs: &mut [SeqRun<'_>],
        which: ConvState,
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
        // Each sequence's new history goes to a staging buffer; one wait for all of them.
        let mut back = Vec::with_capacity(seqs.len());
        for s in seqs.iter_mut() {
            let d = ConvDims {
                c,
                k: w.len() / c,
                dilation,
                n_t: s.rows.len(),
                row0: s.rows.start,
            };
            let hist = conv_history(s, which);
            if hist.len() != d.keep() * c {
                return Err(VkError::Shape {
                    op: "conv1d",
                    what: format!("a history of {} values, want {}", hist.len(), d.keep() * c),
                });
            }
            let (st, st_out) = (self.scratch(hist.len())?, self.scratch(hist.len())?);
            let host = self.scratch_host(hist.len())?;
            let bytes = transfer::f32_bytes(hist);
            self.record(|r| {
                transfer::write(r, &st, &bytes)?;
                self.k.conv1d(r, &d, xb, &wb, &st, ob, &st_out)?;
                r.copy(&st_out, &host, st_out.size())
            })?;
            back.push(host);
        }
        self.flush()?;
        for (s, host) in seqs.iter_mut().zip(&back) {
            let hist = conv_history(s, which);
            read_into(host, hist);
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
        let mut back = Vec::with_capacity(seqs.len());
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
            let ssm = &mut s.delta_state(a.layer).ssm;
            if ssm.len() != want {
                return Err(VkError::Shape {
                    op: "delta_rule",
                    what: format!("a state of {} values, want {want}", ssm.len()),
                });
            }
            let (st, host) = (self.scratch(want)?, self.scratch_host(want)?);
            let bytes = transfer::f32_bytes(ssm);
            self.record(|r| {
                transfer::write(r, &st, &bytes)?;
                self.k.delta_rule(r, &d, ins, gates, &st, ob)?;
                r.copy(&st, &host, st.size())
            })?;
            back.push(host);
        }
        self.flush()?;
        for (s, host) in seqs.iter_mut().zip(&back) {
            read_into(host, &mut s.delta_state(a.layer).ssm);
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
