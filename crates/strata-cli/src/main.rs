//! The `strata` command: run, chat, list, show, inspect, pull, serve, bench, needle, quality,
//! synth.

mod bench;
mod chat;
mod devices;
mod flags;
mod gpu;
mod haystack;
mod http;
mod inspect;
mod list;
mod logging;
mod machine;
mod memory;
mod models;
mod needle;
mod oom;
mod progress;
mod pull;
mod quality;
mod run;
mod serve;
mod synth;
mod topology;

/// An allocation that fails ends the process with one line, never an abort.
#[global_allocator]
static ALLOC: oom::ExitOnOom = oom::ExitOnOom;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use strata_engine::sampling::SamplingParams;
use strata_engine::KvType;

/// Strata: run mixture-of-experts and dense LLMs from GGUF files.
#[derive(Parser)]
#[command(name = "strata", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Where known models are cached (default ~/.cache/strata/models).
    #[arg(long, global = true, env = "STRATA_MODELS_DIR", hide_env_values = true)]
    models_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Complete a prompt and stream the text, then print prompt and decode speed
    /// (`strata run MODEL "prompt"`, or -m MODEL -p PROMPT).
    #[command(allow_negative_numbers = true)]
    Run(run::RunArgs),
    /// Interactive chat using the model's chat template.
    #[command(allow_negative_numbers = true, after_help = chat::SLASH_HELP)]
    Chat(chat::ChatArgs),
    /// List the known models and the GGUF files in the models directory: size, architecture,
    /// chat template, whether it is downloaded.
    #[command(visible_alias = "ls")]
    List,
    /// Print a short summary of a model: architecture, size, type, context, chat template.
    Show {
        /// A GGUF path or a known model name.
        model: String,
    },
    /// Print a GGUF file's summary, metadata and tensor table.
    Inspect {
        /// A GGUF path or a known model name.
        model: String,
    },
    /// Download a known model into the cache (names: smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b).
    Pull {
        /// Known model name.
        name: String,
    },
    /// Serve the model over the OpenAI and Anthropic HTTP APIs.
    #[command(allow_negative_numbers = true)]
    Serve(serve::ServeArgs),
    /// Measure a running OpenAI-compatible server: decode, prefill, agent cache hits, depth.
    Bench(bench::BenchArgs),
    /// Needle-in-a-haystack recall of a running OpenAI-compatible server.
    Needle(needle::NeedleArgs),
    /// Teacher-forced logits against llama.cpp or another GGUF: KL, top token, perplexity.
    Quality(quality::QualityArgs),
    /// Write a GGUF of a supported architecture with random weights (presets or explicit dims).
    Synth(synth::SynthArgs),
    /// Print the CPU topology (sockets, NUMA, SMT, hybrid core classes, L3) and the pool workers chosen.
    Topology(topology::TopologyArgs),
    /// List the Vulkan GPUs: index, name, type, memory, subgroup size and shader features.
    Devices,
}

/// Options shared by commands that run a model.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// GGUF path or known model name (default: smollm2-135m).
    #[arg(short = 'm', long)]
    pub model: Option<String>,
    /// Context size in tokens (0 = the model's training context, capped at 8192).
    #[arg(short = 'c', long = "ctx", default_value_t = 4096, value_parser = flags::ctx)]
    pub ctx: usize,
    /// KV cache type: f16 or f32.
    #[arg(long, default_value = "f16")]
    pub kv: KvType,
    /// Most tokens per forward run (llama.cpp's -ub): a longer prompt runs in pieces of this
    /// size, which bounds the activation memory; results do not depend on it. Default: 512,
    /// or 2048 for MoE models whose 512-token runs give each expert few tokens (Qwen3-Next,
    /// qwen4exp: larger runs prefill long prompts faster) when run on the CPU and where it
    /// fits in the free memory.
    #[arg(long, value_parser = flags::ubatch)]
    pub ubatch: Option<usize>,
    /// Layers to offload to the GPU (llama.cpp's -ngl). With the `vulkan` feature, the model's
    /// LAST N layers (dense llama/qwen2/qwen3/gemma3, qwen3moe, qwen3next, qwen4exp) and its
    /// LM head run on the Vulkan device, the embedding and the first layers on the CPU; N ≥
    /// the layer count (or -1) runs everything on the device. Fewer layers are placed if
    /// --vram-budget runs out. Without the feature the value is accepted and ignored, with a
    /// notice.
    #[arg(long = "gpu-layers", visible_alias = "n-gpu-layers", value_name = "N",
          allow_negative_numbers = true, value_parser = flags::gpu_layers)]
    pub gpu_layers: Option<i64>,
    /// Most bytes of weights and KV cache (at --ctx) that -ngl may place on the GPU, e.g.
    /// 8G, 512M, 1.5GiB (powers of 1024) or plain bytes. Default: the device's free memory
    /// (VK_EXT_memory_budget, else its device-local heap size) minus 10 % or 512 MiB,
    /// whichever is larger.
    #[arg(long = "vram-budget", value_name = "SIZE", value_parser = flags::vram_budget)]
    pub vram_budget: Option<u64>,
    /// The GPU that -ngl uses: an index of `strata devices`.
    #[arg(long = "device", value_name = "N", default_value_t = 0)]
    pub device: usize,
    #[command(flatten)]
    pub pool: PoolArgs,
}

/// The CPU worker pool's size and placement (`run`, `chat`, `serve`, `bench --local`, `quality`).
#[derive(Args, Clone, Copy)]
pub struct PoolArgs {
    /// CPU pool workers, the calling thread included (0 = one per CPU that --pool-affinity
    /// chooses). `-t/--threads` is an alias, as in llama.cpp.
    #[arg(
        short = 't',
        long = "pool-workers",
        visible_alias = "threads",
        default_value_t = 0,
        value_parser = flags::workers
    )]
    pub pool_workers: usize,
    /// CPUs the pool pins its workers to: auto (one per physical core of the fastest class),
    /// p-cores (those cores with their SMT siblings), all, or measure (time each core class
    /// and SMT, then choose; see `strata topology`).
    #[arg(long, default_value = "auto")]
    pub pool_affinity: strata_engine::topology::Affinity,
}

/// Sampling flags (llama.cpp names and defaults).
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Temperature, 0 to 100; 0 = greedy.
    #[arg(long = "temp", default_value_t = 0.8, value_parser = flags::temperature)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40, value_parser = flags::top_k)]
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest set of tokens whose probability reaches P, 0 to 1
    /// (1 = off).
    #[arg(long, default_value_t = 0.95, value_parser = flags::probability)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one, 0 to 1 (0 = off).
    #[arg(long, default_value_t = 0.05, value_parser = flags::probability)]
    pub min_p: f32,
    /// Penalise recently seen tokens: positive logits divided by R, negative multiplied (1 = off).
    #[arg(long, default_value_t = 1.0, value_parser = flags::repeat_penalty)]
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at (0 = none, -1 = all).
    #[arg(long, default_value_t = 64, value_parser = flags::last_n)]
    pub repeat_last_n: usize,
    /// Subtract P from the logit of every token already seen, -2 to 2 (0 = off).
    #[arg(long, default_value_t = 0.0, value_parser = flags::penalty)]
    pub presence_penalty: f32,
    /// Subtract F times its count from the logit of every token already seen, -2 to 2 (0 = off).
    #[arg(long, default_value_t = 0.0, value_parser = flags::penalty)]
    pub frequency_penalty: f32,
    /// Random seed (same seed, same output).
    #[arg(short = 's', long, default_value_t = 0xC0FFEE)]
    pub seed: u64,
}

impl SamplingArgs {
    fn params(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            penalty_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}

fn main() -> ExitCode {
    // A panic is a bug, but the user still gets one line and exit code 1 (no backtrace,
    // whatever RUST_BACKTRACE says).
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        // `strata list | head`: println! panics once the reader is gone; that is no error.
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        eprintln!("error: internal error (please report): {msg}");
    }));
    let cli = match Cli::try_parse_from(flags::normalize(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    logging::init();
    let result = std::panic::catch_unwind(|| dispatch(cli));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
        Err(_) => ExitCode::from(1),
    }
}

/// True when `e` is a write to a closed pipe (`strata show M | head`): the reader has
/// what it wanted, so that is no failure.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Help and version go to stdout (exit 0); a usage error is one `error:` line (with clap's
/// tip, if any, on the same line) and exit code 1.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = e.print();
        return match e.kind() {
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => ExitCode::from(1),
            _ => ExitCode::SUCCESS,
        };
    }
    let text = e.render().to_string();
    let mut parts = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"));
    let first = parts.next().unwrap_or("error: invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let rest: Vec<&str> = parts.collect();
    match rest.is_empty() {
        true => eprintln!("error: {first}"),
        false => eprintln!("error: {first} ({})", rest.join("; ")),
    }
    ExitCode::from(1)
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    let models_dir = cli.models_dir.unwrap_or_else(models::default_models_dir);
    match cli.command {
        Command::Run(args) => run::run(args, &models_dir),
        Command::Chat(args) => chat::run(args, &models_dir),
        Command::Serve(args) => serve::run(args, &models_dir),
        Command::Bench(args) => bench::run(args, &models_dir),
        Command::Needle(args) => needle::run(args),
        Command::Quality(args) => quality::run(args, &models_dir),
        Command::Topology(args) => topology::run(args),
        Command::Synth(args) => synth::run(args, &models_dir),
        Command::Devices => devices::run(&mut std::io::stdout().lock()),
        Command::List => list::list(&models_dir),
        Command::Show { model } => list::show(&model, &models_dir),
        Command::Inspect { model } => {
            let path = models::resolve_model(Some(&model), &models_dir)?;
            let stdout = std::io::stdout();
            inspect::run(&path, &mut stdout.lock())
        }
        Command::Pull { name } => {
            let path = pull::pull(&name, &models_dir)?;
            println!("{}", path.display());
            Ok(())
        }
    }
}

/// Starts the process-wide CPU pool (first call only; it pins this thread and the workers)
/// and logs its shape.
pub fn start_pool(
    workers: usize,
    affinity: strata_engine::topology::Affinity,
) -> &'static strata_engine::pool::Pool {
    let plan = strata_engine::pool::plan(workers, affinity);
    let (pool, fresh) = strata_engine::pool::init_global(plan.options(true));
    if fresh {
        tracing::info!("pool: {plan}");
        let mut cpus = plan.cpus.clone();
        cpus.sort_unstable();
        cpus.dedup();
        if !cpus.is_empty() && plan.workers > cpus.len() {
            // Workers sharing a CPU wait on each other at every op barrier.
            tracing::warn!(
                "{} pool workers on {} CPUs: workers share CPUs and every op waits for the slowest; \
                 use -t 0 (one per CPU) for speed",
                plan.workers,
                cpus.len()
            );
        }
    }
    pool
}

/// Starts the worker pool, resolves and loads the model, and checks that a session of
/// `args.ctx` fits in the available memory (see [`memory::check_session`]).
pub fn load_model(
    args: &ModelArgs,
    models_dir: &std::path::Path,
) -> anyhow::Result<strata_engine::Model> {
    let path = models::resolve_model(args.model.as_deref(), models_dir)?;
    start_pool(args.pool.pool_workers, args.pool.pool_affinity);
    let mut model = strata_engine::Model::load(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(n) = args.ubatch {
        model.set_ubatch(n)?;
    }
    let n_ctx = memory::resolve_ctx(args.ctx, model.config());
    gpu::place(
        &mut model,
        args.gpu_layers,
        args.vram_budget,
        args.device,
        (n_ctx, args.kv),
    );
    let c = model.config();
    let small = strata_engine::model::UBATCH;
    if args.ubatch.is_none()
        && model.ubatch() > small
        && memory::check_session(c, n_ctx, args.kv, model.ubatch()).is_err()
    {
        // The larger MoE default (`default_ubatch`) only where it fits; the check below then
        // speaks for 512. (With a GPU the engine's default is 512 already.)
        model.set_ubatch(small)?;
    }
    memory::check_session(c, n_ctx, args.kv, model.ubatch())?;
    if args.ctx > c.n_ctx_train {
        tracing::warn!(
            "--ctx {} is larger than the {} tokens the model was trained on; quality may drop past {}",
            args.ctx,
            c.n_ctx_train,
            c.n_ctx_train
        );
    }
    tracing::info!(
        "loaded {} ({}, {} layers, width {}, vocab {})",
        path.display(),
        c.arch.name(),
        c.n_layer,
        c.n_embd,
        c.n_vocab
    );
    Ok(model)
}
