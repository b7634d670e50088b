//! The engine's ops on the Vulkan device.

use strata_engine::backend::{Backend, DeltaBufs, Glu, QsaBufs, RowBuf};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::delta_net::{DeltaShape, KeyHeads};
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::MoeWeights;
use strata_engine::ops::qsa::{BlockKeyWeights, QsaShape};
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::session::SeqRun;
use strata_engine::EngineError;

use super::hybrid::DeltaRun;
use super::{lock, VkBuf, VkMem, Vulkan};
use crate::elementwise::{GluAct, RopePairs};
use crate::error::VkError;
use crate::gating::GateAct;
use crate::state_mirror::Part;

impl Backend for Vulkan {
    type Mem = VkMem;

    fn name(&self) -> String {
        format!("vulkan ({})", self.dev.info().name)
    }

    fn finish(&self) -> Result<(), EngineError> {
        // The run's last commands; an op's own error comes first.
        let done = self.flush().map_err(|e| self.device_err(e));
        match lock(&self.error).take() {
            Some(e) => Err(e),
            None => done,
        }
    }

    fn sync_state(&self, seqs: &mut [SeqRun<'_>]) -> Result<(), EngineError> {
        self.state_sync(seqs).map_err(|e| self.device_err(e))
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
                self.record(|r| self.k.get_rows(r, part, tokens, scale, xb))
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
        table: &Matrix<'_>,
        ids: &[u32],
        per_row: usize,
        x: &mut VkBuf,
    ) -> Result<(), EngineError> {
        // `[T][per_row·cols]` is `[T·per_row][cols]`: the rows of `embed` at scale 1.
        self.embed(table, 1.0, ids, x)?;
        x.resize(ids.len() / per_row.max(1), per_row * table.cols);
        Ok(())
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
            self.record(|r| {
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

    fn l2_norm_heads(&self, x: &mut VkBuf, head_dim: usize, eps: f32) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("l2_norm")?;
            let n_heads = x.len().checked_div(head_dim).unwrap_or(0);
            self.record(|r| self.k.l2_norm(r, xb, n_heads, head_dim, eps))
        };
        self.check(run());
    }

    fn rope(&self, rope: &Rope, x: &mut VkBuf, head_dim: usize, cs: &VkBuf) {
        let pairs = match rope.style {
            RopeStyle::Normal => RopePairs::Normal,
            RopeStyle::Neox => RopePairs::Neox,
        };
        let run = || -> Result<(), VkError> {
            let (xb, cb) = (x.input("rope")?, cs.input("rope")?);
            self.record(|r| {
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
            let mut kv = self.read_all(&[k, v])?.into_iter();
            let (kh, vh) = (kv.next().unwrap_or_default(), kv.next().unwrap_or_default());
            self.output(out, q.rows, shape.n_head * shape.head_dim)?;
            let ob = out.input("attention")?;
            for s in seqs.iter_mut() {
                self.attend_seq(s, layer, (q, k, v), (&kh, &vh), shape, (ob, None))?;
            }
            Ok(())
        };
        self.check(run());
    }

    fn attend_qsa(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: QsaBufs<'_, Self>,
        shape: &AttnShape,
        qsa: &QsaShape,
        bk: BlockKeyWeights<'_>,
        out: &mut VkBuf,
    ) {
        self.check(self.qsa_run(seqs, layer, x, (shape, qsa, bk), out));
    }

    fn conv1d(&self, seqs: &mut [SeqRun<'_>], layer: usize, x: &VkBuf, w: &[f32], out: &mut VkBuf) {
        self.check(self.conv_run(seqs, Part::Conv(layer), (x, w, 1), out));
    }

    fn ple_conv(
        &self,
        seqs: &mut [SeqRun<'_>],
        x: &VkBuf,
        w: &[f32],
        dilation: usize,
        out: &mut VkBuf,
    ) {
        self.check(self.conv_run(seqs, Part::PleConv, (x, w, dilation), out));
    }

    fn delta_rule(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        shape: &DeltaShape,
        x: DeltaBufs<'_, Self>,
        out: &mut VkBuf,
    ) {
        let a = DeltaRun {
            layer,
            n_v_heads: shape.n_v_heads,
            n_k_heads: shape.n_k_heads,
            d_k: shape.d_k,
            d_v: shape.d_v,
            tiled: shape.key_heads == KeyHeads::Tiled,
            x: [x.q, x.k, x.v, x.log_decay, x.beta],
        };
        self.check(self.delta_run(seqs, a, out));
    }

    fn delta_gates(
        &self,
        ba: &VkBuf,
        dt_bias: &[f32],
        a: &[f32],
        n_k_heads: usize,
        beta: &mut VkBuf,
        log_decay: &mut VkBuf,
    ) {
        let mut run = || -> Result<(), VkError> {
            let nv = dt_bias.len();
            let (dt, ab) = (self.vector(dt_bias)?, self.vector(a)?);
            self.output(beta, ba.rows, nv)?;
            self.output(log_decay, ba.rows, nv)?;
            let (bab, bb, lb) = (
                ba.input("delta_gates")?,
                beta.input("delta_gates")?,
                log_decay.input("delta_gates")?,
            );
            let heads = (ba.rows, nv, n_k_heads);
            self.record(|r| self.k.delta_gates(r, bab, (&dt, &ab), heads, bb, lb))
        };
        self.check(run());
    }

    fn add(&self, a: &mut VkBuf, b: &VkBuf) {
        let run = || -> Result<(), VkError> {
            let (ab, bb) = (a.input("add")?, b.input("add")?);
            self.record(|r| self.k.add(r, ab, bb, a.len()))
        };
        self.check(run());
    }

    fn scale(&self, x: &mut VkBuf, s: f32) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("scale")?;
            self.record(|r| self.k.scale(r, xb, x.len(), s))
        };
        self.check(run());
    }

    fn hc_collapse(&self, rn: &VkBuf, g: &VkBuf, n_streams: usize, out: &mut VkBuf) {
        let mut run = || -> Result<(), VkError> {
            let d = rn.cols.checked_div(n_streams).unwrap_or(0);
            self.output(out, rn.rows, d)?;
            let (rb, gb, ob) = (
                rn.input("hc_collapse")?,
                g.input("hc_collapse")?,
                out.input("hc_collapse")?,
            );
            self.record(|r| self.k.hc_collapse(r, rb, gb, ob, rn.rows, n_streams, d))
        };
        self.check(run());
    }

    fn hc_expand_add(&self, r: &mut VkBuf, y: &VkBuf, inj: &VkBuf) {
        let run = || -> Result<(), VkError> {
            let (rb, yb, ib) = (
                r.input("hc_expand_add")?,
                y.input("hc_expand_add")?,
                inj.input("hc_expand_add")?,
            );
            let (n_t, hc) = (inj.rows, inj.cols);
            let d = y.cols;
            self.record(|rec| self.k.hc_expand_add(rec, rb, yb, ib, n_t, hc, d))
        };
        self.check(run());
    }

    fn ple_gate(&self, key: &VkBuf, qry: &VkBuf, val: &VkBuf, out: &mut VkBuf) {
        let mut run = || -> Result<(), VkError> {
            let (d, n_t) = (val.cols, key.rows);
            let hc = key.cols.checked_div(d).unwrap_or(0);
            self.output(out, n_t, key.cols)?;
            let bufs = (
                key.input("ple_gate")?,
                qry.input("ple_gate")?,
                val.input("ple_gate")?,
            );
            let ob = out.input("ple_gate")?;
            self.record(|r| self.k.ple_gate(r, bufs, ob, n_t, hc, d))
        };
        self.check(run());
    }

    fn glu(&self, act: Glu, gate: &mut VkBuf, up: &VkBuf) {
        let act = match act {
            Glu::SwiGlu => GluAct::SwiGlu,
            Glu::GegluTanh => GluAct::GegluTanh,
        };
        let run = || -> Result<(), VkError> {
            let (gb, ub) = (gate.input("glu")?, up.input("glu")?);
            self.record(|r| self.k.glu(r, act, gb, ub, gate.len()))
        };
        self.check(run());
    }

    fn silu(&self, x: &mut VkBuf) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("silu")?;
            self.record(|r| self.k.silu(r, xb, x.len()))
        };
        self.check(run());
    }

    fn mul_silu(&self, x: &mut VkBuf, z: &VkBuf) {
        self.check(self.gated(GateAct::Silu, x, z));
    }

    fn mul_sigmoid(&self, x: &mut VkBuf, g: &VkBuf) {
        self.check(self.gated(GateAct::Sigmoid, x, g));
    }

    fn add_gated(&self, out: &mut VkBuf, y: &VkBuf, g: &VkBuf) {
        let run = || -> Result<(), VkError> {
            let (ob, yb, gb) = (
                out.input("add_gated")?,
                y.input("add_gated")?,
                g.input("add_gated")?,
            );
            self.record(|r| self.k.add_gated(r, ob, yb, gb, out.cols, out.len()))
        };
        self.check(run());
    }

    fn softcap(&self, x: &mut VkBuf, cap: f32) {
        let run = || -> Result<(), VkError> {
            let xb = x.input("softcap")?;
            self.record(|r| self.k.softcap(r, xb, x.len(), cap))
        };
        self.check(run());
    }

    fn split(&self, x: &VkBuf, widths: &[usize], outs: &mut [&mut VkBuf]) {
        self.check(self.split_run(x, widths, outs));
    }

    fn concat(&self, parts: &[&VkBuf], out: &mut VkBuf) {
        self.check(self.concat_run(parts, out));
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
        w: &MoeWeights,
        x: &mut VkBuf,
        out: &mut VkBuf,
        _: &mut (),
    ) -> Result<(), EngineError> {
        self.moe_ffn(w, x, out).map_err(|e| self.device_err(e))
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
    /// `x ⊙ act(g)` in place.
    fn gated(&self, act: GateAct, x: &VkBuf, g: &VkBuf) -> Result<(), VkError> {
        let (xb, gb) = (x.input("gate")?, g.input("gate")?);
        self.record(|r| self.k.gate(r, act, xb, gb, x.len()))
    }
}
