//! QSA sparse attention: an indexer scores blocks of `ratio` cached tokens and a query attends
//! only to the best-scoring blocks (a budget of tokens) plus its incomplete last block
//! (`qwen4exp`; docs/qwen4exp.md, "QSA sparse attention").
//!
//! Keys `{arch}.attention.indexer.{head_count,key_length,top_k}` and
//! `{arch}.attention.compress_ratios` (llama.cpp `conversion/qwen4exp.py`; transformers
//! `Qwen4ExpTextConfig.indexer_n_heads`, `indexer_head_dim`, `indexer_budget`,
//! `indexer_compress_ratio`).

use strata_gguf::Metadata;

use crate::error::EngineError;

/// The indexer's shape, the token budget and each layer's block size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QsaConfig {
    /// Indexer query heads `ni` (`attention.indexer.head_count`); there is one key head.
    pub n_head: usize,
    /// Width `di` of an indexer head (`attention.indexer.key_length`).
    pub head_dim: usize,
    /// Tokens a query reads from whole blocks (`attention.indexer.top_k`): `budget / ratio`
    /// blocks, a multiple of every layer's ratio.
    pub budget: usize,
    /// Per layer: tokens per block `r`, 0 for dense attention (`attention.compress_ratios`);
    /// `n_layer + n_mtp` entries (the MTP layers' after the trunk's).
    pub ratios: Vec<usize>,
}

impl QsaConfig {
    /// Reads the indexer keys when the file has them (`None` otherwise: every attention layer
    /// is dense). `n_rot` is the attention's rotated width, which the indexer heads share;
    /// `n_mtp` MTP attention layers follow the trunk's `recurrent.len()` layers (a ratio the
    /// array lacks for them is 0).
    ///
    /// Errors: a missing or malformed key, a `compress_ratios` array shorter than the trunk or
    /// longer than `block_count`, a ratio on a layer without attention
    /// (`recurrent[il]`), a budget that is not a multiple of a ratio, rotated dims wider than an
    /// indexer head.
    pub fn from_metadata(
        meta: &Metadata,
        a: &str,
        recurrent: &[bool],
        n_rot: usize,
        n_mtp: usize,
    ) -> Result<Option<QsaConfig>, EngineError> {
        let key = |k: &str| format!("{a}.attention.{k}");
        let n_layer = recurrent.len();
        let Some(n_head) = meta.opt_u64(&key("indexer.head_count"))? else {
            return match meta.opt_i64_array(&key("compress_ratios"))? {
                Some(r) if r.iter().any(|v| *v != 0) => Err(EngineError::BadMetadata {
                    key: key("indexer.head_count"),
                    reason: "required when attention.compress_ratios has a non-zero ratio".into(),
                }),
                _ => Ok(None),
            };
        };
        let head_dim = meta.u64(&key("indexer.key_length"))? as usize;
        let budget = meta.u64(&key("indexer.top_k"))? as usize;
        let raw = meta
            .opt_i64_array(&key("compress_ratios"))?
            .unwrap_or_else(|| vec![0; n_layer]);
        let bad = |k: &str, reason: String| EngineError::BadMetadata {
            key: key(k),
            reason,
        };
        // One entry per block (`block_count`, MTP blocks included); an array may stop after
        // the trunk's `n_layer` (the MTP layers' ratios are then 0), but not run past the blocks.
        let n_blocks = (meta.u64(&format!("{a}.block_count"))? as usize).max(n_layer + n_mtp);
        if raw.len() < n_layer || raw.len() > n_blocks {
            let reason = format!(
                "{} entries for {n_layer} layers ({n_blocks} blocks)",
                raw.len()
            );
            return Err(bad("compress_ratios", reason));
        }
        let n_all = n_layer + n_mtp;
        let mut ratios = Vec::with_capacity(n_all);
        for il in 0..n_all {
            let r = raw.get(il).copied().unwrap_or(0);
            let r = usize::try_from(r)
                .map_err(|_| bad("compress_ratios", format!("layer {il}: ratio {r} < 0")))?;
            if r > 0 && recurrent.get(il).copied().unwrap_or(false) {
                let reason = format!("layer {il} has a ratio but no attention");
                return Err(bad("compress_ratios", reason));
            }
            if r > 0 && (budget == 0 || !budget.is_multiple_of(r)) {
                let reason =
                    format!("budget {budget} is not a positive multiple of layer {il}'s ratio {r}");
                return Err(bad("indexer.top_k", reason));
            }
            ratios.push(r);
        }
        if n_head == 0 || head_dim == 0 || n_rot > head_dim {
            let reason = format!("{n_head} heads of {head_dim} (RoPE on {n_rot} dims)");
            return Err(bad("indexer.key_length", reason));
        }
        Ok(Some(QsaConfig {
            n_head: n_head as usize,
            head_dim,
            budget,
            ratios,
        }))
    }

    /// Whether layer `il` attends sparsely.
    pub fn is_sparse(&self, il: usize) -> bool {
        self.ratios[il] > 0
    }
}
