//! QSA's token selection on its own, for a backend that attends elsewhere (a device): the
//! positions each query keeps, chosen exactly as [`super::qsa_attention`] chooses them.

use super::{select_kept, update_block_keys, BlockKeyWeights, QsaShape};
use crate::kv_cache::LayerKv;
use crate::pool;

/// The kept positions of the queries at `pos0 .. pos0 + T` (`T = iq.len() / (ni·di)`) into
/// `out` (`[T]` lists, resized): an empty list for a query that keeps every token before it
/// ([`QsaShape::is_dense_at`]: dense attention gives its output), else its kept positions
/// ascending — the best `budget / r` complete blocks by indexer score, then its tail.
/// Selected on the current pool ([`pool::with_current`]), in parallel as for the CPU's own
/// attention.
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
    let n_dense = qsa.n_dense(pos0, t_n);
    if n_dense == t_n {
        return;
    }
    update_block_keys(kv, (pos0 + t_n) / qsa.ratio, qsa, bk);
    let cache = kv
        .block_key_cache()
        .expect("a QSA layer caches indexer keys");
    let keys = &cache.keys;
    pool::with_current(|pool| select_kept(pool, iq, keys, pos0, n_dense, qsa, &mut out[n_dense..]));
}
