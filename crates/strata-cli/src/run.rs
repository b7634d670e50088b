//! `strata run`: complete one prompt.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use anyhow::Context;
use clap::Args;
use strata_engine::chat_template::{ChatMessage, RenderOptions};
use strata_engine::generate::generate;
use strata_engine::sampling::Sampler;

use crate::{ModelArgs, SamplingArgs};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt (raw text; see --chat).
    #[arg(short = 'p', long)]
    pub prompt: String,
    /// Tokens to generate at most.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    pub n_predict: usize,
    /// Wrap the prompt as one user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Loads the model, streams the completion to stdout, then prints speeds to stderr.
pub fn run(args: RunArgs, models_dir: &Path) -> anyhow::Result<()> {
    let model = crate::load_model(&args.model, models_dir)?;
    let tok = model.tokenizer();
    let prompt = if args.chat {
        let opts = RenderOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        let text = crate::chat::template_of(&model)
            .render(&[ChatMessage::new("user", args.prompt.clone())], &opts)?;
        tok.encode(&text, true, true)
    } else {
        tok.encode(&args.prompt, true, false)
    };
    let mut session = model.new_session(args.model.ctx, args.model.kv);
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
