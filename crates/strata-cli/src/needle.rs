//! `strata needle`: needle-in-a-haystack recall of any OpenAI-compatible server. For every
//! (length, depth) case a unique needle sentence goes into the shipped prose at that depth,
//! the model is asked for it greedily, and the case is found when the answer contains the
//! needle's number. Exits non-zero if any case is missed.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;

use crate::bench::parse_size;
use crate::http::{self, Client};

/// Options of `strata needle`.
#[derive(Args)]
pub struct NeedleArgs {
    /// Base URL of the server (with or without `/v1`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API key sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "STRATA_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Prompt lengths in tokens (k = 1024); lengths beyond the server's context are skipped.
    #[arg(long, value_delimiter = ',', value_parser = parse_size, default_value = "4k,16k,32k")]
    pub lengths: Vec<usize>,
    /// Needle depths in percent of the document (0 = start, 100 = end).
    #[arg(long, value_delimiter = ',', default_value = "10,50,90", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub depths: Vec<u32>,
    /// Seed of the needles' names and numbers (same seed, same cases).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the Markdown table to FILE (it is printed either way).
    #[arg(long, value_name = "FILE")]
    pub md: Option<PathBuf>,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 3600, value_parser = crate::flags::timeout_secs)]
    pub timeout: u64,
}

/// Tokens the answer may take.
const ANSWER_TOKENS: usize = 24;

const ADJECTIVES: [&str; 12] = [
    "amber", "silver", "crimson", "quiet", "northern", "hollow", "golden", "patient", "frozen",
    "copper", "distant", "velvet",
];
const NOUNS: [&str; 12] = [
    "falcon", "lantern", "orchard", "harbor", "violin", "glacier", "meadow", "compass", "tower",
    "river", "archive", "garden",
];

/// One case and its outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    /// Requested prompt length in tokens.
    pub length: usize,
    /// Depth of the needle in percent.
    pub depth: u32,
    /// Prompt tokens the server counted.
    pub prompt_tokens: usize,
    /// The number the answer must contain.
    pub expected: String,
    /// The model's answer.
    pub answer: String,
    /// Whether the answer contains the number.
    pub found: bool,
    /// Seconds the request took.
    pub seconds: f64,
}

/// Runs every case, prints the table and `X/Y found`; errors if any needle was missed.
pub fn run(args: NeedleArgs) -> Result<()> {
    let client = Client::new(
        &args.url,
        args.api_key.clone(),
        Duration::from_secs(args.timeout),
    )?;
    client.wait_ready(Duration::from_secs(120))?;
    let info = http::probe(&client)?;
    let n_ctx = info.n_ctx.unwrap_or(4096);
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    let fits = |l: usize| l + ANSWER_TOKENS + 8 <= n_ctx;
    let total = args.lengths.iter().filter(|l| fits(**l)).count() * args.depths.len();
    let progress = crate::progress::Progress::new(total, "needle");
    for &length in &args.lengths {
        if !fits(length) {
            skipped.push(length);
            continue;
        }
        progress.start(format!("{length} tokens: building the haystack"));
        let hay = haystack_of(&client, length)?;
        for &depth in &args.depths {
            progress.start(format!("{length} tokens, depth {depth} %"));
            let i = cases.len();
            let name = format!(
                "{} {}",
                ADJECTIVES[(i * 5 + 3) % 12],
                NOUNS[(i * 7 + 1) % 12]
            );
            let number = rng.gen_range(1_000_000..10_000_000u32).to_string();
            let case = ask(&client, &info.model, &hay, length, depth, &name, &number)?;
            progress.line(&format!(
                "  {length} tokens, depth {depth} %: {} ({:.1} s) — {:?}",
                if case.found { "found" } else { "MISSED" },
                case.seconds,
                case.answer
            ));
            cases.push(case);
        }
    }
    progress.finish();
    let found = cases.iter().filter(|c| c.found).count();
    let mut md = format!(
        "Needle in a haystack — `{}` ({}), context {n_ctx}\n\n",
        info.model, info.kind
    );
    md.push_str("| length | depth % | prompt tok | result | answer |\n|--:|--:|--:|---|---|\n");
    for c in &cases {
        let answer: String = c
            .answer
            .replace(['\n', '|'], " ")
            .chars()
            .take(60)
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            c.length,
            c.depth,
            c.prompt_tokens,
            if c.found { "found" } else { "missed" },
            answer.trim()
        );
    }
    let _ = writeln!(md, "\n{found}/{} found", cases.len());
    if !skipped.is_empty() {
        let list: Vec<String> = skipped.iter().map(|l| l.to_string()).collect();
        let _ = writeln!(
            md,
            "skipped (beyond the server's context of {n_ctx}): {}",
            list.join(", ")
        );
    }
    print!("{md}");
    if let Some(p) = &args.md {
        std::fs::write(p, &md).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.json {
        let v = json!({"server": info, "n_ctx": n_ctx, "found": found, "total": cases.len(),
            "skipped_lengths": skipped, "cases": cases, "date": crate::machine::utc_now()});
        std::fs::write(p, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if cases.is_empty() {
        bail!("no length fits the server's context of {n_ctx} tokens");
    }
    if found < cases.len() {
        bail!("{} of {} needles missed", cases.len() - found, cases.len());
    }
    Ok(())
}

/// Prose that, with the question and chat template around it, makes about `length` tokens.
fn haystack_of(client: &Client, length: usize) -> Result<String> {
    // Instructions, needle, question and template take roughly this many tokens.
    let target = length.saturating_sub(80).max(16);
    let text = crate::haystack::prose(target * 6 + 64);
    match client.tokenize(&text)? {
        Some(ids) if ids.len() > target => client.detokenize(&ids[..target]),
        Some(_) => Ok(text),
        None => Ok(text.chars().take(target * 4).collect()),
    }
}

/// `hay` with `needle` inserted at the first sentence end at or after `depth` percent.
pub fn insert_needle(hay: &str, depth: u32, needle: &str) -> String {
    let target = hay.len() * depth.min(100) as usize / 100;
    let at = if depth == 0 {
        0
    } else {
        hay.char_indices()
            .skip_while(|(i, _)| *i < target)
            .find(|(i, c)| *c == '.' && hay[i + 1..].starts_with(char::is_whitespace))
            .map_or(hay.len(), |(i, _)| i + 1)
    };
    let (head, tail) = hay.split_at(at);
    let sep = if head.is_empty() { "" } else { " " };
    let tail_sep = if tail.is_empty() || tail.starts_with(char::is_whitespace) {
        ""
    } else {
        " "
    };
    format!("{head}{sep}{needle}{tail_sep}{tail}")
}

fn ask(
    client: &Client,
    model: &str,
    hay: &str,
    length: usize,
    depth: u32,
    name: &str,
    number: &str,
) -> Result<Case> {
    let needle = format!("The secret code of the {name} is {number}.");
    let doc = insert_needle(hay, depth, &needle);
    let content = format!(
        "Below is a long document. Somewhere in it is a secret code.\n\n<document>\n{doc}\n</document>\n\n\
         What is the secret code of the {name}? Answer with the number only."
    );
    let body = json!({"model": model, "messages": [{"role": "user", "content": content}],
        "max_tokens": ANSWER_TOKENS, "temperature": 0.0, "chat_template_kwargs": {"enable_thinking": false}});
    let start = Instant::now();
    let v = client.post_json("/v1/chat/completions", &body)?;
    let msg = &v["choices"][0]["message"];
    let answer = msg["content"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or(msg["reasoning_content"].as_str())
        .unwrap_or("")
        .to_string();
    let digits: String = answer.chars().filter(char::is_ascii_digit).collect();
    Ok(Case {
        length,
        depth,
        prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as usize,
        expected: number.to_string(),
        found: digits.contains(number),
        answer,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needles_go_at_sentence_ends_near_the_depth() {
        let hay = "One. Two two. Three three three. Four.";
        assert_eq!(
            insert_needle(hay, 0, "N."),
            "N. One. Two two. Three three three. Four."
        );
        assert_eq!(
            insert_needle(hay, 50, "N."),
            "One. Two two. Three three three. N. Four."
        );
        assert_eq!(
            insert_needle(hay, 100, "N."),
            "One. Two two. Three three three. Four. N."
        );
        assert!(insert_needle(hay, 10, "N.").starts_with("One. N. Two two."));
    }
}
