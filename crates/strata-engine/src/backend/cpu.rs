//! The CPU backend: the SIMD kernels of [`crate::ops`] on a worker [`Pool`] it is given.
//!
//! Activations are host vectors ([`Activations`], which also keep the quantized copies a
//! matmul reads). Every op splits its work over the pool so that each output is computed by
//! the same arithmetic whatever the split: results never depend on the worker count or on the
//! other rows of the run (batch invariance, `tests/batch_invariance.rs`).

use strata_quant::Isa;

use super::{Backend, DeltaBufs, Glu, MatmulTo, Memory, QsaBufs, RowBuf};
use crate::error::EngineError;
use crate::ops::activation::{geglu_tanh, swiglu};
use crate::ops::attention::{attention, AttnShape};
use crate::ops::conv1d::{causal_conv1d, dilated_causal_conv1d};
use crate::ops::delta_net::{
    delta_rule_recurrent, l2_norm_heads_in_place, DeltaInputs, DeltaShape,
};
use crate::ops::gate::{mul_silu_in_place, sigmoid, silu_in_place, softplus};
use crate::ops::hyper::{hc_collapse, hc_expand_add};
use crate::ops::linear::{matmul, matmul_many, Activations, MatmulOut, Matrix, FUSED};
use crate::ops::moe::{moe_ffn, moe_ffn_with, MoeScratch, MoeWeights, Placement};
use crate::ops::norm::{rms_norm_groups, rms_norm_rows, rms_norm_rows_in_place};
use crate::ops::ple::ple_gate;
use crate::ops::qsa::{qsa_attention, BlockKeyWeights, QsaShape};
use crate::ops::rope::Rope;
use crate::ops::{add_in_place, par_chunks};
use crate::pool::Pool;
use crate::session::SeqRun;

/// Host memory: activations in [`Activations`].
#[derive(Default)]
pub struct HostMem;

impl Memory for HostMem {
    type Buf = Activations;
    type MoeScratch = MoeScratch;
}

impl RowBuf for Activations {
    fn resize(&mut self, rows: usize, cols: usize) {
        Activations::resize(self, rows, cols)
    }

    fn rows(&self) -> usize {
        Activations::rows(self)
    }

    fn cols(&self) -> usize {
        Activations::cols(self)
    }
}

/// The CPU backend on `pool`, computing every routed expert itself.
pub struct Cpu<'p> {
    pool: &'p Pool,
    placement: &'p Placement,
}

impl<'p> Cpu<'p> {
    /// The backend on `pool`; every routed expert runs on it.
    pub fn new(pool: &'p Pool) -> Cpu<'p> {
        static CPU_ONLY: Placement = Placement::cpu_only();
        Cpu {
            pool,
            placement: &CPU_ONLY,
        }
    }

    /// Its pool.
    pub fn pool(&self) -> &'p Pool {
        self.pool
    }
}

/// `f(seq, rows)` for every sequence, `rows` its row range scaled by `width`.
fn per_seq<'s, 'a>(
    seqs: &'s mut [SeqRun<'a>],
    width: usize,
) -> impl Iterator<Item = (&'s mut SeqRun<'a>, std::ops::Range<usize>)> {
    seqs.iter_mut().map(move |s| {
        let r = s.rows.start * width..s.rows.end * width;
        (s, r)
    })
}

/// `outs` as [`matmul_many`]'s outputs, each `y` resized to `[rows][w.rows]`.
fn matmul_outs<'a, 'w>(
    rows: usize,
    outs: &'a mut [MatmulTo<'_, 'w, Cpu<'_>>],
) -> smallvec::SmallVec<[MatmulOut<'a, 'w>; FUSED]> {
    outs.iter_mut()
        .map(|o| {
            o.y.resize(rows, o.w.rows);
            MatmulOut {
                w: o.w,
                bias: o.bias,
                y: o.y.write(),
            }
        })
        .collect()
}

impl Backend for Cpu<'_> {
    type Mem = HostMem;

    fn name(&self) -> String {
        format!("cpu-{}", Isa::best().name())
    }

    fn embed(
        &self,
        table: &Matrix<'_>,
        scale: f32,
        tokens: &[u32],
        x: &mut Activations,
    ) -> Result<(), EngineError> {
        self.embed_rows(table, tokens, 1, x)?;
        if scale != 1.0 {
            self.scale(x, scale);
        }
        Ok(())
    }

    fn embed_rows(
        &self,
        table: &Matrix<'_>,
        ids: &[u32],
        per_row: usize,
        x: &mut Activations,
    ) -> Result<(), EngineError> {
        x.resize(ids.len() / per_row, per_row * table.cols);
        for (id, row) in ids.iter().zip(x.write().chunks_exact_mut(table.cols)) {
            if *id as usize >= table.rows {
                return Err(EngineError::InvalidToken {
                    id: *id,
                    n_vocab: table.rows,
                });
            }
            table.dequantize_row(*id as usize, row)?;
        }
        Ok(())
    }

    fn rope_angles(&self, rope: &Rope, pos: &[usize], cs: &mut Activations) {
        let n_rot = rope.n_rot;
        cs.resize(pos.len(), n_rot);
        par_chunks(self.pool, cs.write(), n_rot, |r, cs| {
            for (t, cs) in cs.chunks_exact_mut(n_rot).enumerate() {
                rope.angles(pos[r.start / n_rot + t], cs);
            }
        });
    }

    fn matmul(
        &self,
        w: &Matrix<'_>,
        bias: Option<&[f32]>,
        x: &mut Activations,
        y: &mut Activations,
    ) -> Result<(), EngineError> {
        y.resize(x.rows(), w.rows);
        matmul(self.pool, w, bias, x, y.write())
    }

    fn matmuls(
        &self,
        x: &mut Activations,
        outs: &mut [MatmulTo<'_, '_, Self>],
    ) -> Result<(), EngineError> {
        let mut parts = matmul_outs(x.rows(), outs);
        matmul_many(self.pool, x, &mut parts)
    }

    fn rms_norm(&self, x: &Activations, w: &[f32], eps: f32, out: &mut Activations) {
        out.resize(x.rows(), x.cols());
        rms_norm_rows(self.pool, x.read(), w, eps, out.write());
    }

    fn rms_norm_grouped(
        &self,
        x: &Activations,
        w: &[f32],
        group: usize,
        eps: f32,
        out: &mut Activations,
    ) {
        out.resize(x.rows(), x.cols());
        rms_norm_groups(self.pool, x.read(), w, group, eps, out.write());
    }

    fn rms_norm_in_place(&self, x: &mut Activations, w: &[f32], eps: f32) {
        rms_norm_rows_in_place(self.pool, x.write(), w, eps);
    }

    fn l2_norm_heads(&self, x: &mut Activations, head_dim: usize, eps: f32) {
        l2_norm_heads_in_place(self.pool, x.write(), head_dim, eps);
    }

    fn rope(&self, rope: &Rope, x: &mut Activations, head_dim: usize, cs: &Activations) {
        let row = x.cols();
        rope.apply_rows(self.pool, x.write(), row, head_dim, cs.read());
    }

    fn attend(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        q: &Activations,
        k: &Activations,
        v: &Activations,
        shape: &AttnShape,
        out: &mut Activations,
    ) {
        let kv_dim = shape.n_kv_head * shape.head_dim;
        let q_dim = shape.n_head * shape.head_dim;
        out.resize(q.rows(), q_dim);
        let (q, k, v, att) = (q.read(), k.read(), v.read(), out.write());
        for (seq, r) in per_seq(seqs, q_dim) {
            let kv = &mut seq.kv[layer];
            for (t, row) in seq.rows.clone().enumerate() {
                let at = row * kv_dim..(row + 1) * kv_dim;
                kv.write(seq.pos0 + t, &k[at.clone()], &v[at]);
            }
            attention(self.pool, &q[r.clone()], kv, seq.pos0, shape, &mut att[r]);
        }
    }

    fn attend_qsa(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: QsaBufs<'_, Self>,
        shape: &AttnShape,
        qsa: &QsaShape,
        bk: BlockKeyWeights<'_>,
        out: &mut Activations,
    ) {
        let kv_dim = shape.n_kv_head * shape.head_dim;
        let q_dim = shape.n_head * shape.head_dim;
        let i_dim = qsa.n_head * qsa.head_dim;
        out.resize(x.q.rows(), q_dim);
        let (q, k, v, iq, ik) = (x.q.read(), x.k.read(), x.v.read(), x.iq.read(), x.ik.read());
        let att = out.write();
        for (seq, r) in per_seq(seqs, q_dim) {
            let kv = &mut seq.kv[layer];
            for (t, row) in seq.rows.clone().enumerate() {
                let at = row * kv_dim..(row + 1) * kv_dim;
                kv.write(seq.pos0 + t, &k[at.clone()], &v[at]);
                kv.write_index_key(
                    seq.pos0 + t,
                    &ik[row * qsa.head_dim..(row + 1) * qsa.head_dim],
                );
            }
            let ir = seq.rows.start * i_dim..seq.rows.end * i_dim;
            let (qs, iqs) = (&q[r.clone()], &iq[ir]);
            qsa_attention(
                self.pool,
                qs,
                iqs,
                kv,
                seq.pos0,
                shape,
                qsa,
                bk,
                &mut att[r],
            );
        }
    }

    fn conv1d(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: &Activations,
        w: &[f32],
        out: &mut Activations,
    ) {
        let c = x.cols();
        out.resize(x.rows(), c);
        let (x, o) = (x.read(), out.write());
        for (seq, r) in per_seq(seqs, c) {
            let st = &mut seq.delta_state(layer).conv;
            causal_conv1d(self.pool, &x[r.clone()], w, st, &mut o[r]);
        }
    }

    fn ple_conv(
        &self,
        seqs: &mut [SeqRun<'_>],
        x: &Activations,
        w: &[f32],
        dilation: usize,
        out: &mut Activations,
    ) {
        let c = x.cols();
        out.resize(x.rows(), c);
        let (x, o) = (x.read(), out.write());
        for (seq, r) in per_seq(seqs, c) {
            let st = &mut seq.ple_state().conv;
            let k = w.len() / c;
            dilated_causal_conv1d(self.pool, &x[r.clone()], w, k, dilation, st, &mut o[r]);
        }
    }

    fn delta_rule(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        shape: &DeltaShape,
        x: DeltaBufs<'_, Self>,
        out: &mut Activations,
    ) {
        let (nv, kd, vd) = (
            shape.n_v_heads,
            shape.n_k_heads * shape.d_k,
            shape.n_v_heads * shape.d_v,
        );
        out.resize(x.q.rows(), vd);
        let o = out.write();
        for seq in seqs.iter_mut() {
            let rows = seq.rows.clone();
            let (kr, vr, hr) = (
                rows.start * kd..rows.end * kd,
                rows.start * vd..rows.end * vd,
                rows.start * nv..rows.end * nv,
            );
            let inputs = DeltaInputs {
                q: &x.q.read()[kr.clone()],
                k: &x.k.read()[kr],
                v: &x.v.read()[vr.clone()],
                log_decay: &x.log_decay.read()[hr.clone()],
                beta: &x.beta.read()[hr],
            };
            // Token by token for any T, so a position's output never depends on how many
            // tokens came in its call (batch invariance); the chunked form rounds differently.
            let st = &mut seq.delta_state(layer).ssm;
            delta_rule_recurrent(self.pool, shape, inputs, st, &mut o[vr]);
        }
    }

    fn delta_gates(
        &self,
        ba: &Activations,
        dt_bias: &[f32],
        a: &[f32],
        n_k_heads: usize,
        beta: &mut Activations,
        log_decay: &mut Activations,
    ) {
        let nv = dt_bias.len();
        let r = nv / n_k_heads;
        beta.resize(ba.rows(), nv);
        log_decay.resize(ba.rows(), nv);
        let (b_out, g_out) = (beta.write(), log_decay.write());
        for (t, ba) in ba.read().chunks_exact(2 * nv).enumerate() {
            for vh in 0..nv {
                let (g, j) = (vh / r, vh % r);
                b_out[t * nv + vh] = sigmoid(ba[g * 2 * r + j]);
                let alpha = ba[g * 2 * r + r + j];
                g_out[t * nv + vh] = softplus(alpha + dt_bias[vh]) * a[vh];
            }
        }
    }

    fn add(&self, a: &mut Activations, b: &Activations) {
        add_in_place(self.pool, a.write(), b.read());
    }

    fn scale(&self, x: &mut Activations, s: f32) {
        par_chunks(self.pool, x.write(), 1, |_, x| {
            x.iter_mut().for_each(|v| *v *= s)
        });
    }

    fn hc_collapse(
        &self,
        rn: &Activations,
        g: &Activations,
        n_streams: usize,
        out: &mut Activations,
    ) {
        let d = rn.cols() / n_streams;
        out.resize(rn.rows(), d);
        hc_collapse(self.pool, rn.read(), g.read(), n_streams, d, out.write());
    }

    fn hc_expand_add(&self, r: &mut Activations, y: &Activations, inj: &Activations) {
        hc_expand_add(self.pool, r.write(), y.read(), inj.read(), inj.cols());
    }

    fn ple_gate(
        &self,
        key: &Activations,
        qry: &Activations,
        val: &Activations,
        out: &mut Activations,
    ) {
        let (d, hc) = (val.cols(), key.cols() / val.cols());
        out.resize(key.rows(), key.cols());
        ple_gate(
            self.pool,
            key.read(),
            qry.read(),
            val.read(),
            hc,
            d,
            out.write(),
        );
    }

    fn glu(&self, act: Glu, gate: &mut Activations, up: &Activations) {
        match act {
            Glu::SwiGlu => swiglu(self.pool, gate.write(), up.read()),
            Glu::GegluTanh => geglu_tanh(self.pool, gate.write(), up.read()),
        }
    }

    fn silu(&self, x: &mut Activations) {
        silu_in_place(self.pool, x.write());
    }

    fn mul_silu(&self, x: &mut Activations, z: &Activations) {
        mul_silu_in_place(self.pool, x.write(), z.read());
    }

    fn mul_sigmoid(&self, x: &mut Activations, g: &Activations) {
        let g = g.read();
        par_chunks(self.pool, x.write(), 1, |r, x| {
            crate::ops::exp::map2(x, &g[r], |xi, gi| xi * sigmoid(gi))
        });
    }

    fn add_gated(&self, out: &mut Activations, y: &Activations, g: &Activations) {
        let d = out.cols();
        let (y, g) = (y.read(), g.read());
        par_chunks(self.pool, out.write(), d, |r, o| {
            let t0 = r.start / d;
            for (t, o) in o.chunks_exact_mut(d).enumerate() {
                let gate = sigmoid(g[t0 + t]);
                for (oi, yi) in o.iter_mut().zip(&y[(t0 + t) * d..]) {
                    *oi += yi * gate;
                }
            }
        });
    }

    fn softcap(&self, x: &mut Activations, cap: f32) {
        par_chunks(self.pool, x.write(), 1, |_, x| {
            x.iter_mut().for_each(|l| *l = (*l / cap).tanh() * cap)
        });
    }

    fn split(&self, x: &Activations, widths: &[usize], outs: &mut [&mut Activations]) {
        let group: usize = widths.iter().sum();
        let reps = x.cols() / group;
        let mut off = 0;
        let (rows, x) = (x.rows(), x.read());
        for (o, &w) in outs.iter_mut().zip(widths) {
            o.resize(rows, reps * w);
            // Pieces of whole rows in parallel (a prefill's split moves tens of MB).
            par_chunks(self.pool, o.write(), w, |elems, d| {
                let pieces = x[elems.start / w * group..].chunks_exact(group);
                for (d, piece) in d.chunks_exact_mut(w).zip(pieces) {
                    d.copy_from_slice(&piece[off..off + w]);
                }
            });
            off += w;
        }
    }

    fn concat(&self, parts: &[&Activations], out: &mut Activations) {
        let rows = parts.first().map_or(0, |p| p.rows());
        let width: usize = parts.iter().map(|p| p.cols()).sum();
        out.resize(rows, width);
        let o = out.write();
        let mut off = 0;
        for p in parts {
            let w = p.cols();
            for (dst, src) in o.chunks_exact_mut(width).zip(p.read().chunks_exact(w)) {
                dst[off..off + w].copy_from_slice(src);
            }
            off += w;
        }
    }

    fn gather_rows(&self, x: &Activations, rows: &[usize], out: &mut Activations) {
        let d = x.cols();
        out.resize(rows.len(), d);
        let (x, o) = (x.read(), out.write());
        for (dst, r) in o.chunks_exact_mut(d).zip(rows) {
            dst.copy_from_slice(&x[r * d..(r + 1) * d]);
        }
    }

    fn moe(
        &self,
        w: &MoeWeights,
        x: &mut Activations,
        out: &mut Activations,
        scratch: &mut MoeScratch,
    ) -> Result<(), EngineError> {
        out.resize(x.rows(), w.router.cols);
        moe_ffn(self.pool, self.placement, w, x, out.write(), scratch)
    }

    fn moe_and_matmuls(
        &self,
        w: &MoeWeights,
        x: &mut Activations,
        out: &mut Activations,
        scratch: &mut MoeScratch,
        outs: &mut [MatmulTo<'_, '_, Self>],
    ) -> Result<(), EngineError> {
        out.resize(x.rows(), w.router.cols);
        let mut also = matmul_outs(x.rows(), outs);
        let (pool, place) = (self.pool, self.placement);
        moe_ffn_with(pool, place, w, x, out.write(), scratch, &mut also)
    }

    fn upload(&self, src: &[f32], cols: usize, b: &mut Activations) {
        b.resize(src.len() / cols, cols);
        b.write().copy_from_slice(src);
    }

    fn host<'a>(&self, b: &'a mut Activations) -> &'a mut Vec<f32> {
        b.host()
    }
}
