//! `strata run`: complete one prompt.

use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use strata_engine::chat_template::{ChatMessage, RenderOptions};
use strata_engine::generate::generate;
use strata_engine::sampling::Sampler;

use crate::{flags, ModelArgs, SamplingArgs};

#[derive(Args)]
pub struct RunArgs {
    /// MODEL then PROMPT, as `ollama run MODEL "prompt"`; with -m the words are the prompt.
    #[arg(value_name = "MODEL PROMPT")]
    pub words: Vec<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt (raw text; see --chat); `-` reads it from stdin.
    #[arg(short = 'p', long, allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// Read the prompt from FILE.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "prompt"
    )]
    pub file: Option<PathBuf>,
    /// Tokens to generate at most (-1 = until the end of the text or the context).
    #[arg(short = 'n', long = "n-predict", default_value_t = 128, value_parser = flags::n_predict)]
    pub n_predict: usize,
    /// Wrap the prompt as one user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// llama-cli's conversation mode: refused with a pointer to `strata chat`.
    #[arg(long, hide = true)]
    pub conversation: bool,
    /// llama-cli's opposite of -cnv: accepted (run never converses).
    #[arg(long, hide = true)]
    pub no_conversation: bool,
    /// Accepted for llama.cpp compatibility: the model's Jinja chat template is always used.
    #[arg(long)]
    pub jinja: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

impl RunArgs {
    /// Sorts out the positional words (`MODEL PROMPT…`), `-m`, `-p`, `-p -` and `-f`: returns
    /// the model argument and the prompt text.
    pub fn model_and_prompt(&mut self, stdin: &mut dyn Read) -> anyhow::Result<String> {
        if self.conversation {
            bail!("run completes one prompt; for a conversation use `strata chat` (-cnv is llama-cli's)");
        }
        let mut words = std::mem::take(&mut self.words).into_iter();
        if self.model.model.is_none() {
            self.model.model = words.next();
            if let Some(m) = &self.model.model {
                if m.contains(char::is_whitespace) && !Path::new(m).exists() {
                    bail!(
                        "{m:?} is not a model; the model comes first: `strata run MODEL \"PROMPT\"` (or `strata run -p \"PROMPT\"` for the default model)"
                    );
                }
            }
        }
        let rest: Vec<String> = words.collect();
        let given = [!rest.is_empty(), self.prompt.is_some(), self.file.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            bail!("give the prompt once: after the model, with -p, or with -f FILE");
        }
        if !rest.is_empty() {
            return Ok(rest.join(" "));
        }
        if let Some(f) = &self.file {
            return std::fs::read_to_string(f)
                .with_context(|| format!("reading the prompt from {}", f.display()));
        }
        match self.prompt.as_deref() {
            Some("-") => {
                let mut text = String::new();
                stdin
                    .read_to_string(&mut text)
                    .context("reading the prompt from stdin")?;
                Ok(text)
            }
            Some(p) => Ok(p.to_string()),
            None => bail!(
                "no prompt: `strata run MODEL \"PROMPT\"`, -p PROMPT, -p - (stdin) or -f FILE; for a conversation use `strata chat`"
            ),
        }
    }
}

/// Loads the model, streams the completion to stdout, then prints speeds to stderr.
pub fn run(mut args: RunArgs, models_dir: &Path) -> anyhow::Result<()> {
    let text = args.model_and_prompt(&mut std::io::stdin())?;
    let model = crate::load_model(&args.model, models_dir)?;
    let tok = model.tokenizer();
    let prompt = if args.chat {
        let opts = RenderOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        let text =
            crate::chat::template_of(&model).render(&[ChatMessage::new("user", text)], &opts)?;
        tok.encode(&text, true, true)
    } else {
        tok.encode(&text, true, false)
    };
    if prompt.is_empty() {
        bail!("the prompt is empty");
    }
    let n_ctx = crate::memory::resolve_ctx(args.model.ctx, model.config());
    let mut session = model.new_session(n_ctx, args.model.kv);
    if prompt.len() >= session.n_ctx() {
        anyhow::bail!(
            "the prompt has {} tokens but the context holds {} (use --ctx)",
            prompt.len(),
            session.n_ctx()
        );
    }
    let mut sampler = Sampler::new(args.sampling.params());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let stats = generate(
        &model,
        &mut session,
        &prompt,
        args.n_predict,
        &mut sampler,
        |_, text| {
            if out
                .write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .is_err()
            {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        },
    )
    .context("generation failed")?;
    let _ = writeln!(out).and_then(|_| out.flush());
    if stats.finish == strata_engine::generate::FinishReason::ContextFull {
        eprintln!(
            "stopped: the context of {} tokens is full (use --ctx)",
            session.n_ctx()
        );
    }
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | decode: {} tokens, {:.1} tok/s",
        stats.prompt_tokens,
        stats.prompt_tps(),
        stats.generated_tokens,
        stats.decode_tps()
    );
    Ok(())
}
