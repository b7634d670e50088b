//! The engine's ops on the Vulkan device.

use strata_engine::backend::{Backend, DeltaBufs, Glu, QsaBufs, RowBuf};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::delta_net::DeltaShape;
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::MoeWeights;
use strata_engine::ops::qsa::{BlockKeyWeights, QsaShape};
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::session::SeqRun;
use strata_engine::EngineError;

use super::{lock, VkBuf, VkMem, Vulkan};
use crate::elementwise::{GluAct, RopePairs};
use crate::error::VkError;

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
