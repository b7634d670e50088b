//! `strata chat`: an interactive conversation using the model's chat template. Each turn
//! reuses the cached prefix of the conversation and prefills only what is new.

use std::io::{BufRead, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use rustyline::error::ReadlineError;
use strata_engine::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use strata_engine::generate::generate;
use strata_engine::sampling::Sampler;
use strata_engine::Model;

use crate::{ModelArgs, SamplingArgs};

#[derive(Args)]
pub struct ChatArgs {
    /// The model, as `ollama run MODEL` (same as -m).
    #[arg(value_name = "MODEL", conflicts_with = "model")]
    pub model_pos: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Tokens per answer at most (-1 = until the end of the answer or the context).
    #[arg(short = 'n', long = "n-predict", default_value_t = 1024, value_parser = crate::flags::n_predict)]
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

/// `strata chat --help` ends with these.
pub const SLASH_HELP: &str = "\
In the chat:
  /clear, /reset       forget the conversation (the system prompt stays)
  /bye, /exit, /quit   leave (Ctrl-D does too)
  /help, /?            list these commands
  Ctrl-C               stop the answer being written; the conversation goes on
  Up/Down              earlier lines (history is kept in ~/.cache/strata/chat_history)";

/// What the user typed at the prompt.
enum Input {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D or the end of stdin.
    End,
}

/// Reads lines with a line editor (history, arrow keys) on a terminal, plainly otherwise.
enum Reader {
    Editor(Box<rustyline::DefaultEditor>, Option<PathBuf>),
    Plain(std::io::Stdin),
}

impl Reader {
    fn new() -> Reader {
        let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if tty {
            if let Ok(mut ed) = rustyline::DefaultEditor::new() {
                let history = history_path();
                if let Some(h) = &history {
                    let _ = ed.load_history(h);
                }
                return Reader::Editor(Box::new(ed), history);
            }
        }
        Reader::Plain(std::io::stdin())
    }

    fn read(&mut self) -> anyhow::Result<Input> {
        match self {
            Reader::Editor(ed, _) => match ed.readline(">>> ") {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = ed.add_history_entry(line.as_str());
                    }
                    Ok(Input::Line(line))
                }
                Err(ReadlineError::Interrupted) => Ok(Input::Interrupted),
                Err(ReadlineError::Eof) => Ok(Input::End),
                Err(e) => Err(anyhow::anyhow!("reading the terminal: {e}")),
            },
            Reader::Plain(stdin) => {
                eprint!(">>> ");
                let mut line = String::new();
                match stdin.lock().read_line(&mut line)? {
                    0 => Ok(Input::End),
                    _ => Ok(Input::Line(line)),
                }
            }
        }
    }

    fn save(&mut self) {
        if let Reader::Editor(ed, Some(h)) = self {
            if let Some(dir) = h.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = ed.save_history(h);
        }
    }
}

/// `~/.cache/strata/chat_history`.
fn history_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache/strata/chat_history"))
}

/// Set while an answer is being written: Ctrl-C then stops the answer, not the program.
static GENERATING: AtomicBool = AtomicBool::new(false);
/// Set by Ctrl-C during an answer; the token callback sees it and stops.
static STOP: AtomicBool = AtomicBool::new(false);

/// Ctrl-C during an answer stops it; at any other time (loading, or a prompt read without
/// the line editor) it ends the program as usual. The line editor reads Ctrl-C as a key.
fn install_ctrl_c() {
    let _ = ctrlc::set_handler(|| {
        if GENERATING.load(Ordering::SeqCst) {
            STOP.store(true, Ordering::SeqCst);
        } else {
            eprintln!();
            std::process::exit(130);
        }
    });
}

/// Reads user lines until Ctrl-D, the end of stdin or `/bye`; `/clear` starts over.
pub fn run(mut args: ChatArgs, models_dir: &Path) -> anyhow::Result<()> {
    if let Some(m) = args.model_pos.take() {
        args.model.model = Some(m);
    }
    install_ctrl_c();
    let model = crate::load_model(&args.model, models_dir)?;
    let template = template_of(&model);
    let n_ctx = crate::memory::resolve_ctx(args.model.ctx, model.config());
    let mut session = model.new_session(n_ctx, args.model.kv);
    let mut sampler = Sampler::new(args.sampling.params());
    let fresh = || -> Vec<ChatMessage> {
        args.system
            .iter()
            .map(|s| ChatMessage::new("system", s.clone()))
            .collect()
    };
    let mut messages = fresh();
    let mut reader = Reader::new();
    let stdout = std::io::stdout();
    eprintln!("strata chat: type a message; /? lists commands, Ctrl-C stops an answer, Ctrl-D or /bye quits.");
    loop {
        let line = match reader.read()? {
            Input::Line(l) => l,
            Input::Interrupted => {
                eprintln!("Use Ctrl-D or /bye to exit.");
                continue;
            }
            Input::End => {
                eprintln!();
                break;
            }
        };
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" | "/bye" => break,
            "/reset" | "/clear" => {
                let turns = messages.iter().filter(|m| m.role == "user").count();
                messages = fresh();
                let kept = match args.system {
                    Some(_) => "; the system prompt stays",
                    None => "",
                };
                let plural = if turns == 1 { "" } else { "s" };
                eprintln!("Cleared the conversation ({turns} turn{plural} forgotten{kept}).");
                continue;
            }
            "/help" | "/?" => {
                eprintln!("{SLASH_HELP}");
                continue;
            }
            // A lone word after a slash is a command, never a message (Ollama's habit).
            cmd if cmd.starts_with('/') && !cmd.contains(char::is_whitespace) => {
                eprintln!("unknown command {cmd}; /? lists the commands");
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
                "error: the conversation no longer fits the context ({} tokens); /clear starts over",
                prompt.len()
            );
            messages.pop();
            continue;
        }
        let mut answer = String::new();
        let mut out = stdout.lock();
        STOP.store(false, Ordering::SeqCst);
        GENERATING.store(true, Ordering::SeqCst);
        let result = generate(
            &model,
            &mut session,
            &prompt,
            args.n_predict,
            &mut sampler,
            |_, text| {
                answer.push_str(text);
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                match STOP.load(Ordering::SeqCst) {
                    true => ControlFlow::Break(()),
                    false => ControlFlow::Continue(()),
                }
            },
        );
        GENERATING.store(false, Ordering::SeqCst);
        let stats = result?;
        let _ = writeln!(out);
        if STOP.swap(false, Ordering::SeqCst) {
            eprintln!("[stopped]");
        }
        eprintln!(
            "[{} prompt tokens ({} cached), {:.1} tok/s decode]",
            stats.prompt_tokens,
            stats.cached_tokens,
            stats.decode_tps()
        );
        // An answer cut short stays in the conversation, as in llama-cli and Ollama.
        messages.push(ChatMessage::new("assistant", answer));
    }
    reader.save();
    Ok(())
}
