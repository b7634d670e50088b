//! QSA's token selection on its own, for a backend that attends elsewhere (a device): the
//! positions each query keeps, chosen exactly as [`super::qsa_attention`] chooses them.

use super::{kept_positions, update_block_keys, BlockKeyWeights, QsaShape, SCRATCH};
use crate::kv_cache::LayerKv;

/// The kept positions of the queries at `pos0 .. pos0 + T` (`T = iq.len() / (ni·di)`) into
/// `out` (`[T]` lists, resized): an empty list for a query that keeps every token before it
/// ([`QsaShape::is_dense_at`]: dense attention gives its output), else its kept positions
/// ascending — the best `budget / r` complete blocks by indexer score, then its tail.
///
/// `iq`: `[T][ni·di]` indexer queries (normed and rotated). The cache already holds the raw
/// indexer keys of those positions; its block keys are brought up to date as
/// [`super::qsa_attention`] does, so either path may follow the other.
pub fn sparse_positions(
    iq: &[f32],
    kv: &mut LayerKv,
    pos0: usize,
    qsa: &QsaShape,
    bk: BlockKeyWeights<'_>,
    out: &mut Vec<Vec<usize>>,
) {
    let iw = qsa.n_head * qsa.head_dim;
    let t_n = iq.len().checked_div(iw).unwrap_or(0);
    out.resize(t_n, Vec::new());
    out.iter_mut().for_each(Vec::clear);
    if (0..t_n).all(|t| qsa.is_dense_at(pos0 + t)) {
        return;
    }
    update_block_keys(kv, (pos0 + t_n) / qsa.ratio, qsa, bk);
    let cache = kv
        .block_key_cache()
        .expect("a QSA layer caches indexer keys");
    SCRATCH.with(|sc| {
        let sc = &mut *sc.borrow_mut();
        for (t, list) in out.iter_mut().enumerate() {
            let p = pos0 + t;
            if qsa.is_dense_at(p) {
                continue;
            }
            let nb = (p + 1) / qsa.ratio;
            let keys = &cache.keys[..nb * qsa.head_dim];
            kept_positions(&iq[t * iw..(t + 1) * iw], keys, p, qsa, sc, list, None);
        }
    });
}
