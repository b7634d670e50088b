//! The reference side of `strata quality`: llama.cpp through llama-cpp-python (the helper
//! `scripts/llama_logits.py`, embedded here and run with `python3 -c`, streaming logits back
//! through a pipe), or a second GGUF run by our own engine.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use strata_engine::{KvType, Model};

/// The helper script (also shipped as `scripts/llama_logits.py`).
const SCRIPT: &str = include_str!("../../../../scripts/llama_logits.py");

/// Where reference logits come from.
pub enum Reference {
    /// llama.cpp in a child Python process.
    LlamaCpp(LlamaCpp),
    /// Another GGUF in our engine.
    Engine(Box<Model>),
}

impl Reference {
    /// The reference's logit rows for positions `first .. chunk.len()-1` of `chunk`,
    /// `[rows][n_vocab]` flattened. Errors: the reference failed or sent too little.
    pub fn logits(
        &mut self,
        chunk: &[u32],
        first: usize,
        n_vocab: usize,
        kv: KvType,
    ) -> Result<Vec<f32>> {
        match self {
            Reference::LlamaCpp(l) => l.next_chunk((chunk.len() - 1 - first) * n_vocab),
            Reference::Engine(m) => {
                let mut session = m.new_session(chunk.len(), kv);
                let mut all = Vec::new();
                m.forward_all(&mut session, chunk, &mut all)
                    .context("reference model forward")?;
                Ok(all[first * n_vocab..(chunk.len() - 1) * n_vocab].to_vec())
            }
        }
    }
}

/// A running llama-cpp-python helper that streams logits chunk by chunk.
pub struct LlamaCpp {
    child: Child,
    out: BufReader<ChildStdout>,
    /// `llama_cpp.__version__`.
    pub version: String,
    /// Vocabulary size llama.cpp reports.
    pub n_vocab: usize,
    _request: tempfile_guard::TempFile,
}

impl LlamaCpp {
    /// Starts `python` on the helper for `model` and sends it all `chunks`.
    ///
    /// Errors: Python or llama-cpp-python is missing, or the model does not load; the message
    /// carries Python's last words.
    pub fn start(
        python: &str,
        model: &Path,
        n_ctx: usize,
        threads: usize,
        first: usize,
        chunks: &[Vec<u32>],
    ) -> Result<LlamaCpp> {
        let req = json!({"model": model, "n_ctx": n_ctx, "threads": threads, "first": first, "chunks": chunks});
        let request = tempfile_guard::TempFile::write(
            "strata-quality-request.json",
            req.to_string().as_bytes(),
        )?;
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(&request.path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {python} (set --python or STRATA_PYTHON)"))?;
        let mut out = BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow!("no pipe from the llama.cpp helper"))?,
        );
        let mut line = String::new();
        out.read_line(&mut line)?;
        let header: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => {
                // Read stderr to its end before reaping, so a chatty child cannot block.
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                let _ = child.wait();
                let tail: Vec<&str> = err.lines().rev().take(3).collect();
                bail!(
                    "the llama.cpp helper failed ({}); it needs `pip install llama-cpp-python numpy`",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                );
            }
        };
        // llama.cpp's log lines would fill the pipe: drain them in the background.
        if let Some(mut e) = child.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut e, &mut std::io::sink()));
        }
        Ok(LlamaCpp {
            child,
            out,
            version: header["llama_cpp_python_version"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
            n_vocab: header["n_vocab"]
                .as_u64()
                .ok_or_else(|| anyhow!("the llama.cpp helper sent no n_vocab"))?
                as usize,
            _request: request,
        })
    }

    fn next_chunk(&mut self, floats: usize) -> Result<Vec<f32>> {
        let mut bytes = vec![0u8; floats * 4];
        self.out
            .read_exact(&mut bytes)
            .context("the llama.cpp helper stopped early")?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

impl Drop for LlamaCpp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file in the temp directory, removed when dropped.
mod tempfile_guard {
    use std::path::PathBuf;

    pub struct TempFile {
        pub path: PathBuf,
    }

    impl TempFile {
        /// Writes `data` to a fresh file named after this process and `name`.
        pub fn write(name: &str, data: &[u8]) -> std::io::Result<TempFile> {
            let path = std::env::temp_dir().join(format!("{}-{name}", std::process::id()));
            std::fs::write(&path, data)?;
            Ok(TempFile { path })
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
