//! The flags and commands llama.cpp and Ollama users already type: `run MODEL "prompt"`,
//! `-f FILE`, `-p -`, `-n -1`, `-ngl`, `-cnv`, `--jinja`, `list`, `show`, and sampling values
//! checked against their range. The model is SmolLM2-135M (missing, the tests fail).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{run_strata, smollm2, text};

const PROMPT: &str = "The capital of France is";

/// `strata ARGS` with `stdin` fed to it.
fn strata_with_stdin(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The greedy start of the completion of [`PROMPT`] (llama.cpp's first tokens).
fn assert_paris(out: &std::process::Output) {
    assert!(out.status.success(), "{}", text(out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(" Paris"), "{}", text(out));
}

#[test]
fn prompt_comes_positionally_from_a_file_or_from_stdin() {
    let m = smollm2();
    let m = m.to_str().unwrap();
    // ollama run MODEL "prompt"; the known name works as well as the path.
    assert_paris(&run_strata(&["run", m, PROMPT, "-n", "2", "--temp", "0"]));
    assert_paris(&run_strata(&[
        "run", "-m", m, PROMPT, "-n", "2", "--temp", "0",
    ]));
    // Several words after the model are one prompt, as in ollama.
    let words: Vec<&str> = PROMPT.split(' ').collect();
    let mut args = vec!["run", m];
    args.extend(&words);
    args.extend(["-n", "2", "--temp", "0"]);
    assert_paris(&run_strata(&args));

    let dir = common::temp_dir("habits-file");
    let file = dir.join("prompt.txt");
    std::fs::write(&file, PROMPT).unwrap();
    let f = file.to_str().unwrap();
    assert_paris(&run_strata(&[
        "run", "-m", m, "-f", f, "-n", "2", "--temp", "0",
    ]));
    assert_paris(&strata_with_stdin(
        &["run", "-m", m, "-p", "-", "-n", "2", "--temp", "0"],
        PROMPT,
    ));
    let _ = std::fs::remove_dir_all(&dir);

    let prompt_only = run_strata(&["run", PROMPT]);
    assert_eq!(prompt_only.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&prompt_only.stderr).contains("the model comes first"),
        "{}",
        text(&prompt_only)
    );

    let none = run_strata(&["run", "-m", m]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("strata chat"),
        "{}",
        text(&none)
    );
}

#[test]
fn n_minus_one_runs_until_the_context_is_full() {
    let m = smollm2();
    let out = run_strata(&[
        "run",
        "-m",
        m.to_str().unwrap(),
        "Once upon a time",
        "-n",
        "-1",
        "--ctx",
        "24",
        "--temp",
        "0",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Greedy SmolLM2 tells a story well past 20 tokens: no count stops it, the context does.
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.starts_with("prompt: 4 tokens"), "{stderr}");
    assert!(
        stderr.contains("the context of 24 tokens is full"),
        "{stderr}"
    );
}

#[test]
fn llama_cpp_flags_are_accepted_or_pointed_elsewhere() {
    let m = smollm2();
    let m = m.to_str().unwrap();
    let out = run_strata(&[
        "run", "-m", m, "-p", PROMPT, "-n", "2", "--temp", "0", "-ngl", "99", "--jinja",
    ]);
    assert_paris(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Without the `vulkan` feature, a Vulkan loader or a device one line says so and the CPU
    // runs it; with them the model runs on the GPU and still answers.
    assert!(
        stderr.contains("running on the CPU") || stderr.contains("offloaded"),
        "{stderr}"
    );
    assert_paris(&run_strata(&[
        "run",
        "-m",
        m,
        "-p",
        PROMPT,
        "-n",
        "2",
        "--temp",
        "0",
        "--gpu-layers",
        "-1",
    ]));
    let cnv = run_strata(&["run", "-m", m, "-cnv"]);
    assert_eq!(cnv.status.code(), Some(1), "{}", text(&cnv));
    assert!(
        String::from_utf8_lossy(&cnv.stderr).contains("use `strata chat`"),
        "{}",
        text(&cnv)
    );
}

#[test]
fn sampling_values_are_range_checked_and_negative_numbers_are_values() {
    let m = smollm2();
    let m = m.to_str().unwrap();
    for (flag, value, range) in [
        ("--temp", "-1", "from 0 to 100"),
        ("--top-p", "2", "from 0 to 1"),
        ("--min-p", "-0.5", "from 0 to 1"),
        ("--presence-penalty", "3", "from -2 to 2"),
        ("--frequency-penalty", "-2.5", "from -2 to 2"),
        ("--repeat-penalty", "0", "above 0"),
        ("--top-k", "-3", "from 0 to 1000000"),
    ] {
        let out = run_strata(&["run", "-m", m, "-p", "hi", flag, value]);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error:") && stderr.contains(range) && stderr.contains(flag),
            "{flag} {value}: {stderr}"
        );
    }
    // A negative value in range is a value, not a flag.
    let ok = run_strata(&[
        "run",
        "-m",
        m,
        "-p",
        PROMPT,
        "-n",
        "2",
        "--temp",
        "0",
        "--presence-penalty",
        "-1.5",
    ]);
    assert_paris(&ok);
}

#[test]
fn list_shows_known_models_and_show_summarises_one() {
    let _ = smollm2();
    let out = run_strata(&["list"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in:\n{stdout}"))
            .to_string()
    };
    let smol = row("smollm2-135m");
    assert!(
        smol.contains("94 MiB") && smol.contains("llama") && smol.contains("yes"),
        "{smol}"
    );
    assert!(smol.contains("downloaded"), "{smol}");
    let gemma = row("gemma3-270m");
    assert!(
        gemma.contains("gemma3") && gemma.contains("no (base)"),
        "{gemma}"
    );
    assert!(row("qwen2.5-coder-0.5b").contains("qwen2"));

    let show = run_strata(&["show", "smollm2-135m"]);
    assert!(show.status.success(), "{}", text(&show));
    let s = String::from_utf8_lossy(&show.stdout);
    for want in [
        "architecture    llama",
        "file type       Q4_1",
        "context length  8192",
        "layers, width   30, 576",
        "chat template   yes",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    assert!(
        !s.contains("tensors ("),
        "show prints no tensor table:\n{s}"
    );

    let inspect = run_strata(&["inspect", "smollm2-135m"]);
    let i = String::from_utf8_lossy(&inspect.stdout);
    let at = |p: &str| i.find(p).unwrap_or_else(|| panic!("no {p:?} in inspect"));
    assert!(at("summary:") < at("tensors ("), "the summary comes first");
    assert!(i.contains("general.file_type"), "{i}");
    assert!(i.contains("(Q4_1)"), "the file type is named");
}

#[test]
fn devices_prints_adapters_or_one_line_and_succeeds() {
    // With or without the `vulkan` feature, loader and GPU: exit 0 and at least one line.
    let out = run_strata(&["devices"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.trim().is_empty(), "{}", text(&out));
    if !cfg!(feature = "vulkan") {
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        assert!(stdout.contains("`vulkan` feature"), "{stdout}");
    }
    // No driver: one line, still exit 0.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("devices")
        .env("VK_ICD_FILENAMES", "/nonexistent/strata_no_icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/strata_no_icd.json")
        .output()
        .expect("strata runs");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        1,
        "{}",
        text(&out)
    );
}
