//! The decode roofline: how fast a token could possibly be decoded if every weight byte a
//! token needs were read from DRAM exactly once at the machine's measured read bandwidth.

use strata_gguf::GgufModel;

/// Weight bytes one decoded token reads from a GGUF: every tensor, except that the token
/// embedding contributes one row (not its table) unless it doubles as the LM head (no
/// `output.weight`), and routed-expert tensors (`*_exps`, ggml shape `[cols, rows, n_expert]`)
/// contribute `expert_used_count / expert_count` of their bytes.
pub fn bytes_per_token(model: &GgufModel) -> u64 {
    let used = model.arch_u64("expert_used_count");
    let tied = model.tensor("output.weight").is_none();
    model
        .tensors()
        .map(|t| {
            let bytes = t.info.size_bytes;
            if t.info.name == "token_embd.weight" && !tied {
                let rows = t.info.shape.get(1).copied().unwrap_or(1).max(1);
                bytes / rows
            } else if t.info.name.contains("_exps.") {
                let n_expert = t.info.shape.get(2).copied().unwrap_or(1).max(1);
                bytes / n_expert * used.unwrap_or(n_expert).min(n_expert)
            } else {
                bytes
            }
        })
        .sum()
}

/// Decode tok/s at the roofline: `gbs` (1e9 bytes/s) over `bytes` per token.
pub fn roofline_tps(gbs: f64, bytes: u64) -> f64 {
    gbs * 1e9 / bytes.max(1) as f64
}
