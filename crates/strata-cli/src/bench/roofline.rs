//! The decode roofline: how fast a token could possibly be decoded if every weight byte a
//! token needs were read from DRAM exactly once at the machine's measured read bandwidth.

use strata_engine::config::ModelConfig;
use strata_gguf::GgufModel;

/// Weight bytes one decoded token reads from a GGUF: every tensor, except that the token
/// embedding contributes one row (not its table) unless it doubles as the LM head (no
/// `output.weight`), and routed-expert tensors (`*_exps`, ggml shape `[cols, rows, n_expert]`)
/// contribute `expert_used_count / expert_count` of their bytes. A qwen4exp n-gram table
/// (`per_layer_token_embd`) contributes the rows one token hashes to (one per PLE head).
/// MTP layers (`blk.N.*` for `N >= block_count − nextn_predict_layers`) run only when
/// drafting and are not counted.
pub fn bytes_per_token(model: &GgufModel) -> u64 {
    let used = model.arch_u64("expert_used_count");
    let tied = model.tensor("output.weight").is_none();
    let ple = ple_table(model);
    let trunk = trunk_layers(model);
    model
        .tensors()
        .filter(|t| layer_of(&t.info.name).is_none_or(|il| il < trunk))
        .map(|t| {
            let bytes = t.info.size_bytes;
            if t.info.name == "token_embd.weight" && !tied {
                let rows = t.info.shape.get(1).copied().unwrap_or(1).max(1);
                bytes / rows
            } else if let Some(p) = ple.filter(|_| t.info.name == PLE_TABLE) {
                p.heads * p.row_bytes
            } else if t.info.name.contains("_exps.") {
                let n_expert = t.info.shape.get(2).copied().unwrap_or(1).max(1);
                bytes / n_expert * used.unwrap_or(n_expert).min(n_expert)
            } else {
                bytes
            }
        })
        .sum()
}

/// Recurrent-state bytes one decoded token reads and writes back: per Gated DeltaNet layer
/// of the trunk, the delta-rule state (`n_v_heads × head_k_dim × head_v_dim` f32, 2 MiB in
/// Qwen3-Next) and the convolution's last `d_conv − 1` inputs (`conv_dim` f32 each), each
/// counted twice (read, then written). Too large to stay in cache between tokens while the
/// weights stream through it, it is DRAM traffic that [`bytes_per_token`] leaves out. 0 for
/// a model without recurrent layers.
pub fn state_bytes_per_token(cfg: &ModelConfig) -> u64 {
    let Some(s) = cfg.ssm.as_ref() else {
        return 0;
    };
    let layers = (0..cfg.n_layer).filter(|il| cfg.is_recurrent(*il)).count();
    let delta = s.n_v_heads * s.head_k_dim * s.head_v_dim;
    let conv = s.d_conv.saturating_sub(1) * s.conv_dim();
    (2 * layers * (delta + conv) * std::mem::size_of::<f32>()) as u64
}

/// Layers of the forward pass: `block_count` less the MTP layers that follow them
/// (`nextn_predict_layers`, as llama.cpp counts them).
pub fn trunk_layers(model: &GgufModel) -> usize {
    let all = model.arch_u64("block_count").unwrap_or(0);
    let mtp = model.arch_u64("nextn_predict_layers").unwrap_or(0);
    all.saturating_sub(mtp) as usize
}

/// The layer of a `blk.N.*` tensor name.
pub fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// qwen4exp's n-gram hash table (docs/qwen4exp.md, PLE).
pub const PLE_TABLE: &str = "per_layer_token_embd.weight";

/// The PLE table of a file: its rows, bytes per row and in all, and the heads (rows read per
/// token: `(ple.ngram_size - 1) * ple.heads_per_ngram`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PleTable {
    pub rows: u64,
    pub row_len: u64,
    pub row_bytes: u64,
    pub bytes: u64,
    pub heads: u64,
}

/// The file's PLE table, if it has one.
pub fn ple_table(model: &GgufModel) -> Option<PleTable> {
    let t = model.tensor(PLE_TABLE)?;
    let row_len = t.info.shape.first().copied().unwrap_or(1).max(1);
    let rows = (t.info.n_elements() / row_len).max(1);
    let ngram = model.arch_u64("ple.ngram_size").unwrap_or(2).max(2);
    let heads = (ngram - 1) * model.arch_u64("ple.heads_per_ngram").unwrap_or(1);
    Some(PleTable {
        rows,
        row_len,
        row_bytes: t.info.size_bytes / rows,
        bytes: t.info.size_bytes,
        heads,
    })
}

/// Decode tok/s at the roofline: `gbs` (1e9 bytes/s) over `bytes` per token.
pub fn roofline_tps(gbs: f64, bytes: u64) -> f64 {
    gbs * 1e9 / bytes.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The tiny Qwen3-Next checkpoint (`$STRATA_TINY_DIR` or `~/.cache/strata/tiny`, made by
    /// scripts/make_tiny_models.sh).
    fn tiny_qwen3next() -> PathBuf {
        let dir = match std::env::var_os("STRATA_TINY_DIR") {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/strata/tiny"),
        };
        dir.join("qwen3next-tiny/qwen3next-tiny-F32.gguf")
    }

    #[test]
    fn state_bytes_are_each_recurrent_layers_delta_and_conv_state_read_and_written() {
        let path = tiny_qwen3next();
        let model = GgufModel::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/make_tiny_models.sh)", path.display()));
        let cfg = ModelConfig::from_metadata(model.metadata()).unwrap();
        // From the tensors instead of the metadata: a recurrent layer is one with a conv1d
        // weight (`[kernel, conv channels]`); `ssm_a` has one entry per value head and
        // `ssm_norm` is one value head wide (= the key head width in Qwen3-Next).
        let mut want = 0u64;
        for il in 0..cfg.n_layer {
            let Some(conv) = model.tensor(&format!("blk.{il}.ssm_conv1d.weight")) else {
                continue;
            };
            let (kernel, channels) = (conv.info.shape[0], conv.info.shape[1]);
            let heads = model.tensor(&format!("blk.{il}.ssm_a")).unwrap().info.shape[0];
            let d = model
                .tensor(&format!("blk.{il}.ssm_norm.weight"))
                .unwrap()
                .info
                .shape[0];
            want += 2 * 4 * (heads * d * d + (kernel - 1) * channels);
        }
        assert!(want > 0, "the tiny model has recurrent layers");
        assert_eq!(state_bytes_per_token(&cfg), want);
    }
}
