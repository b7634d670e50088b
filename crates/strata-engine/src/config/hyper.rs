//! Hyper-connections: the residual stream is `n_streams` parallel copies of the hidden state,
//! read and written through low-rank gated maps instead of a plain residual add (`qwen4exp`).
//!
//! Keys `{arch}.hyper_connection.count` and `{arch}.hyper_connection.low_rank` (llama.cpp
//! `conversion/qwen4exp.py`, `set_gguf_parameters`; transformers `Qwen4ExpTextConfig.hc_count`,
//! `hc_lowrank`).

use strata_gguf::Metadata;

use crate::error::EngineError;

/// Stream count and rank of the hyper-connection maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HyperConfig {
    /// Parallel residual streams `hc` (4 in Qwen3.8-Flash-Next): a residual row is
    /// `hc · n_embd` wide, stream-major.
    pub n_streams: usize,
    /// Width of the low-rank gate map (`hc_*_down`: `hc·n_embd → rank`).
    pub rank: usize,
}

impl HyperConfig {
    /// Reads both keys.
    ///
    /// Errors: a missing key, or a count or rank of 0.
    pub fn from_metadata(meta: &Metadata, a: &str) -> Result<HyperConfig, EngineError> {
        let count_key = format!("{a}.hyper_connection.count");
        let rank_key = format!("{a}.hyper_connection.low_rank");
        let n_streams = meta.u64(&count_key)? as usize;
        let rank = meta.u64(&rank_key)? as usize;
        for (key, v) in [(count_key, n_streams), (rank_key, rank)] {
            if v == 0 {
                return Err(EngineError::BadMetadata {
                    key,
                    reason: "must be at least 1".into(),
                });
            }
        }
        Ok(HyperConfig { n_streams, rank })
    }
}
