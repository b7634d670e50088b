//! `strata bench --compare A.json B.json …`: saved bench reports side by side — one line per
//! case and metric, the medians of every report and each report's ratio to the first.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::report::{Report, Row, Stat};

/// The metrics compared for a row of `section`: (name, value, higher is better).
fn metrics(r: &Row) -> Vec<(&'static str, f64)> {
    match r.section.as_str() {
        "decode" => vec![("decode tok/s", r.decode_tps.median)],
        "prefill" => vec![("prefill tok/s", r.prompt_tps.median)],
        "agent" => vec![
            ("cached share %", r.cached_share.median * 100.0),
            ("decode tok/s", r.decode_tps.median),
        ],
        _ => vec![
            ("prefill tok/s", r.prompt_tps.median),
            ("decode tok/s", r.decode_tps.median),
        ],
    }
}

/// Reads the reports and renders the comparison table as Markdown.
///
/// Errors: a file cannot be read or is not a `strata bench --json` report.
pub fn render(paths: &[PathBuf]) -> Result<String> {
    let reports = paths
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<Report>(&text)
                .with_context(|| format!("{} is not a strata bench report", p.display()))
        })
        .collect::<Result<Vec<Report>>>()?;
    let first = &reports[0];
    let mut s = String::new();
    for r in &reports {
        let build = r.server["build"]
            .as_str()
            .map(|b| format!(" {b}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "- **{}**: {}{build}, model `{}`, {} reps, {}",
            r.label,
            r.server["kind"].as_str().unwrap_or("?"),
            r.server["model"].as_str().unwrap_or("?"),
            r.rows.first().map_or(0, |x| x.reps),
            r.date
        );
    }
    let _ = writeln!(s, "- machine: {}\n", first.machine.line());
    let names: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
    let _ = write!(s, "| case | metric | {} |", names.join(" | "));
    for n in &names[1..] {
        let _ = write!(s, " {} / {n} |", names[0]);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "|---|---|{}{}",
        "--:|".repeat(names.len()),
        "--:|".repeat(names.len() - 1)
    );
    let mut line = |case: &str, metric: &str, values: Vec<Option<f64>>| {
        let cells: Vec<String> = values
            .iter()
            .map(|v| v.map_or("–".into(), |x| format!("{x:.1}")))
            .collect();
        let _ = write!(s, "| {case} | {metric} | {} |", cells.join(" | "));
        for v in &values[1..] {
            match (values[0], v) {
                (Some(a), Some(b)) if *b > 0.0 => {
                    let _ = write!(s, " {:.2} |", a / b);
                }
                _ => s.push_str(" – |"),
            }
        }
        s.push('\n');
    };
    for row in &first.rows {
        for (i, (metric, _)) in metrics(row).iter().enumerate() {
            let values = reports
                .iter()
                .map(|r| {
                    r.rows
                        .iter()
                        .find(|o| o.section == row.section && o.label == row.label)
                        .map(|o| metrics(o)[i].1)
                })
                .collect();
            let case = if row.section == "agent" {
                format!("agent {}", row.label)
            } else {
                row.label.clone()
            };
            line(&case, metric, values);
        }
    }
    if first.agent_hit_rate.is_some() {
        let values = reports
            .iter()
            .map(|r| r.agent_hit_rate.map(|h: Stat| h.median * 100.0))
            .collect();
        line("agent session", "cache hit rate %", values);
    }
    Ok(s)
}
