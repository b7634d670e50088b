//! Bench results: medians with min/max over repetitions, one row per measured case, and the
//! report as JSON and as Markdown tables.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::measure::Measured;
use crate::machine::Machine;

/// Median, min and max of one metric over the repetitions.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Stat {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Stat {
    /// The statistics of `values` (all zero when empty).
    pub fn of(values: &[f64]) -> Stat {
        if values.is_empty() {
            return Stat::default();
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Stat {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }

    /// `median` alone, or `median (min–max)` when they differ; `prec` decimals.
    pub fn show(&self, prec: usize) -> String {
        if (self.max - self.min).abs() < 1e-9 {
            format!("{:.prec$}", self.median)
        } else {
            format!(
                "{:.prec$} ({:.prec$}–{:.prec$})",
                self.median, self.min, self.max
            )
        }
    }
}

/// One measured case over all repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// `decode`, `prefill`, `agent` or `depth`.
    pub section: String,
    /// Case name within the section (`pp 4096`, `turn 3`, `depth 16384`).
    pub label: String,
    /// Requested prompt size or depth in tokens (0 when not applicable).
    pub size: usize,
    /// Repetitions measured.
    pub reps: usize,
    /// Prompt tokens as the server counted them.
    pub prompt_tokens: Stat,
    /// Share of prompt tokens served from the server's cache (0–1).
    pub cached_share: Stat,
    /// Prompt tokens computed per second.
    pub prompt_tps: Stat,
    /// Generated tokens per second.
    pub decode_tps: Stat,
    /// Time to first token, milliseconds (client side).
    pub ttft_ms: Stat,
    /// Generated tokens.
    pub generated: Stat,
    /// Whether the speeds came from the server's `timings` (else from stream arrival times).
    pub server_timed: bool,
}

impl Row {
    /// Summarizes the repetitions `ms` of one case.
    pub fn new(section: &str, label: String, size: usize, ms: &[Measured]) -> Row {
        let s = |f: &dyn Fn(&Measured) -> f64| Stat::of(&ms.iter().map(f).collect::<Vec<_>>());
        Row {
            section: section.into(),
            label,
            size,
            reps: ms.len(),
            prompt_tokens: s(&|m| m.prompt_tokens as f64),
            cached_share: s(&|m| m.cached_tokens as f64 / (m.prompt_tokens.max(1)) as f64),
            prompt_tps: s(&|m| m.prompt_tps),
            decode_tps: s(&|m| m.decode_tps),
            ttft_ms: s(&|m| m.ttft.as_secs_f64() * 1e3),
            generated: s(&|m| m.generated as f64),
            server_timed: ms.iter().all(|m| m.server_timed),
        }
    }
}

/// A whole bench run, as written by `--json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Name of the server in tables (`--label`, default the server kind).
    pub label: String,
    /// `strata bench` version.
    pub tool_version: String,
    /// When it ran (UTC).
    pub date: String,
    /// Server base URL.
    pub url: String,
    /// What the server reported about itself.
    pub server: Value,
    /// The model file: path and size in bytes, when the path is readable here.
    pub model_file: Option<(String, u64)>,
    /// The machine.
    pub machine: Machine,
    /// The bench options.
    pub options: Value,
    /// Sizes that were clipped or skipped, and other remarks.
    pub notes: Vec<String>,
    /// Measured rows.
    pub rows: Vec<Row>,
    /// Cached share of all prompt tokens of the agent session, per repetition.
    pub agent_hit_rate: Option<Stat>,
}

impl Report {
    /// The report as Markdown: a header of settings and one table per section.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let srv = &self.server;
        let _ = writeln!(
            s,
            "### {} — `{}`\n",
            self.label,
            srv["model"].as_str().unwrap_or("?")
        );
        let _ = writeln!(
            s,
            "- date: {}; tool: strata bench {}",
            self.date, self.tool_version
        );
        let build = srv["build"]
            .as_str()
            .map(|b| format!(", build {b}"))
            .unwrap_or_default();
        let ctx = srv["n_ctx"]
            .as_u64()
            .map(|n| format!(", context {n}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "- server: {} at {}{build}{ctx}",
            srv["kind"].as_str().unwrap_or("?"),
            self.url
        );
        if let Some((p, size)) = &self.model_file {
            let _ = writeln!(
                s,
                "- model file: `{p}` ({:.1} MiB)",
                *size as f64 / (1 << 20) as f64
            );
        }
        let _ = writeln!(s, "- machine: {}", self.machine.line());
        for n in &self.notes {
            let _ = writeln!(s, "- note: {n}");
        }
        let timed = self.rows.iter().all(|r| r.server_timed);
        let _ = writeln!(
            s,
            "- speeds: {}; medians over the repetitions, (min–max) when they differ\n",
            if timed {
                "from the server's `timings`"
            } else {
                "from stream arrival times where the server sent no `timings`"
            }
        );
        let section = |s: &mut String, name: &str, header: &str, cells: &dyn Fn(&Row) -> String| {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.section == name).collect();
            if rows.is_empty() {
                return;
            }
            let _ = writeln!(s, "{header}");
            for r in rows {
                let _ = writeln!(s, "| {} | {} |", r.label, cells(r));
            }
            s.push('\n');
        };
        section(
            &mut s,
            "decode",
            "**Chat decode** (greedy, short prompt)\n\n| case | prompt tok | generated | decode tok/s | TTFT ms |\n|---|--:|--:|--:|--:|",
            &|r| format!("{} | {} | {} | {}", r.prompt_tokens.show(0), r.generated.show(0), r.decode_tps.show(1), r.ttft_ms.show(0)),
        );
        section(
            &mut s,
            "prefill",
            "**Prompt processing** (unique prompts, no cache)\n\n| case | prompt tok | prefill tok/s | TTFT ms |\n|---|--:|--:|--:|",
            &|r| format!("{} | {} | {}", r.prompt_tokens.show(0), r.prompt_tps.show(1), r.ttft_ms.show(0)),
        );
        section(
            &mut s,
            "agent",
            "**Agent session** (multi-turn with tool calls; each turn resends the conversation)\n\n| turn | prompt tok | cached share | prefill tok/s (new) | decode tok/s | TTFT ms |\n|---|--:|--:|--:|--:|--:|",
            &|r| {
                let pct = Stat { median: r.cached_share.median * 100.0, min: r.cached_share.min * 100.0, max: r.cached_share.max * 100.0 };
                format!("{} | {} % | {} | {} | {}", r.prompt_tokens.show(0), pct.show(1), r.prompt_tps.show(1), r.decode_tps.show(1), r.ttft_ms.show(0))
            },
        );
        if let Some(h) = &self.agent_hit_rate {
            let pct = Stat {
                median: h.median * 100.0,
                min: h.min * 100.0,
                max: h.max * 100.0,
            };
            let _ = writeln!(
                s,
                "Session cache hit rate: {} % of all prompt tokens.\n",
                pct.show(1)
            );
        }
        section(
            &mut s,
            "depth",
            "**Context depth** (fresh prompt of the given depth, then decode)\n\n| depth | prompt tok | prefill tok/s | decode tok/s |\n|---|--:|--:|--:|",
            &|r| format!("{} | {} | {}", r.prompt_tokens.show(0), r.prompt_tps.show(1), r.decode_tps.show(1)),
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Stat::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Stat::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Stat::of(&[]).median, 0.0);
        assert_eq!(Stat::of(&[5.0]).show(1), "5.0");
        assert_eq!(s.show(0), "2 (1–3)");
    }
}
