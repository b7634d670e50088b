//! Command-line habits of llama.cpp and Ollama users, and value checks that name their range.
//!
//! clap reads `-ngl 99` as `-n gl 99` and `-cnv` as `-c nv`, so llama.cpp's multi-letter
//! single-dash flags are rewritten to their long names before parsing ([`normalize`]). Every
//! numeric flag is parsed by a function here so that a bad value gets one line that says
//! which values are allowed.

use std::ffi::OsString;

/// llama.cpp's multi-letter single-dash flags and the long names Strata gives them.
const LLAMA_CPP_FLAGS: [(&str, &str); 6] = [
    ("-ngl", "--gpu-layers"),
    ("-ub", "--ubatch"),
    ("-cnv", "--conversation"),
    ("-no-cnv", "--no-conversation"),
    ("-ctk", "--kv"),
    ("-ctv", "--kv"),
];

/// Rewrites llama.cpp's `-ngl N`, `-ngl=N`, `-cnv` (...) to Strata's long flags; everything
/// else is passed through unchanged (also everything after `--`).
pub fn normalize(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut verbatim = false;
    for a in args {
        if verbatim {
            out.push(a);
            continue;
        }
        let Some(s) = a.to_str() else {
            out.push(a);
            continue;
        };
        if s == "--" {
            verbatim = true;
            out.push(a);
            continue;
        }
        let (flag, value) = match s.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (s, None),
        };
        match LLAMA_CPP_FLAGS.iter().find(|(short, _)| *short == flag) {
            Some((_, long)) => out.push(OsString::from(match value {
                Some(v) => format!("{long}={v}"),
                None => long.to_string(),
            })),
            None => out.push(a),
        }
    }
    out
}

/// A float in `[lo, hi]` (named `what` in the message).
fn float_in(s: &str, lo: f32, hi: f32, what: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("{what} must be a number from {lo} to {hi}")),
    }
}

/// An integer in `[lo, hi]`.
fn int_in(s: &str, lo: u64, hi: u64, what: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("{what} must be a whole number from {lo} to {hi}")),
    }
}

/// `--temp`: 0 (greedy) to 100.
pub fn temperature(s: &str) -> Result<f32, String> {
    float_in(s, 0.0, 100.0, "the temperature (0 = greedy)")
}

/// `--top-p`, `--min-p`: a probability, 0 to 1.
pub fn probability(s: &str) -> Result<f32, String> {
    float_in(s, 0.0, 1.0, "a probability")
}

/// `--repeat-penalty`: above 0 (1 = off); llama.cpp's sensible range is 1 to 2.
pub fn repeat_penalty(s: &str) -> Result<f32, String> {
    match float_in(s, 0.0, 100.0, "the repeat penalty (1 = off)") {
        Ok(v) if v > 0.0 => Ok(v),
        _ => Err("the repeat penalty (1 = off) must be a number above 0, at most 100".into()),
    }
}

/// `--presence-penalty`, `--frequency-penalty`: -2 to 2, as in the OpenAI API.
pub fn penalty(s: &str) -> Result<f32, String> {
    float_in(s, -2.0, 2.0, "a penalty (0 = off)")
}

/// `--top-k`: 0 (all) to 1 000 000.
pub fn top_k(s: &str) -> Result<usize, String> {
    int_in(s, 0, 1_000_000, "top-k (0 = all tokens)").map(|v| v as usize)
}

/// `--repeat-last-n`: 0 to 1 000 000 tokens (-1, llama.cpp's "the whole context", is 1 000 000).
pub fn last_n(s: &str) -> Result<usize, String> {
    if s.trim() == "-1" {
        return Ok(1_000_000);
    }
    int_in(s, 0, 1_000_000, "--repeat-last-n (-1 = the whole context)").map(|v| v as usize)
}

/// The most CPU workers a pool may have (llama.cpp's `GGML_MAX_N_THREADS` is 512).
pub const MAX_WORKERS: u64 = 1024;

/// `-t/--pool-workers`: 0 (auto) to [`MAX_WORKERS`].
pub fn workers(s: &str) -> Result<usize, String> {
    int_in(s, 0, MAX_WORKERS, "the number of workers (0 = one per CPU)").map(|v| v as usize)
}

/// `--ctx`: 0 (the model's) to 2^32 tokens; whether it fits in memory is checked once the
/// model's shape is known ([`crate::memory`]).
pub fn ctx(s: &str) -> Result<usize, String> {
    int_in(s, 0, 1 << 32, "the context in tokens (0 = the model's)").map(|v| v as usize)
}

/// `--ubatch`: tokens per forward run, 1 to 8192 (llama.cpp's `-ub`).
pub fn ubatch(s: &str) -> Result<usize, String> {
    let max = strata_engine::model::MAX_UBATCH as u64;
    int_in(s, 1, max, "the micro-batch in tokens").map(|v| v as usize)
}

/// `-n/--n-predict`: a token count, or -1 (or -2, llama.cpp's "until the context is full") for
/// no limit: generation ends at the end of the text or when the context is full.
pub fn n_predict(s: &str) -> Result<usize, String> {
    match s.trim() {
        "-1" | "-2" => Ok(usize::MAX),
        t => match t.parse::<u64>() {
            Ok(v) => Ok(usize::try_from(v).unwrap_or(usize::MAX)),
            Err(_) => Err("tokens to generate must be a whole number, or -1 for no limit".into()),
        },
    }
}

/// `-ngl/--gpu-layers`: any layer count (llama.cpp scripts pass 99 or 999), or -1 for all.
pub fn gpu_layers(s: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if v >= -1 => Ok(v),
        _ => Err("GPU layers must be a whole number, or -1 for all".into()),
    }
}

/// Largest `--vram-budget`: 1 PiB (a bigger value is a typo, not a device).
pub const MAX_VRAM_BUDGET: u64 = 1 << 50;

/// `--vram-budget SIZE`: bytes, or a number with a suffix K, M, G, T (powers of 1024,
/// optionally followed by `B` or `iB`: `8G`, `512MiB`, `1.5GiB`), from 1 MiB to 1 PiB.
pub fn vram_budget(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "the VRAM budget must be a size from 1 MiB to 1 PiB: bytes, or a number with K, M, G or T (powers of 1024), e.g. 8G, 512M, 1.5GiB; got {s:?}"
        )
    };
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(bad()),
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let bytes = v * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < (1u64 << 20) as f64 || bytes > MAX_VRAM_BUDGET as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// `--max-body-mib`: 1 to 4096 MiB.
pub fn body_mib(s: &str) -> Result<usize, String> {
    int_in(s, 1, 4096, "the body limit in MiB").map(|v| v as usize)
}

/// `--timeout`: 1 second to 7 days.
pub fn timeout_secs(s: &str) -> Result<u64, String> {
    int_in(s, 1, 7 * 24 * 3600, "the timeout in seconds")
}

/// `-r/--reps`: 1 to 1000 repetitions.
pub fn reps(s: &str) -> Result<usize, String> {
    int_in(s, 1, 1000, "repetitions").map(|v| v as usize)
}

/// `strata synth` widths (`--embd`, `--ff`, `--heads`, ...): 1 to 1 048 576.
pub fn synth_dim(s: &str) -> Result<usize, String> {
    int_in(s, 1, 1 << 20, "a width").map(|v| v as usize)
}

/// `strata synth --layers`: 1 to 4096.
pub fn synth_layers(s: &str) -> Result<usize, String> {
    int_in(s, 1, 4096, "the layer count").map(|v| v as usize)
}

/// `strata synth --vocab`: 1 to 4 194 304 tokens.
pub fn synth_vocab(s: &str) -> Result<usize, String> {
    int_in(s, 1, 1 << 22, "the vocabulary size").map(|v| v as usize)
}

/// `strata synth --experts`, `--experts-used`: 1 to 65 536.
pub fn synth_experts(s: &str) -> Result<usize, String> {
    int_in(s, 1, 1 << 16, "the expert count").map(|v| v as usize)
}

/// `strata synth --ctx` (written to the file, not allocated): 1 to 2^32.
pub fn synth_ctx(s: &str) -> Result<usize, String> {
    int_in(s, 1, 1 << 32, "the training context").map(|v| v as usize)
}

/// `strata synth --ple-vocab-base` (qwen4exp's n-gram table rows per head): 2 to 200 000 000.
pub fn synth_ple_base(s: &str) -> Result<u64, String> {
    int_in(s, 2, 200_000_000, "the PLE vocabulary base")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn llama_cpp_flags_become_long_flags() {
        let got = normalize(strs(&[
            "strata", "run", "-ngl", "99", "-cnv", "-ngl=5", "-n", "4",
        ]));
        let want = strs(&[
            "strata",
            "run",
            "--gpu-layers",
            "99",
            "--conversation",
            "--gpu-layers=5",
            "-n",
            "4",
        ]);
        assert_eq!(got, want);
        let after = normalize(strs(&["strata", "run", "--", "-ngl"]));
        assert_eq!(after[3], "-ngl");
    }

    #[test]
    fn ranges_are_named_and_enforced() {
        assert!(temperature("-1").unwrap_err().contains("0 to 100"));
        assert_eq!(temperature("0").unwrap(), 0.0);
        assert!(probability("2").unwrap_err().contains("0 to 1"));
        assert!(probability("NaN").is_err());
        assert_eq!(penalty("-1.5").unwrap(), -1.5);
        assert!(repeat_penalty("0").is_err());
        assert_eq!(n_predict("-1").unwrap(), usize::MAX);
        assert!(n_predict("-3").is_err());
        assert!(workers("100000000").unwrap_err().contains("0 to 1024"));
        assert!(body_mib("0").is_err() && body_mib("99999999999").is_err());
        assert_eq!(gpu_layers("99").unwrap(), 99);
    }

    #[test]
    fn vram_budget_reads_sizes_in_powers_of_1024() {
        assert_eq!(vram_budget("8G").unwrap(), 8 << 30);
        assert_eq!(vram_budget("512M").unwrap(), 512 << 20);
        assert_eq!(vram_budget("512MiB").unwrap(), 512 << 20);
        assert_eq!(vram_budget("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(vram_budget("2gb").unwrap(), 2 << 30);
        assert_eq!(vram_budget(" 1T ").unwrap(), 1 << 40);
        assert_eq!(vram_budget("2048 K").unwrap(), 2 << 20);
        assert_eq!(vram_budget("1073741824").unwrap(), 1 << 30);
    }

    #[test]
    fn vram_budget_rejects_absurd_sizes() {
        for s in [
            "", "0", "-1G", "abc", "8X", "1.2.3G", "nanG", "infG", "1e9", "1K", "2048P", "2000T",
            "G",
        ] {
            let e = vram_budget(s).expect_err(s);
            assert!(e.contains("1 MiB to 1 PiB"), "{s}: {e}");
        }
    }
}
