//! The routed experts of one layer on the device ([`Backend::moe`]), in the engine's four
//! steps (`strata_engine::ops::moe`): the router matmul on the device; its logits read back
//! and routed on the host by the engine's own [`Routing`] (softmax → top-k → renormalise, as
//! the CPU does); every chosen expert's gate and up matmuls, SwiGLU and down matmul on the
//! device over the tokens routed to it; the weighted sum in slot order on the host.
//!
//! Each expert tensor is uploaded whole, once, like any weight; an expert is its row range,
//! addressed by the matmul kernel's row offset ([`crate::Kernels::matmul_rows`]). The rows
//! of the batch are gathered on the host into group order (the tokens of one expert
//! consecutive), so one dispatch per expert and matrix covers all its tokens. Simple and one
//! submission for the experts: the next steps are routing on the device (no read-back) and a
//! batched expert kernel.
//!
//! [`Backend::moe`]: strata_engine::backend::Backend::moe

use std::ops::Range;

use strata_engine::ops::axpy;
use strata_engine::ops::moe::{ExpertTensor, Groups, MoeWeights, Routing};

use super::memory::Weight;
use super::{VkBuf, Vulkan};
use crate::buffer::Buffer;
use crate::elementwise::GluAct;
use crate::error::VkError;
use crate::recorder::Recorder;

impl Vulkan {
    /// `out` (`[T][n_embd]`, resized) = the weighted sum of the chosen experts' SwiGLU FFNs
    /// for every row of `x` (`[T][n_embd]`, normed), see the module docs.
    ///
    /// Errors: a weight type without a kernel; device errors.
    pub(super) fn moe_ffn(
        &self,
        w: &MoeWeights,
        x: &VkBuf,
        out: &mut VkBuf,
    ) -> Result<(), VkError> {
        let (n_expert, k, d) = (w.gate.n_expert, w.n_used, w.router.cols);
        let (t_n, n_ff) = (x.rows, w.gate.rows());
        if x.cols != d || w.router.rows != n_expert {
            return Err(VkError::Shape {
                op: "moe",
                what: format!(
                    "{} input columns, a {}×{} router for {n_expert} experts of {d}",
                    x.cols, w.router.rows, w.router.cols
                ),
            });
        }
        if t_n == 0 {
            return self.output(out, 0, d);
        }

        // 1. Route: logits on the device, the choice on the host.
        let router = self.matrix(&w.router)?;
        let mut logits = VkBuf::default();
        self.output(&mut logits, t_n, n_expert)?;
        let (xb, lb) = (x.input("moe")?, logits.input("moe")?);
        self.record(|r| {
            for (r0, part) in &router.parts {
                self.k.matmul_into(r, part, xb, t_n, lb, (n_expert, *r0))?;
            }
            Ok(())
        })?;
        let mut host = self.read_all(&[&logits, x])?.into_iter();
        let (mut probs, xs) = (
            host.next().unwrap_or_default(),
            host.next().unwrap_or_default(),
        );
        let mut routing = Routing::default();
        routing.fill(&mut probs, n_expert, k, w.norm_topk);
        let mut groups = Groups::default();
        groups.build(&routing.ids, n_expert);

        // 2. The batch's rows in group order: row `pos` is token `order[pos] / k`.
        let mut xg = Vec::with_capacity(groups.order.len() * d);
        for slot in &groups.order {
            xg.extend_from_slice(&xs[slot / k * d..][..d]);
        }
        let n_pos = groups.order.len();
        let mut xg_buf = VkBuf::default();
        self.write(&xg, n_pos, d, &mut xg_buf)?;

        // 3. Every chosen expert on its tokens: gate and up, SwiGLU, down.
        let (gate, up, down) = (
            self.matrix(&w.gate.all)?,
            self.matrix(&w.up.all)?,
            self.matrix(&w.down.all)?,
        );
        let (mut h, mut h_up, mut y) = (VkBuf::default(), VkBuf::default(), VkBuf::default());
        self.output(&mut h, n_pos, n_ff)?;
        self.output(&mut h_up, n_pos, n_ff)?;
        self.output(&mut y, n_pos, d)?;
        let (xgb, hb, ub, yb) = (
            xg_buf.input("moe")?,
            h.input("moe")?,
            h_up.input("moe")?,
            y.input("moe")?,
        );
        let spans = &groups.spans;
        self.record(|r| {
            for (e, toks) in spans {
                self.expert_matmul(r, (&*gate, &w.gate, *e), xgb, toks, hb)?;
                self.expert_matmul(r, (&*up, &w.up, *e), xgb, toks, ub)?;
            }
            self.k.glu(r, GluAct::SwiGlu, hb, ub, n_pos * n_ff)?;
            for (e, toks) in spans {
                self.expert_matmul(r, (&*down, &w.down, *e), hb, toks, yb)?;
            }
            Ok(())
        })?;

        // 4. Combine: every token's experts in slot (rank) order, as the CPU adds them.
        let ys = self.read(&y)?;
        let mut o = vec![0.0f32; t_n * d];
        for (t, row) in o.chunks_exact_mut(d).enumerate() {
            for slot in t * k..(t + 1) * k {
                let pos = groups.pos_of[slot];
                axpy(routing.weights[slot], &ys[pos * d..(pos + 1) * d], row);
            }
        }
        self.write(&o, t_n, d, out)
    }

    /// Records `y[pos] = W_e · x[pos]` for the group-order rows `toks` of expert `e` of
    /// tensor `t` (uploaded as `w`): the expert's row range of every part of `w` that holds
    /// some of it (one part unless the tensor was split at the device's binding limit).
    fn expert_matmul<'a>(
        &self,
        r: &mut Recorder<'a>,
        (w, t, e): (&'a Weight, &ExpertTensor<'_>, usize),
        x: &'a Buffer,
        toks: &Range<usize>,
        y: &'a Buffer,
    ) -> Result<(), VkError> {
        let rows = t.rows_of(e);
        for (r0, part) in &w.parts {
            let lo = rows.start.max(*r0);
            let hi = rows.end.min(r0 + part.rows);
            if lo < hi {
                self.k.matmul_rows(
                    r,
                    (part, lo - r0..hi - r0),
                    x,
                    (toks.start, toks.len()),
                    y,
                    (rows.len(), lo - rows.start),
                )?;
            }
        }
        Ok(())
    }
}
