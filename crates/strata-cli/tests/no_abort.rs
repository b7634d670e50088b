//! No abort, ever: absurd values of every size flag end with exit code 1 and one `error:`
//! line on stderr, never a signal (an allocation failure aborts with SIGABRT), a backtrace
//! or a hang. The model is SmolLM2-135M (`strata pull smollm2-135m`; missing, the tests fail).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `strata ARGS` with stdin closed and RUST_BACKTRACE=1 (a panic must still print one
/// line), killing it after `limit`.
fn strata_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("STRATA_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strata starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "strata {args:?} still ran after {limit:?}:\n{}",
                common::text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Exit code 1 (not a signal), exactly one `error:` line, no backtrace, and the line contains
/// `want`.
fn assert_one_error(args: &[&str], want: &str) {
    let out = strata_within(args, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "strata {args:?} ended with {:?}:\n{}",
        out.status,
        common::text(&out)
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "strata {args:?}:\n{stderr}");
    assert!(
        errors[0].contains(want),
        "strata {args:?}: {:?} lacks {want:?}",
        errors[0]
    );
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn model() -> String {
    common::smollm2().display().to_string()
}

#[test]
fn absurd_context_sizes_say_what_they_need_and_what_to_try() {
    let m = model();
    for cmd in ["run", "chat"] {
        let mut args = vec![cmd, "-m", &m, "--ctx", "100000000"];
        if cmd == "run" {
            args.extend(["-p", "hi"]);
        }
        assert_one_error(&args, "try --ctx");
        assert_one_error(&args, "is free");
    }
    assert_one_error(
        &[
            "run",
            "-m",
            &m,
            "--ctx",
            "4294967296",
            "--kv",
            "f32",
            "-p",
            "hi",
        ],
        "--kv f16",
    );
    assert_one_error(
        &[
            "run",
            "-m",
            &m,
            "--ctx",
            "99999999999999999999999",
            "-p",
            "hi",
        ],
        "--ctx",
    );
    assert_one_error(&["run", "-m", &m, "--ctx", "-5", "-p", "hi"], "--ctx");
    assert_one_error(
        &["run", "-m", &m, "--ubatch", "100000", "-p", "hi"],
        "--ubatch",
    );
    assert_one_error(&["run", "-m", &m, "-ub", "0", "-p", "hi"], "--ubatch");
    // serve binds first, then finds the context does not fit while loading.
    assert_one_error(
        &["serve", "-m", &m, "--port", "0", "--ctx", "100000000"],
        "try --ctx",
    );
}

#[test]
fn absurd_token_counts_and_workers_are_one_line() {
    let m = model();
    let big = "99999999999999999999999";
    for args in [
        vec!["run", "-m", &m, "-p", "hi", "-n", big],
        vec!["run", "-m", &m, "-p", "hi", "-n", "-7"],
        vec!["chat", "-m", &m, "-n", "-3"],
    ] {
        assert_one_error(&args, "--n-predict");
    }
    for flag in ["-t", "--pool-workers", "--threads"] {
        assert_one_error(
            &["run", "-m", &m, "-p", "hi", flag, "100000000"],
            "0 to 1024",
        );
        assert_one_error(&["serve", "-m", &m, flag, big], "0 to 1024");
    }
    for value in [big, "0", "-1"] {
        assert_one_error(&["serve", "-m", &m, "--max-body-mib", value], "1 to 4096");
    }
    assert_one_error(&["serve", "-m", &m, "--port", "99999"], "--port");
}

#[test]
fn absurd_bench_and_needle_sizes_are_one_line() {
    let m = model();
    // 16M tokens of depth or prompt: the session would need hundreds of GiB.
    assert_one_error(
        &[
            "bench", "--local", "-m", &m, "-p", "16384k", "-n", "0", "-r", "1",
        ],
        "try smaller -p, -n or -d",
    );
    assert_one_error(
        &[
            "bench", "--local", "-m", &m, "-p", "0", "-n", "1", "-d", "16384k",
        ],
        "try smaller -p, -n or -d",
    );
    assert_one_error(
        &[
            "bench",
            "--local",
            "-m",
            &m,
            "-p",
            "0",
            "-n",
            "100000000",
            "-r",
            "1",
        ],
        "is free",
    );
    assert_one_error(&["bench", "--local", "-m", &m, "-p", "1e30"], "16777216");
    assert_one_error(
        &["bench", "--local", "-m", &m, "-r", "99999999999"],
        "1 to 1000",
    );
    assert_one_error(&["bench", "--timeout", "99999999999999"], "timeout");
    assert_one_error(&["needle", "--lengths", "99999999999"], "16777216");
    assert_one_error(&["needle", "--timeout", "0"], "timeout");
}

#[test]
fn absurd_synth_shapes_are_one_line() {
    let dir = common::temp_dir("absurd-synth");
    let out = dir.join("x.gguf");
    let out = out.to_str().unwrap();
    for (flag, want) in [
        ("--layers", "1 to 4096"),
        ("--embd", "1 to 1048576"),
        ("--ff", "1 to 1048576"),
        ("--vocab", "1 to 4194304"),
        ("--experts", "1 to 65536"),
        ("--ctx", "training context"),
        ("--pool-rows", "1 to 1048576"),
    ] {
        assert_one_error(
            &[
                "synth",
                "--preset",
                "tiny-llama",
                "-o",
                out,
                flag,
                "99999999999999",
            ],
            want,
        );
    }
    // Every width in range, but the file would not fit on any disk.
    assert_one_error(
        &[
            "synth",
            "--preset",
            "qwen3-30b-a3b",
            "--layers",
            "4096",
            "--type",
            "f32",
            "-o",
            out,
        ],
        "GiB free",
    );
    assert!(!dir.join("x.gguf").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
