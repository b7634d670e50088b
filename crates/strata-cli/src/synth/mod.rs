//! `strata synth`: write a GGUF model of a supported architecture with random weights, at a
//! named preset (`qwen3-30b-a3b`, …) or explicit dimensions, in any type strata-quant can
//! quantize — for measuring speed and memory at full scale without the real weights.
//!
//! The file is streamed (`GgufWriter::declare_tensor` + `TensorStream`): memory stays at a few
//! pools of encoded rows (see `rows.rs`) however large the file. It is written to `OUT.part`
//! and renamed when complete.

mod blocks;
mod rows;
mod spec;
mod tensors;
mod vocab;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use strata_gguf::GgufWriter;

use spec::{Spec, SynthArch};
use tensors::{Planned, TypeChoice};

/// Options of `strata synth`.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("base").required(true).args(["preset", "arch"])))]
pub struct SynthArgs {
    /// Named shape: qwen3-30b-a3b, qwen3-next-80b-a3b, qwen3.8-flash-next (qwen4exp),
    /// tiny-llama, tiny-qwen2, tiny-qwen3, tiny-gemma3, tiny-qwen3moe, tiny-qwen3next,
    /// tiny-qwen4exp. Dimension flags override it. `--layers N` keeps the pattern (every 4th
    /// layer attention) and qwen4exp's PLE layer 1 when N >= 2.
    #[arg(long)]
    pub preset: Option<String>,
    /// Architecture, starting from its tiny shape (instead of --preset).
    #[arg(long, value_enum)]
    pub arch: Option<SynthArch>,
    /// Output GGUF path.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Storage type of the weight matrices: one ggml type (f32, f16, bf16, q8_0, q4_0, q4_1,
    /// q5_0, q5_1, q2_k..q6_k, iq4_nl, iq4_xs, iq3_s, iq2_s, iq2_xxs, iq1_s) or one of
    /// llama-quantize's mixes q4_k_m, iq3_xxs, iq2_xs (each tensor the type llama.cpp's
    /// quantizer gives it). Norms, router and SSM parameters stay F32. Rows that are not whole
    /// blocks fall back as llama.cpp's quantizer does (q4_k: q5_0, i-quants: iq4_nl, ...; e.g.
    /// qwen4exp's 160-wide PLE table), else F16.
    #[arg(long = "type", default_value = "q8_0")]
    pub ty: String,
    /// Copy the tokenizer (every tokenizer.* key) from this GGUF or known model name
    /// (default: qwen2.5-coder-0.5b for qwen archs, smollm2-135m for llama, gemma3-270m for
    /// gemma3; for qwen3.8-flash-next a byte vocabulary of its 248,320 tokens). The vocabulary
    /// size follows it.
    #[arg(long, value_name = "MODEL")]
    pub vocab_from: Option<String>,
    /// Vocabulary size; without --vocab-from, a byte-level vocabulary of this size is made.
    #[arg(long, value_parser = crate::flags::synth_vocab)]
    pub vocab: Option<usize>,
    /// Decoder layers.
    #[arg(long, value_parser = crate::flags::synth_layers)]
    pub layers: Option<usize>,
    /// Residual width.
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub embd: Option<usize>,
    /// Query heads.
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub heads: Option<usize>,
    /// Key/value heads.
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub kv_heads: Option<usize>,
    /// Head width (default: embd / heads when either is given).
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub head_dim: Option<usize>,
    /// Dense FFN width.
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub ff: Option<usize>,
    /// Routed experts per layer (MoE archs).
    #[arg(long, value_parser = crate::flags::synth_experts)]
    pub experts: Option<usize>,
    /// Experts each token uses.
    #[arg(long, value_parser = crate::flags::synth_experts)]
    pub experts_used: Option<usize>,
    /// Hidden width of one routed expert.
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub expert_ff: Option<usize>,
    /// Hidden width of the shared expert (qwen3next).
    #[arg(long, value_parser = crate::flags::synth_dim)]
    pub shared_ff: Option<usize>,
    /// qwen4exp: rows of each PLE hash head start at the first primes >= this
    /// (`ngram_vocab_size_base`; 20000000 in the real model, whose table has 320 M rows);
    /// a small base makes a small table.
    #[arg(long, value_parser = crate::flags::synth_ple_base)]
    pub ple_vocab_base: Option<u64>,
    /// qwen4exp: write no MTP draft layer (the presets have one, `blk.<layers>.*`).
    #[arg(long)]
    pub no_mtp: bool,
    /// Training context written to the file.
    #[arg(long, value_parser = crate::flags::synth_ctx)]
    pub ctx: Option<usize>,
    /// Random seed: the same seed and shape give the same file.
    #[arg(long, default_value_t = 0x5EED)]
    pub seed: u64,
    /// Distinct encoded rows per (row length, type); rows beyond are reused, rotated.
    #[arg(long, default_value_t = 4096, value_parser = crate::flags::synth_dim)]
    pub pool_rows: usize,
    /// Plan only: print the summary and every tensor (name, type, shape, bytes) to stdout and
    /// write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replace OUTPUT if it exists.
    #[arg(long)]
    pub force: bool,
}

/// The spec named by the flags, before the vocabulary is known.
fn spec_of(a: &SynthArgs) -> Result<Spec> {
    let mut s = match (&a.preset, a.arch) {
        (Some(p), _) => Spec::preset(p)?,
        (None, Some(arch)) => Spec::tiny(arch),
        (None, None) => bail!("give --preset or --arch"),
    };
    let set = |dst: &mut usize, v: Option<usize>| {
        if let Some(v) = v {
            *dst = v;
        }
    };
    set(&mut s.n_layer, a.layers);
    set(&mut s.n_embd, a.embd);
    set(&mut s.n_head, a.heads);
    set(&mut s.n_head_kv, a.kv_heads);
    set(&mut s.n_ff, a.ff);
    set(&mut s.n_expert, a.experts);
    set(&mut s.n_expert_used, a.experts_used);
    set(&mut s.n_ff_exp, a.expert_ff);
    set(&mut s.n_ff_shexp, a.shared_ff);
    set(&mut s.n_ctx, a.ctx);
    if a.no_mtp {
        s.n_mtp = 0;
    }
    if let Some(p) = s.ple.as_mut() {
        if let Some(base) = a.ple_vocab_base {
            p.vocab_base = base;
        }
        // llama.cpp needs the PLE heads to make the width: a new width gets new rows.
        if let Some(e) = a.embd {
            p.row = e / p.n_heads();
        }
    }
    let head_dim = match a.head_dim {
        Some(h) => Some(h),
        None if a.embd.is_some() || a.heads.is_some() => Some(s.n_embd / s.n_head.max(1)),
        None => None,
    };
    if let Some(h) = head_dim {
        s.head_dim = h;
        // qwen3next and qwen4exp rotate a quarter of each head (partial_rotary_factor 0.25).
        s.n_rot = if s.arch.is_hybrid() { h / 4 } else { h };
        s.n_rot -= s.n_rot % 2;
    }
    if a.preset.is_some() && (a.layers.is_some() || a.embd.is_some() || a.ple_vocab_base.is_some())
    {
        s.name = format!("{}-custom", s.name);
    }
    Ok(s)
}

/// Writes the tokenizer keys and returns the vocabulary size.
/// A qwen4exp preset with a vocabulary size (the real shape: 248,320 tokens, which no
/// known model's tokenizer has) gets a byte vocabulary of that size by default.
fn tokenizer(a: &SynthArgs, spec: &Spec, models_dir: &Path, w: &mut GgufWriter) -> Result<usize> {
    let arch = spec.arch;
    let own = (arch == SynthArch::Qwen4exp && spec.n_vocab > 1).then_some(spec.n_vocab);
    let source = match (&a.vocab_from, a.vocab.or(own)) {
        (Some(src), _) => src.clone(),
        (None, Some(n)) => {
            vocab::write_bytes_vocab(n, w)?;
            return Ok(n);
        }
        (None, None) => vocab::default_source(arch).to_string(),
    };
    let path = crate::models::resolve_model(Some(&source), models_dir)?;
    let n = vocab::copy_from(&path, w)?;
    if let Some(v) = a.vocab.filter(|v| *v != n) {
        bail!(
            "--vocab {v} disagrees with the {n} tokens of {}",
            path.display()
        );
    }
    Ok(n)
}

/// Runs `strata synth`: plans the model, then streams it to `OUTPUT.part` with a progress bar
/// and renames it. Prints one summary line.
///
/// Errors: bad flags or shapes, an unreadable tokenizer source, I/O errors (naming the file).
/// Fails when the file system of `output` has less than `bytes` free (a file of a few hundred
/// GiB is easy to ask for and would fill the disk first).
fn check_disk(output: &Path, bytes: u64) -> Result<()> {
    let dir = match output.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(st) = rustix::fs::statvfs(&dir) else {
        return Ok(());
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    if bytes > free {
        bail!(
            "the file needs {:.1} GiB but {} has {:.1} GiB free; choose a smaller shape or a smaller --type (q4_k)",
            bytes as f64 / (1u64 << 30) as f64,
            dir.display(),
            free as f64 / (1u64 << 30) as f64
        );
    }
    Ok(())
}

pub fn run(a: SynthArgs, models_dir: &Path) -> Result<()> {
    let types = TypeChoice::parse(&a.ty)?;
    let mut spec = spec_of(&a)?;
    spec.validate()?;
    if a.output.exists() && !a.force && !a.dry_run {
        bail!("{} exists (use --force to replace it)", a.output.display());
    }
    let mut w = GgufWriter::new();
    // Architecture keys first, as llama.cpp's converter orders them.
    let preset_vocab = spec.n_vocab;
    spec.n_vocab = 1;
    spec.write_metadata(&mut w, types.file_type());
    spec.n_vocab = preset_vocab;
    spec.n_vocab = tokenizer(&a, &spec, models_dir, &mut w)?;
    spec.write_metadata(&mut w, types.file_type());
    spec.validate()?;
    // The engine reads the file's shape from this metadata and names its tensors.
    let cfg = strata_engine::config::ModelConfig::from_metadata(w.metadata())?;
    let plan = tensors::plan(&cfg, types)?;
    for t in &plan {
        w.declare_tensor(t.name.as_str(), t.ty, &t.shape)?;
    }
    let total: u64 = w.tensors().iter().map(|t| t.size_bytes).sum();
    let params: u64 = plan.iter().map(Planned::elements).sum();
    eprintln!(
        "synth: {} ({}), {} tensors, {:.3} B params, {:.2} GiB of {} → {}",
        spec.name,
        spec.arch.name(),
        plan.len(),
        params as f64 / 1e9,
        total as f64 / (1u64 << 30) as f64,
        a.ty.to_uppercase(),
        a.output.display()
    );

    if a.dry_run {
        for t in w.tensors() {
            let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
            println!(
                "{} {} [{}] {}",
                t.name,
                t.ggml_type,
                shape.join(", "),
                t.size_bytes
            );
        }
        println!(
            "total {} tensors, {params} params, {total} bytes",
            plan.len()
        );
        println!("bytes read per token: {}", per_token(&w, &spec));
        return Ok(());
    }
    if let Some(dir) = a.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    check_disk(&a.output, total)?;
    let part = PathBuf::from(format!("{}.part", a.output.display()));
    let start = Instant::now();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{bytes:>10}/{total_bytes} {bar:30} {bytes_per_sec:>12} eta {eta} {wide_msg}",
        )
        .expect("valid template"),
    );
    let written = write_tensors(&w, &plan, &part, a.seed, a.pool_rows, &bar);
    bar.finish_and_clear();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&part);
        return Err(e);
    }
    std::fs::rename(&part, &a.output)
        .with_context(|| format!("renaming {} to {}", part.display(), a.output.display()))?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "synth: wrote {} ({} bytes) in {secs:.1} s ({:.0} MB/s)",
        a.output.display(),
        std::fs::metadata(&a.output)?.len(),
        total as f64 / 1e6 / secs.max(1e-9)
    );
    Ok(())
}

/// Weight bytes one decoded token reads (as `strata inspect` counts them): every trunk
/// tensor, but one row of the embedding table, `n_expert_used` of the routed experts and one
/// row per PLE head of the n-gram table. The MTP layer (`blk.<n_layer>.*`) runs only when
/// drafting and is not counted.
fn per_token(w: &GgufWriter, spec: &Spec) -> u64 {
    let rows = |t: &strata_gguf::TensorInfo| (t.n_elements() / t.shape[0].max(1)).max(1);
    let mtp = format!("blk.{}.", spec.n_layer);
    w.tensors()
        .iter()
        .filter(|t| spec.n_mtp == 0 || !t.name.starts_with(&mtp))
        .map(|t| match t.name.as_str() {
            "token_embd.weight" => t.size_bytes / rows(t),
            "per_layer_token_embd.weight" => {
                let heads = spec.ple_layer().map_or(1, |p| p.n_heads() as u64);
                t.size_bytes / rows(t) * heads
            }
            n if n.contains("_exps.") => {
                let n_expert = t.shape.get(2).copied().unwrap_or(1).max(1);
                t.size_bytes / n_expert * (spec.n_expert_used as u64).min(n_expert)
            }
            _ => t.size_bytes,
        })
        .sum()
}

/// Streams the header and every planned tensor to `path`.
fn write_tensors(
    w: &GgufWriter,
    plan: &[Planned],
    path: &Path,
    seed: u64,
    pool_rows: usize,
    bar: &ProgressBar,
) -> Result<()> {
    // Pools are sized by the tallest tensor that draws from them.
    let mut max_rows: HashMap<(u64, strata_gguf::GgmlType), u64> = HashMap::new();
    for t in plan {
        let e = max_rows.entry((t.shape[0], t.ty)).or_default();
        *e = (*e).max(t.rows());
    }
    let mut stream = w.create(path)?;
    let mut source = rows::RowSource::new(seed, pool_rows);
    for t in plan {
        bar.set_message(t.name.clone());
        source.stream(t, max_rows[&(t.shape[0], t.ty)], 4 << 20, |chunk| {
            stream.write_chunk(chunk)?;
            bar.inc(chunk.len() as u64);
            Ok(())
        })?;
    }
    stream.finish()?;
    Ok(())
}
