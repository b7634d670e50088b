//! `strata chat`: an interactive conversation using the model's chat template. Each turn
//! reuses the cached prefix of the conversation and prefills only what is new.

use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::path::Path;

use clap::Args;
use strata_engine::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use strata_engine::generate::generate;
use strata_engine::sampling::Sampler;
use strata_engine::Model;

use crate::{ModelArgs, SamplingArgs};

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Tokens per answer at most.
    #[arg(short = 'n', long = "n-predict", default_value_t = 1024)]
    pub n_predict: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// The model's template, or the plain-text fallback for a model without one.
pub fn template_of(model: &Model) -> ChatTemplate {
    model.chat_template().cloned().unwrap_or_else(|| {
        tracing::warn!(
            "the model has no chat template (tokenizer.chat_template); using plain \"User:/Assistant:\" turns"
        );
        ChatTemplate::plain()
    })
}

/// Reads user lines from stdin until EOF or `/exit`; `/reset` starts over.
pub fn run(args: ChatArgs, models_dir: &Path) -> anyhow::Result<()> {
    let model = crate::load_model(&args.model, models_dir)?;
    let template = template_of(&model);
    let mut session = model.new_session(args.model.ctx, args.model.kv);
    let mut sampler = Sampler::new(args.sampling.params());
    let fresh = || -> Vec<ChatMessage> {
        args.system
            .iter()
            .map(|s| ChatMessage::new("system", s.clone()))
            .collect()
    };
    let mut messages = fresh();
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    eprintln!("strata chat — type a message; /reset starts over, /exit or Ctrl-D quits.");
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            eprintln!();
            break;
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" | "/bye" => break,
            "/reset" | "/clear" => {
                messages = fresh();
                continue;
            }
            // A lone word after a slash is a command, never a message (Ollama's habit).
            cmd if cmd.starts_with('/') && !cmd.contains(char::is_whitespace) => {
                eprintln!("commands: /reset (or /clear) starts over, /exit (or /quit, /bye) quits");
                continue;
            }
            _ => {}
        }
        messages.push(ChatMessage::new("user", line));
        let opts = RenderOptions {
            add_generation_prompt: true,
            ..Default::default()
        };
        let prompt = model
            .tokenizer()
            .encode(&template.render(&messages, &opts)?, true, true);
        if prompt.len() + 1 >= session.n_ctx() {
            eprintln!(
                "error: the conversation no longer fits the context ({} tokens); /reset",
                prompt.len()
            );
            messages.pop();
            continue;
        }
        let mut answer = String::new();
        let mut out = stdout.lock();
        let stats = generate(
            &model,
            &mut session,
            &prompt,
            args.n_predict,
            &mut sampler,
            |_, text| {
                answer.push_str(text);
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                ControlFlow::Continue(())
            },
        )?;
        let _ = writeln!(out);
        eprintln!(
            "[{} prompt tokens ({} cached), {:.1} tok/s decode]",
            stats.prompt_tokens,
            stats.cached_tokens,
            stats.decode_tps()
        );
        messages.push(ChatMessage::new("assistant", answer));
    }
    Ok(())
}
