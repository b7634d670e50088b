//! Helpers of the evaluation-tool tests: real models, a `strata serve` child that is killed
//! when dropped, and tiny random llama GGUFs written with `GgufWriter`.

#![allow(dead_code)]

pub mod tiny;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `$STRATA_MODELS_DIR` or `~/.cache/strata/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("STRATA_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/strata/models"),
    }
}

/// SmolLM2-135M's path; panics with instructions when it is missing.
pub fn smollm2() -> PathBuf {
    let p = models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.exists(),
        "{} is missing: run `strata pull smollm2-135m` (or .ci/run) first",
        p.display()
    );
    p
}

/// The `strata` binary under test.
pub fn strata() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata"))
}

/// Runs `strata ARGS`, returning its output (never panics on a non-zero exit).
pub fn run_strata(args: &[&str]) -> Output {
    strata().args(args).output().expect("strata runs")
}

/// A fresh directory for one test's files.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-cli-eval-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running server process, killed (and reaped) when dropped — also when a test panics.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Server {
    /// Starts `strata serve -m MODEL --ctx CTX --port 0` and waits until `/health` is 200.
    pub fn strata(model: &Path, ctx: usize) -> Server {
        let mut cmd = strata();
        cmd.args(["serve", "--port", "0", "--ctx", &ctx.to_string(), "-m"])
            .arg(model);
        Server::start(cmd, None)
    }

    /// Starts `cmd` (whose stderr announces `listening on http://ADDR`, unless `url` is given)
    /// and waits for `/health`.
    pub fn start(mut cmd: Command, url: Option<String>) -> Server {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("server starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let mut server = Server {
            child,
            url: url.unwrap_or_default(),
        };
        if server.url.is_empty() {
            server.url = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the server announces its address");
        }
        server.wait_healthy(Duration::from_secs(120));
        server
    }

    /// Starts `strata ARGS` (a `serve` command) with its stderr written to `log`, and waits
    /// for `/health`.
    pub fn logged(args: &[&str], log: &Path) -> Server {
        let file = std::fs::File::create(log).unwrap();
        let child = strata()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("server starts");
        let mut server = Server {
            child,
            url: String::new(),
        };
        let start = Instant::now();
        while server.url.is_empty() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(rest) = text.split("listening on ").nth(1) {
                server.url = rest.split_whitespace().next().unwrap_or("").to_string();
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the server exited early: {status}\n{text}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no address:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server.wait_healthy(Duration::from_secs(120));
        server
    }

    fn wait_healthy(&mut self, timeout: Duration) {
        let start = Instant::now();
        let client = reqwest::blocking::Client::new();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the server exited early: {status}");
            }
            let ok = client
                .get(format!("{}/health", self.url))
                .send()
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ok {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{} not healthy after {timeout:?}",
                self.url
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1 (for servers that cannot pick one themselves).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stdout and stderr of `out` as text, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The Python (`$STRATA_PYTHON`, default `python3`) that can import llama_cpp and numpy, the
/// reference for the llama.cpp comparisons. `None` (the caller skips) where it cannot, except
/// under CI, which installs llama-cpp-python (scripts/make_tiny_models.sh) and where this panics.
pub fn python_with_llama_cpp() -> Option<String> {
    let python = std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&python)
        .args(["-c", "import llama_cpp, numpy"])
        .output();
    if has.is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{python} cannot import llama_cpp (pip install llama-cpp-python==0.3.36 numpy)"
    );
    eprintln!("skipped: {python} cannot import llama_cpp (pip install llama-cpp-python numpy)");
    None
}
