//! QSA sparse attention (qwen4exp) on the device: the keys and values go to the KV mirror and
//! dense attention as for `Backend::attend`, then the queries past the budget attend again
//! over only their kept positions.
//!
//! The selection (block keys pooled from the raw indexer keys, indexer scores, top-k) runs on
//! the host with strata-engine's own code ([`sparse_positions`]): it reads back the small
//! indexer queries and keys and keeps the session's block-key cache — host state, as the KV
//! cache is — exactly as the CPU does, so both choose the same blocks bit for bit. The
//! attention over them (the bulk of the work) is `attention_sparse.comp`.

use strata_engine::backend::QsaBufs;
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::qsa::{sparse_positions, BlockKeyWeights, QsaShape};
use strata_engine::session::SeqRun;

use super::{VkBuf, Vulkan};
use crate::buffer::{Buffer, Location};
use crate::error::VkError;
use crate::sparse_attention::position_lists;
use crate::transfer;

impl Vulkan {
    /// `Backend::attend_qsa`.
    pub(super) fn qsa_run(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: QsaBufs<'_, Self>,
        (shape, qsa, bk): (&AttnShape, &QsaShape, BlockKeyWeights<'_>),
        out: &mut VkBuf,
    ) -> Result<(), VkError> {
        let mut host = self.read_all(&[x.k, x.v, x.iq, x.ik])?.into_iter();
        let mut next = || host.next().unwrap_or_default();
        let (kh, vh, iqh, ikh) = (next(), next(), next(), next());
        self.output(out, x.q.rows, shape.n_head * shape.head_dim)?;
        let ob = out.input("attend_qsa")?;
        let (di, iw) = (qsa.head_dim, qsa.n_head * qsa.head_dim);
        let mut lists = Vec::new();
        for s in seqs.iter_mut() {
            let host = s.kv.get_mut(layer).ok_or_else(|| VkError::Shape {
                op: "attend_qsa",
                what: format!("the session has no KV layer {layer}"),
            })?;
            for (t, row) in s.rows.clone().enumerate() {
                host.write_index_key(s.pos0 + t, &ikh[row * di..(row + 1) * di]);
            }
            let iq = &iqh[s.rows.start * iw..s.rows.end * iw];
            sparse_positions(iq, host, s.pos0, qsa, bk, &mut lists);
            let idx = if lists.iter().any(|l| !l.is_empty()) {
                let words = position_lists(&lists);
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let b = Buffer::new(&self.dev, bytes.len() as u64, Location::Device)?;
                self.record(|r| transfer::write(r, &b, &bytes))?;
                Some(b)
            } else {
                None
            };
            self.attend_seq(
                s,
                layer,
                (x.q, x.k, x.v),
                (&kh, &vh),
                shape,
                (ob, idx.as_ref()),
            )?;
        }
        Ok(())
    }
}
