//! `strata bench --local` on SmolLM2-135M: the llama-bench-style table (one row per test, the
//! model columns filled in) and the JSON report's fields. Speeds are not checked.

mod common;

use common::{run_strata, smollm2, temp_dir};

#[test]
fn local_bench_prints_a_row_per_test_and_saves_json() {
    let dir = temp_dir("bench-local");
    let json = dir.join("bench.json");
    let model = smollm2();
    let out = run_strata(&[
        "bench",
        "--local",
        "-m",
        model.to_str().unwrap(),
        "-p",
        "16,32",
        "-n",
        "4",
        "-r",
        "2",
        "-d",
        "0,8",
        "-t",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "| model | arch | type | size | params | backend | threads | test | t/s |"
    );
    let tests: Vec<&str> = lines[2..]
        .iter()
        .map(|l| l.split('|').nth(8).unwrap().trim())
        .collect();
    assert_eq!(
        tests,
        ["pp16", "pp32", "tg4", "pp16 @ d8", "pp32 @ d8", "tg4 @ d8"]
    );
    for l in &lines[2..] {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        assert_eq!(cells[1], "SmolLM2-135M-Instruct.Q4_1.gguf", "{l}");
        assert_eq!(cells[2], "llama", "{l}");
        assert_eq!(cells[3], "Q4_1", "{l}");
        assert!(
            cells[4].ends_with(" GiB") && cells[5].ends_with(" B"),
            "{l}"
        );
        assert_eq!(cells[7], "2", "{l}");
        let (mean, sd) = cells[9].split_once(" ± ").expect("mean ± sd");
        assert!(
            mean.parse::<f64>().unwrap() > 0.0 && sd.parse::<f64>().is_ok(),
            "{l}"
        );
    }
    assert!(stderr.contains("loaded in"), "{stderr}");
    // A dense model runs in pieces of 512 tokens (`default_ubatch`).
    assert!(stderr.contains("runs of 512 tokens"), "{stderr}");

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let m = &v["model"];
    assert!(m["model_filename"].as_str().unwrap().ends_with(".gguf"));
    assert_eq!(m["arch"], "llama");
    assert!(m["model_n_params"].as_u64().unwrap() > 100_000_000);
    assert!(m["model_size"].as_u64().unwrap() > 50_000_000);
    assert_eq!(m["n_threads"], 2);
    assert!(m["rss_after_load"].as_u64().unwrap() > 0);
    assert!(m["load_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["options"]["n_ubatch"], 512);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    let tg = &results[5];
    assert_eq!(tg["test"], "tg4 @ d8");
    assert_eq!(
        (tg["n_prompt"].as_u64(), tg["n_gen"].as_u64()),
        (Some(0), Some(4))
    );
    assert_eq!(tg["n_depth"], 8);
    assert_eq!(tg["samples_ts"].as_array().unwrap().len(), 2);
    assert_eq!(tg["samples_ns"].as_array().unwrap().len(), 2);
    assert!(tg["avg_ts"].as_f64().unwrap() > 0.0 && tg["stddev_ts"].as_f64().is_some());
    assert_eq!(v["options"]["reps"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `strata bench --local -m SmolLM2 -p P -n N -r 1 --json -` and returns the JSON report.
fn json_report(p: &str, n: &str) -> serde_json::Value {
    let model = smollm2();
    let out = run_strata(&[
        "bench",
        "--local",
        "-m",
        model.to_str().unwrap(),
        "-p",
        p,
        "-n",
        n,
        "-r",
        "1",
        "--json",
        "-",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `test` names of a report's results, in order.
fn test_names(v: &serde_json::Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["test"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn local_bench_json_to_stdout_replaces_the_table() {
    let v = json_report("8", "0");
    assert_eq!(test_names(&v), ["pp8"], "-n 0 skips the generation test");
    assert_eq!(v["results"][0]["stddev_ts"], 0.0);
}

#[test]
fn local_bench_p_0_skips_the_prompt_test_as_llama_bench() {
    assert_eq!(test_names(&json_report("0", "2")), ["tg2"]);
}
