//! `strata bench --local -m MODEL`: llama-bench's two tests run on the engine in this process,
//! no server in between.
//!
//! - `ppN`: a fresh session (after `depth` untimed tokens), one forward of N random tokens;
//!   speed = N / time.
//! - `tgN`: a fresh session (after `depth` untimed tokens), N decode steps of one token each,
//!   every step feeding the greedy argmax of the previous logits; speed = N / time.
//! - `tgN xS` (`--sequences S`): S fresh sessions decoding together, one token each per
//!   forward call (one pass over the weights for all S); speed = S·N / time.
//!
//! Each test runs `-r` times after an untimed warm-up (as llama-bench: the whole prompt of a pp
//! test, one token of a tg test); the table shows mean ± sample standard deviation of the
//! per-repetition tok/s, as llama-bench's `avg_ts ± stddev_ts`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use strata_engine::{Model, SeqInput, SeqOutput, Session, Want};

use crate::ModelArgs;

/// What to measure: prompt sizes, generation lengths, depths, repetitions.
pub struct Tests {
    pub n_prompt: Vec<usize>,
    pub n_gen: Vec<usize>,
    pub depths: Vec<usize>,
    pub reps: usize,
    /// Sequences decoded together in the tg test.
    pub sequences: usize,
    /// Seed of the random prompt tokens.
    pub seed: u64,
}

/// The model columns of the table (llama-bench: model, size, params, backend, threads).
#[derive(Clone, Debug, Serialize)]
pub struct ModelInfo {
    pub model_filename: String,
    pub arch: String,
    /// The ggml type holding most tensor bytes (`Q4_K`), as a name.
    pub model_type: String,
    /// Tensor bytes.
    pub model_size: u64,
    pub model_n_params: u64,
    /// Workers of the CPU pool (the calling thread included).
    pub n_threads: usize,
    /// Where the forward runs: `CPU (strata)`, or the device backend's name (`-ngl`).
    pub backend: String,
    pub load_ms: f64,
    /// Resident memory after load, in bytes (Linux `VmRSS`; 0 elsewhere).
    pub rss_after_load: u64,
}

/// One test over all repetitions (field names follow llama-bench's JSON output).
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// `pp512`, `tg128`, with ` @ d1024` at a depth.
    pub test: String,
    pub n_prompt: usize,
    pub n_gen: usize,
    pub n_depth: usize,
    /// Mean and sample standard deviation of tok/s.
    pub avg_ts: f64,
    pub stddev_ts: f64,
    pub samples_ts: Vec<f64>,
    /// Wall time of each repetition in nanoseconds.
    pub samples_ns: Vec<u64>,
}

/// Resident set size of this process in bytes (Linux), 0 when unknown.
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Mean and sample standard deviation.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Runs `strata bench --local`: prompt sizes from `-p/--pp` (default 512), generation length
/// from `-n/--decode-tokens` (0 skips it), `--depths`, `-r/--reps`. Prints the table (or, with
/// `--json -`, the JSON) to stdout and progress to stderr; `--json FILE` / `--md FILE` save.
///
/// Errors: the model cannot be loaded, a forward pass fails, a file cannot be written.
pub fn run(args: &super::BenchArgs, models_dir: &Path) -> Result<()> {
    let tests = Tests {
        n_prompt: args.pp.clone().unwrap_or_else(|| vec![512]),
        n_gen: vec![args.decode_tokens],
        depths: args.depths.clone(),
        reps: args.reps,
        sequences: args.sequences,
        seed: 0x5EED,
    };
    // Before the pool pins this thread, which narrows what the OS reports.
    let machine = crate::machine::Machine::current();
    let (model, info) = load(&args.model, models_dir)?;
    eprintln!(
        "bench --local: {} ({}, {}, {:.2} GiB, {:.2} B params), {} threads, runs of {} tokens, loaded in {:.0} ms, RSS after load {:.0} MiB",
        info.model_filename,
        info.arch,
        info.model_type,
        info.model_size as f64 / (1u64 << 30) as f64,
        info.model_n_params as f64 / 1e9,
        info.n_threads,
        model.ubatch(),
        info.load_ms,
        info.rss_after_load as f64 / (1u64 << 20) as f64
    );
    let results = run_tests(&model, &args.model, &tests)?;
    let mut md = table(&info, &results);
    let roofline = match args.roofline {
        true => {
            let r = Roofline::measure(&model, info.n_threads);
            md += &r.describe(&results);
            Some(r)
        }
        false => None,
    };
    let report = serde_json::json!({
        "tool_version": env!("CARGO_PKG_VERSION"),
        "date": crate::machine::utc_now(),
        "machine": machine,
        "model": info,
        "options": {"n_prompt": tests.n_prompt, "n_gen": tests.n_gen, "depths": tests.depths,
            "reps": tests.reps, "ctx": args.model.ctx, "kv": format!("{:?}", args.model.kv),
            "n_ubatch": model.ubatch()},
        "results": results,
        "roofline": roofline,
    });
    let text = serde_json::to_string_pretty(&report)?;
    match args.json.as_deref() {
        Some(p) if p == Path::new("-") => println!("{text}"),
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            print!("{md}");
        }
        None => print!("{md}"),
    }
    if let Some(p) = &args.md {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The decode roofline of this model on this machine (`--roofline`).
#[derive(Clone, Debug, Serialize)]
pub struct Roofline {
    /// Measured DRAM read bandwidth, 1e9 bytes per second, with the pool's worker count.
    pub mem_read_gbs: f64,
    /// Weight bytes one decoded token reads (see [`super::roofline::bytes_per_token`]).
    pub bytes_per_token: u64,
    /// `mem_read_gbs / bytes_per_token`, tok/s.
    pub roofline_tps: f64,
    /// Recurrent-state bytes one token reads and writes (see
    /// [`super::roofline::state_bytes_per_token`]); 0 without recurrent layers.
    pub state_bytes_per_token: u64,
    /// `mem_read_gbs / (bytes_per_token + state_bytes_per_token)`, tok/s.
    pub roofline_with_state_tps: f64,
}

impl Roofline {
    /// Measures the bandwidth (best of 5 passes over 1 GiB) with `threads` threads.
    pub fn measure(model: &Model, threads: usize) -> Roofline {
        eprintln!("  measuring DRAM read bandwidth ({threads} threads)…");
        let gbs = super::membw::read_bandwidth_gbs(threads, 5);
        let bytes = super::roofline::bytes_per_token(model.gguf());
        let state = super::roofline::state_bytes_per_token(model.config());
        Roofline {
            mem_read_gbs: gbs,
            bytes_per_token: bytes,
            roofline_tps: super::roofline::roofline_tps(gbs, bytes),
            state_bytes_per_token: state,
            roofline_with_state_tps: super::roofline::roofline_tps(gbs, bytes + state),
        }
    }

    /// Lines under the table: bandwidth, bytes per token, and each tg result's share.
    pub fn describe(&self, results: &[TestResult]) -> String {
        let mut s = format!(
            "\nDRAM read {:.1} GB/s, {:.1} MB of weights per token: roofline {:.1} tok/s\n",
            self.mem_read_gbs,
            self.bytes_per_token as f64 / 1e6,
            self.roofline_tps
        );
        if self.state_bytes_per_token > 0 {
            s += &format!(
                "with {:.1} MB of recurrent state read and written per token: roofline {:.1} tok/s\n",
                self.state_bytes_per_token as f64 / 1e6,
                self.roofline_with_state_tps
            );
        }
        for r in results.iter().filter(|r| r.n_gen > 0) {
            s += &format!(
                "{}: {:.0} % of the roofline",
                r.test,
                100.0 * r.avg_ts / self.roofline_tps
            );
            if self.state_bytes_per_token > 0 {
                s += &format!(
                    " ({:.0} % with the state)",
                    100.0 * r.avg_ts / self.roofline_with_state_tps
                );
            }
            s += "\n";
        }
        s
    }
}

/// Loads the model (timed) and describes it.
pub fn load(args: &ModelArgs, models_dir: &Path) -> Result<(Model, ModelInfo)> {
    let path = crate::models::resolve_model(args.model.as_deref(), models_dir)?;
    let start = Instant::now();
    let model = crate::load_model(args, models_dir)?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut by_type: std::collections::BTreeMap<&str, u64> = Default::default();
    let (mut size, mut params) = (0u64, 0u64);
    for t in model.gguf().tensors() {
        *by_type.entry(t.info.ggml_type.name()).or_default() += t.info.size_bytes;
        size += t.info.size_bytes;
        params += t.info.n_elements();
    }
    let model_type = by_type
        .iter()
        .max_by_key(|(_, b)| **b)
        .map_or("?", |(t, _)| t)
        .to_string();
    let info = ModelInfo {
        model_filename: path.display().to_string(),
        arch: model.config().arch.name().to_string(),
        model_type,
        model_size: size,
        model_n_params: params,
        n_threads: strata_engine::pool::current_workers(),
        backend: match model.device() {
            None => "CPU (strata)".to_string(),
            Some(d) if model.device_layers().start == 0 => d.name(),
            Some(d) => {
                let on = model.device_layers();
                format!(
                    "{} (layers {}..{}) + CPU (strata)",
                    d.name(),
                    on.start,
                    on.end
                )
            }
        },
        load_ms,
        rss_after_load: rss_bytes(),
    };
    Ok((model, info))
}

/// Deterministic pseudo-random token ids in `[0, n_vocab)`.
fn random_tokens(n: usize, n_vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n_vocab as u64) as u32
        })
        .collect()
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// A fresh session of `n_ctx` with `depth` random tokens already processed.
fn session_at(
    model: &Model,
    args: &ModelArgs,
    n_ctx: usize,
    depth: usize,
    seed: u64,
) -> Result<Session> {
    let mut s = model.new_session(n_ctx, args.kv);
    if depth > 0 {
        let toks = random_tokens(depth, model.config().n_vocab, seed ^ 0xD5);
        model.forward(&mut s, &toks).context("prefill to depth")?;
    }
    Ok(s)
}

/// Time of `n_gen` decode steps of `n_seq` sessions (each at `depth`, with its own first
/// token) fed together: one [`Model::forward_batch`] call per step.
fn decode_together(
    model: &Model,
    args: &ModelArgs,
    n_ctx: usize,
    depth: usize,
    seed: u64,
    n_gen: usize,
    n_seq: usize,
) -> Result<std::time::Duration> {
    let n_vocab = model.config().n_vocab;
    let mut sessions = (0..n_seq)
        .map(|i| session_at(model, args, n_ctx, depth, seed ^ (i as u64 + 1)))
        .collect::<Result<Vec<_>>>()?;
    let mut toks = random_tokens(n_seq, n_vocab, seed);
    let mut out = vec![SeqOutput::default(); n_seq];
    let start = Instant::now();
    for _ in 0..n_gen {
        let mut batch: Vec<SeqInput<'_>> = sessions
            .iter_mut()
            .zip(&toks)
            .map(|(s, t)| SeqInput {
                session: s,
                tokens: std::slice::from_ref(t),
                want: Want::Last,
                hidden: false,
            })
            .collect();
        model.forward_batch(&mut batch, &mut out)?;
        for (t, o) in toks.iter_mut().zip(&out) {
            *t = argmax(&o.logits);
        }
    }
    Ok(start.elapsed())
}

/// Runs every test (pp sizes and tg lengths at every depth) and returns one result each.
///
/// Errors: a forward pass failing (context overflow cannot happen: sessions are sized to
/// depth + test length).
pub fn run_tests(model: &Model, args: &ModelArgs, t: &Tests) -> Result<Vec<TestResult>> {
    let n_vocab = model.config().n_vocab;
    let depths = if t.depths.is_empty() {
        vec![0]
    } else {
        t.depths.clone()
    };
    let mut cases: Vec<(usize, usize, usize)> = Vec::new();
    for &d in &depths {
        cases.extend(t.n_prompt.iter().filter(|&&n| n > 0).map(|&n| (n, 0, d)));
        cases.extend(t.n_gen.iter().filter(|&&n| n > 0).map(|&n| (0, n, d)));
    }
    let largest = cases
        .iter()
        .map(|(p, g, d)| d.saturating_add(*p.max(g)).saturating_add(1))
        .max();
    if let Some(n) = largest {
        crate::memory::check_session_or(
            model.config(),
            n,
            args.kv,
            model.ubatch(),
            Some("try smaller -p, -n or -d"),
        )?;
    }
    let mut out = Vec::new();
    let progress = crate::progress::Progress::new(cases.len(), "bench");
    for (n_prompt, n_gen, depth) in cases {
        progress.start(match n_prompt {
            0 => format!("tg{n_gen} at depth {depth}"),
            n => format!("pp{n} at depth {depth}"),
        });
        let n_ctx = depth.saturating_add(n_prompt.max(n_gen)).saturating_add(1);
        let (mut ts, mut ns) = (Vec::new(), Vec::new());
        // Untimed warm-up as llama-bench does it: the whole prompt of a pp test (which pages in
        // every expert a batch routes to), one token of a tg test.
        let mut s = session_at(model, args, n_ctx, depth, t.seed ^ 0x3A)?;
        model.forward(
            &mut s,
            &random_tokens(n_prompt.max(1), n_vocab, t.seed ^ 0x3B),
        )?;
        for rep in 0..t.reps.max(1) {
            let seed = t.seed.wrapping_add(rep as u64 * 7919);
            let mut s = session_at(model, args, n_ctx, depth, seed)?;
            let prompt = random_tokens(n_prompt.max(1), n_vocab, seed);
            if n_gen > 0 && t.sequences > 1 {
                let el = decode_together(model, args, n_ctx, depth, seed, n_gen, t.sequences)?;
                ns.push(el.as_nanos() as u64);
                ts.push((n_gen * t.sequences) as f64 / el.as_secs_f64());
                continue;
            }
            let start = Instant::now();
            if n_prompt > 0 {
                model.forward(&mut s, &prompt)?;
            } else {
                let mut tok = prompt[0];
                for _ in 0..n_gen {
                    tok = argmax(model.forward(&mut s, &[tok])?);
                }
            }
            let el = start.elapsed();
            ns.push(el.as_nanos() as u64);
            ts.push((n_prompt + n_gen) as f64 / el.as_secs_f64());
        }
        let (avg_ts, stddev_ts) = mean_sd(&ts);
        let name = match (n_prompt, t.sequences) {
            (0, 1) => format!("tg{n_gen}"),
            (0, n) => format!("tg{n_gen} x{n}"),
            _ => format!("pp{n_prompt}"),
        };
        let test = if depth > 0 {
            format!("{name} @ d{depth}")
        } else {
            name
        };
        progress.line(&format!("  {test}: {avg_ts:.2} ± {stddev_ts:.2} tok/s"));
        out.push(TestResult {
            test,
            n_prompt,
            n_gen,
            n_depth: depth,
            avg_ts,
            stddev_ts,
            samples_ts: ts,
            samples_ns: ns,
        });
    }
    progress.finish();
    Ok(out)
}

/// The llama-bench-style Markdown table: model, arch, type, size, params, backend, threads,
/// test, t/s.
pub fn table(info: &ModelInfo, results: &[TestResult]) -> String {
    let name = Path::new(&info.model_filename)
        .file_name()
        .map_or(info.model_filename.clone(), |n| {
            n.to_string_lossy().into_owned()
        });
    let mut s = String::from(
        "| model | arch | type | size | params | backend | threads | test | t/s |\n\
         | --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |\n",
    );
    for r in results {
        s += &format!(
            "| {name} | {} | {} | {:.2} GiB | {:.2} B | {} | {} | {} | {:.2} ± {:.2} |\n",
            info.arch,
            info.model_type,
            info.model_size as f64 / (1u64 << 30) as f64,
            info.model_n_params as f64 / 1e9,
            info.backend,
            info.n_threads,
            r.test,
            r.avg_ts,
            r.stddev_ts
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        assert!((sd - 2.138_089_935).abs() < 1e-6);
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
    }

    #[test]
    fn random_tokens_stay_in_the_vocabulary() {
        let t = random_tokens(1000, 17, 5);
        assert!(t.iter().all(|&x| x < 17));
        assert_eq!(t, random_tokens(1000, 17, 5));
    }
}
