//! `strata list` (the known models and the GGUF files in the models directory) and
//! `strata show MODEL` (a model's short summary).

use std::path::Path;

use anyhow::Result;
use strata_gguf::GgufModel;

use crate::models::{cached_path, known_models};

/// Prints one row per known model (downloaded or not) and per other `.gguf` file in
/// `models_dir`: name, size, architecture, chat template, where it is.
pub fn list(models_dir: &Path) -> Result<()> {
    println!(
        "{:20} {:>9}  {:10} {:13} status",
        "NAME", "SIZE", "ARCH", "CHAT TEMPLATE"
    );
    let mut known_files = Vec::new();
    for m in known_models() {
        let path = cached_path(m, models_dir);
        known_files.push(path.clone());
        let cached = std::fs::metadata(&path).is_ok_and(|f| f.len() == m.size);
        let status = match cached {
            true => "downloaded".to_string(),
            false => format!("`strata pull {}` (or first use) downloads it", m.name),
        };
        println!(
            "{:20} {:>9}  {:10} {:13} {status}",
            m.name,
            mib(m.size),
            m.arch,
            yes_no(m.chat_template)
        );
    }
    let mut others: Vec<_> = std::fs::read_dir(models_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf") && !known_files.contains(p))
        .collect();
    others.sort();
    for p in others {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        match GgufModel::open(&p) {
            Ok(g) => {
                let md = g.metadata();
                let arch = md
                    .opt_str("general.architecture")
                    .ok()
                    .flatten()
                    .unwrap_or("?");
                let template = md.contains("tokenizer.chat_template");
                println!(
                    "{name:20} {:>9}  {arch:10} {:13} file in {}",
                    mib(g.size_bytes()),
                    yes_no(template),
                    models_dir.display()
                );
            }
            Err(e) => println!("{name:20} {:>9}  unreadable: {e}", "?"),
        }
    }
    println!("models directory: {}", models_dir.display());
    Ok(())
}

/// Prints the summary of MODEL (a path or a known name, pulled first if needed).
pub fn show(model: &str, models_dir: &Path) -> Result<()> {
    let path = crate::models::resolve_model(Some(model), models_dir)?;
    let g = GgufModel::open(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    println!("{}", path.display());
    crate::inspect::summary(&g, &mut std::io::stdout().lock())
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn yes_no(b: bool) -> &'static str {
    match b {
        true => "yes",
        false => "no (base)",
    }
}
