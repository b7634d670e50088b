//! A loaded model: memory-mapped GGUF, configuration, weights, tokenizer, chat template, and
//! the runner that feeds tokens of one or many sessions through its graph.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use strata_gguf::GgufModel;

use crate::arch::source::FileTensors;
use crate::arch::{self, Graph};
use crate::backend::DeviceRun;
use crate::backend::{Backend, Cpu, HostMem};
use crate::chat_template::ChatTemplate;
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::kv_cache::KvType;
use crate::pool;
use crate::residency;
use crate::session::SeqRun;
use crate::session::Session;
use crate::tokenizer::Tokenizer;
use crate::workspace::Workspace;

/// Default tokens per forward run (llama.cpp's default `n_ubatch`); see [`Model::set_ubatch`]
/// and [`default_ubatch`].
pub const UBATCH: usize = 512;
/// Largest accepted `--ubatch`.
pub const MAX_UBATCH: usize = 8192;
/// Largest default `--ubatch` ([`default_ubatch`]).
pub const UBATCH_MOE_MAX: usize = 2048;
/// Tokens a routed expert should meet per run on average for its GEMM tiles to run near
/// their speed ([`default_ubatch`]).
const TOKENS_PER_EXPERT: usize = 32;

/// The tokens per forward run a model of `cfg` runs with until [`Model::set_ubatch`]. With
/// layers on a device (`on_device`) [`UBATCH`]: its activation buffers are not budgeted for
/// larger runs. On the CPU [`UBATCH`], or for an MoE model
/// whose runs of [`UBATCH`] tokens give each routed expert fewer than 32 tokens on average
/// (`UBATCH · n_expert_used / n_expert`), the power of two from there that gives it 32, at
/// most [`UBATCH_MOE_MAX`]: 2048 for Qwen3-Next and qwen4exp (512 experts, top-10: 10 tokens
/// an expert at 512, 40 at 2048), 512 for Qwen3-30B-A3B (128 experts, top-8: 32).
///
/// A prompt longer than 512 tokens then prefills faster: a routed expert's weights are read
/// and decoded once per run, and the tokens-in-lanes tiles fill their lanes (criterion,
/// `expert/IQ3_XXS/gemm/avx512`: 10 tokens cost about as much as 16). The qwen4exp IQ3_XXS
/// cut's pp2048 ran 1.09–1.44× (median 1.18, seven alternating rounds) with 2048, Qwen3-Next's
/// Q4_K cut 0.94–1.37× (median 1.13) (BENCHMARKS.md, 40th session). The activations grow
/// with the run (about 1.6 GB more for qwen4exp at 2048 than at 512); results never depend
/// on it (`tests/batch_invariance.rs`).
pub fn default_ubatch(cfg: &ModelConfig, on_device: bool) -> usize {
    let Some(moe) = cfg.moe.filter(|_| !on_device) else {
        return UBATCH;
    };
    // `ModelConfig::from_metadata` refuses `n_expert_used` of 0.
    let wanted = (TOKENS_PER_EXPERT * moe.n_expert).div_ceil(moe.n_expert_used);
    wanted.next_power_of_two().clamp(UBATCH, UBATCH_MOE_MAX)
}

/// Which positions of a call's tokens a forward returns (logits, and hidden states if asked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Want {
    /// Nothing: the tokens only extend the state.
    None,
    /// The last token's.
    #[default]
    Last,
    /// Every token's, in order.
    All,
    /// The tokens at these indices into the call's tokens, ascending.
    Rows(Vec<usize>),
}

/// One sequence's part of a [`Model::forward_batch`] call.
pub struct SeqInput<'a> {
    pub session: &'a mut Session,
    /// Tokens to append (at least one).
    pub tokens: &'a [u32],
    /// Whose logits to return.
    pub want: Want,
    /// Also return the final hidden states (the residual stream before the output norm,
    /// `n_embd` per position, `hc·n_embd` with hyper-connections) of the same positions:
    /// what an MTP draft head reads.
    pub hidden: bool,
}

/// What [`Model::forward_batch`] returns for one sequence: `[rows][n_vocab]` logits and,
/// if asked, `[rows][residual width]` hidden states, for the rows its [`Want`] names, in order.
#[derive(Clone, Debug, Default)]
pub struct SeqOutput {
    pub logits: Vec<f32>,
    pub hidden: Vec<f32>,
}

/// A model ready to run. Weights are read in place from the mapped file.
pub struct Model {
    gguf: &'static GgufModel,
    config: ModelConfig,
    /// The architecture's forward pass with its weights.
    graph: Graph,
    /// The backend that runs layers `device_from..n_layer` and the LM head when set
    /// ([`Model::set_device_from`]); the CPU runs the rest.
    device: Option<Box<dyn DeviceRun>>,
    device_from: usize,
    tokenizer: Tokenizer,
    chat_template: Option<ChatTemplate>,
    /// The runner's activation buffers (one run at a time).
    ws: Mutex<Workspace<HostMem>>,
    /// Most tokens per run as set by [`Model::set_ubatch`]; 0 until then (the default,
    /// [`Model::ubatch`]).
    ubatch: AtomicUsize,
}

impl Model {
    /// Maps the GGUF at `path` (split files included) and checks every tensor. When the file
    /// fits in the available memory its pages are mapped in now (see [`crate::residency`]).
    ///
    /// The mapping lives for the rest of the process (models are loaded once), which is
    /// what lets weights be borrowed for `'static` without copying them.
    /// Errors: unreadable or malformed file, unsupported architecture or type, missing
    /// metadata keys or tensors, a bad tokenizer or chat template.
    pub fn load(path: &Path) -> Result<Model, EngineError> {
        let gguf: &'static GgufModel = Box::leak(Box::new(GgufModel::open(path)?));
        let bytes = gguf.size_bytes();
        if residency::fits_in_memory(bytes) {
            if let Err(e) = gguf.make_resident() {
                tracing::warn!("could not map the model's pages in at load: {e}");
            }
        } else {
            tracing::info!(
                "{:.1} GiB model is larger than the available memory: pages are read as needed",
                bytes as f64 / (1u64 << 30) as f64
            );
        }
        let meta = gguf.metadata();
        let config = ModelConfig::from_metadata(meta)?;
        let graph = arch::find(config.arch.name())?.load(&FileTensors { gguf }, &config)?;
        let tokenizer = Tokenizer::from_metadata(meta)?;
        let chat_template = match meta.opt_str("tokenizer.chat_template")? {
            Some(src) => {
                let piece =
                    |id: Option<u32>| id.map(|i| tokenizer.decode_special(i)).unwrap_or_default();
                Some(ChatTemplate::new(
                    src,
                    &piece(tokenizer.bos_id()),
                    &piece(tokenizer.eos_id()),
                )?)
            }
            None => None,
        };
        Ok(Model {
            gguf,
            config,
            graph,
            device: None,
            device_from: 0,
            tokenizer,
            chat_template,
            ws: Mutex::new(Workspace::default()),
            ubatch: AtomicUsize::new(0),
        })
    }

    /// Runs every layer of every forward on `device` from now on (`strata run -ngl 99`); the
    /// MTP draft head stays on the CPU. Sessions keep their state in host memory as well, so
    /// snapshots, restores and truncation work as on the CPU.
    pub fn set_device(&mut self, device: Box<dyn DeviceRun>) {
        self.set_device_from(device, 0);
    }

    /// Partial offload (`strata run -ngl N`, `first` = n_layer − N): the CPU runs the
    /// embedding and layers `0..first`, `device` runs layers `first..n_layer`, the output
    /// norm and the LM head, starting from the residual rows the CPU hands it each run.
    /// `first` = 0 is [`Model::set_device`]. Each layer's KV cache and recurrent state stay
    /// in the session, whichever side runs it, so snapshots, restores and truncation work as
    /// on the CPU.
    ///
    /// Panics: `first` ≥ the layer count (that leaves nothing to the device).
    pub fn set_device_from(&mut self, device: Box<dyn DeviceRun>, first: usize) {
        assert!(
            first < self.config.n_layer,
            "layer {first} of {}",
            self.config.n_layer
        );
        self.device = Some(device);
        self.device_from = first;
    }

    /// The layers the device set by [`Model::set_device_from`] runs (empty without one).
    pub fn device_layers(&self) -> Range<usize> {
        match self.device {
            Some(_) => self.device_from..self.config.n_layer,
            None => self.config.n_layer..self.config.n_layer,
        }
    }

    /// The backend set by [`Model::set_device`], if any.
    pub fn device(&self) -> Option<&dyn DeviceRun> {
        self.device.as_deref()
    }

    /// The graph with its weights (what a device backend uploads).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The tokenizer built from the file's vocabulary.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The file's chat template, if it has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_ref()
    }

    /// The underlying GGUF (metadata, tensor table).
    pub fn gguf(&self) -> &GgufModel {
        self.gguf
    }

    /// A fresh session of `n_ctx` positions (0 = the model's training context). Its KV cache
    /// takes memory as tokens are fed.
    pub fn new_session(&self, n_ctx: usize, kv_type: KvType) -> Session {
        let n = if n_ctx == 0 {
            self.config.n_ctx_train
        } else {
            n_ctx
        };
        Session::new(&self.config, n, kv_type)
    }

    /// Runs two decode steps of a throwaway two-position session on every worker of the
    /// current pool ([`pool::Pool::broadcast`]), each worker alone. Each thread's reused
    /// scratch then has its decode size, so later decode steps allocate nothing
    /// (`tests/decode_allocations.rs`) whichever worker takes which task. It reads every dense
    /// weight once per worker, so it also pages them in, as llama.cpp's warm-up run does.
    /// Sessions are untouched. Cost: one-token forwards on one thread, twice per worker, one
    /// worker after another (they share the model's workspace), so on a large model with many
    /// workers it takes seconds. Meant for once per process, before allocation-free or timed
    /// work; `tests/decode_allocations.rs` is its caller today.
    ///
    /// Errors: those of [`Model::forward`] (none for a loaded model).
    pub fn warm_up(&self, kv_type: KvType) -> Result<(), EngineError> {
        let failed = Mutex::new(None);
        pool::with_current(|p| {
            p.broadcast(|_| {
                let mut s = self.new_session(2, kv_type);
                let steps = self
                    .forward(&mut s, &[0])
                    .map(|_| ())
                    .and_then(|()| self.forward(&mut s, &[0]).map(|_| ()));
                if let Err(e) = steps {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                }
            })
        });
        match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Most tokens per forward run (`--ubatch`): longer inputs run in pieces of this size,
    /// which bounds the runner's activation memory. Results do not depend on it. Until
    /// [`Model::set_ubatch`] it is [`default_ubatch`] of the config on the CPU, and [`UBATCH`]
    /// once a device runs layers ([`Model::set_device_from`]).
    pub fn ubatch(&self) -> usize {
        match self.ubatch.load(Ordering::Relaxed) {
            0 => default_ubatch(&self.config, self.device.is_some()),
            n => n,
        }
    }

    /// Sets [`Model::ubatch`]. Errors: `n` outside `1..=8192`.
    pub fn set_ubatch(&self, n: usize) -> Result<(), EngineError> {
        if !(1..=MAX_UBATCH).contains(&n) {
            return Err(EngineError::BadUbatch(n));
        }
        self.ubatch.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// Appends `tokens` to the session and returns the logits (`n_vocab`) after the last one.
    ///
    /// Errors: empty input, the context would overflow (nothing is appended), a token id
    /// outside the vocabulary.
    pub fn forward<'s>(
        &self,
        s: &'s mut Session,
        tokens: &[u32],
    ) -> Result<&'s [f32], EngineError> {
        self.check(s, tokens)?;
        let mut ws = self.workspace();
        let ub = self.ubatch();
        let n_chunks = tokens.len().div_ceil(ub);
        for (i, chunk) in tokens.chunks(ub).enumerate() {
            let last = i + 1 == n_chunks;
            let rows: &[usize] = if last { &[chunk.len() - 1] } else { &[] };
            self.run_one(&mut ws, s, chunk, rows)?;
            if last {
                // Hand the logits over without copying them (the buffers trade places).
                std::mem::swap(&mut s.logits, ws.logits.host());
            }
        }
        Ok(s.logits())
    }

    /// Appends `tokens` and writes the logits of every position into `out`
    /// (`[tokens.len()][n_vocab]`): teacher-forced evaluation and speculative verification.
    pub fn forward_all(
        &self,
        s: &mut Session,
        tokens: &[u32],
        out: &mut Vec<f32>,
    ) -> Result<(), EngineError> {
        self.check(s, tokens)?;
        out.clear();
        let mut ws = self.workspace();
        for chunk in tokens.chunks(self.ubatch()) {
            let rows: Vec<usize> = (0..chunk.len()).collect();
            self.run_one(&mut ws, s, chunk, &rows)?;
            out.extend_from_slice(ws.logits.read());
        }
        Ok(())
    }

    /// One forward call over several sequences: every sequence's tokens are appended to its
    /// session, and `out[i]` receives what `batch[i].want` asks for. Tokens of all sequences
    /// share runs of up to [`Model::ubatch`] rows, so decoding N sequences one token each reads
    /// every weight once for all N. Each position's results are bit-identical to feeding its
    /// sequence alone (batch invariance).
    ///
    /// Errors (checked before anything runs): `out` shorter than `batch`, or for any sequence
    /// empty tokens, a context overflow, a token outside the vocabulary, row indices out of
    /// range or not ascending.
    pub fn forward_batch(
        &self,
        batch: &mut [SeqInput<'_>],
        out: &mut [SeqOutput],
    ) -> Result<(), EngineError> {
        assert!(out.len() >= batch.len(), "one output per sequence");
        for b in batch.iter() {
            self.check(b.session, b.tokens)?;
            if let Want::Rows(r) = &b.want {
                let ascending = r.windows(2).all(|w| w[0] < w[1]);
                if !ascending || r.last().is_some_and(|l| *l >= b.tokens.len()) {
                    return Err(EngineError::BadRows);
                }
            }
        }
        for o in out.iter_mut() {
            o.logits.clear();
            o.hidden.clear();
        }
        let mut ws = self.workspace();
        let ub = self.ubatch();
        // Cursor: next token of each sequence; runs take tokens in sequence order.
        let mut next = vec![0usize; batch.len()];
        let mut first = 0;
        while first < batch.len() {
            let mut parts: Vec<(usize, Range<usize>)> = Vec::new();
            let mut room = ub;
            for (i, b) in batch.iter().enumerate().skip(first) {
                if room == 0 {
                    break;
                }
                let take = (b.tokens.len() - next[i]).min(room);
                parts.push((i, next[i]..next[i] + take));
                room -= take;
            }
            self.run_parts(&mut ws, batch, &parts, out)?;
            for (i, r) in &parts {
                next[*i] = r.end;
            }
            while first < batch.len() && next[first] == batch[first].tokens.len() {
                first += 1;
            }
        }
        Ok(())
    }

    /// One step of the model's MTP draft head (qwen4exp files with `nextn_predict_layers`;
    /// [`Graph::mtp`]) for `tokens.len()` rows at positions `pos0..`: row `t` reads
    /// `hidden[t]` (`[residual width]`, the trunk's final residual at position `pos0 + t` —
    /// [`SeqOutput::hidden`] of a [`Model::forward_batch`] with `hidden: true` — or the
    /// previous draft step's `out.hidden` row) and `tokens[t]`, the token after that position,
    /// and drafts the token after `tokens[t]`. `out.logits` gets `[T][n_vocab]` draft logits,
    /// `out.hidden` the MTP's output residual `[T][residual width]` (the next step's input:
    /// speculative decoding feeds it back with the drafted token at the next position).
    ///
    /// The MTP layer keeps its own keys and values in the session (its KV layer after the
    /// trunk's), written at positions `pos0..`; attention reads positions `0..=pos0 + t`, so
    /// the caller drafts every position it wants attended (after a prompt: rows `0..n`, as
    /// the reference does). Positions at or past [`Session::pos`] are not part of a
    /// [`Session::snapshot`], and a [`Session::truncate`] below them makes them stale: draft
    /// them again. The session's position and tokens do not change.
    ///
    /// Errors (checked before anything runs): [`EngineError::NoMtp`], empty tokens, `hidden`
    /// not `T` rows of the residual width, `pos0 + T` past the context, a token outside the
    /// vocabulary.
    pub fn mtp_draft(
        &self,
        s: &mut Session,
        pos0: usize,
        hidden: &[f32],
        tokens: &[u32],
        out: &mut SeqOutput,
    ) -> Result<(), EngineError> {
        let cfg = &self.config;
        if cfg.n_mtp == 0 {
            return Err(EngineError::NoMtp);
        }
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let width = cfg.residual_width();
        if hidden.len() != tokens.len() * width {
            return Err(EngineError::BadHidden {
                rows: tokens.len(),
                width,
                found: hidden.len(),
            });
        }
        if pos0 + tokens.len() > s.n_ctx() {
            return Err(EngineError::ContextFull {
                needed: pos0 + tokens.len(),
                n_ctx: s.n_ctx(),
            });
        }
        if let Some(bad) = tokens.iter().find(|t| **t as usize >= cfg.n_vocab) {
            return Err(EngineError::InvalidToken {
                id: *bad,
                n_vocab: cfg.n_vocab,
            });
        }
        out.logits.clear();
        out.hidden.clear();
        let mut ws = self.workspace();
        let ub = self.ubatch();
        for (i, chunk) in tokens.chunks(ub).enumerate() {
            let p0 = pos0 + i * ub;
            let h = &hidden[i * ub * width..(i * ub + chunk.len()) * width];
            let mut seq = [SeqRun {
                kv: &mut s.kv.layers,
                rec: None,
                pos0: p0,
                rows: 0..chunk.len(),
            }];
            ws.pos.clear();
            ws.pos.extend(p0..p0 + chunk.len());
            let ws = &mut *ws;
            pool::with_current(|p| {
                let be = Cpu::new(p);
                be.upload(h, width, &mut ws.x);
                self.graph.mtp(&be, cfg, ws, &mut seq, chunk)
            })?;
            out.logits.extend_from_slice(ws.logits.read());
            out.hidden.extend_from_slice(ws.hidden.read());
        }
        Ok(())
    }

    fn workspace(&self) -> std::sync::MutexGuard<'_, Workspace<HostMem>> {
        // A panic inside a run leaves only scratch behind: the buffers are still usable.
        self.ws.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(&self, s: &Session, tokens: &[u32]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let needed = s.pos() + tokens.len();
        if needed > s.n_ctx() {
            return Err(EngineError::ContextFull {
                needed,
                n_ctx: s.n_ctx(),
            });
        }
        let n_vocab = self.config.n_vocab;
        if let Some(bad) = tokens.iter().find(|t| **t as usize >= n_vocab) {
            return Err(EngineError::InvalidToken { id: *bad, n_vocab });
        }
        Ok(())
    }

    /// Runs `tokens` of one session and leaves the logits of `rows` (ascending indices into
    /// `tokens`) in `ws.logits`. Allocates nothing once the buffers have grown.
    fn run_one(
        &self,
        ws: &mut Workspace<HostMem>,
        s: &mut Session,
        tokens: &[u32],
        rows: &[usize],
    ) -> Result<(), EngineError> {
        let pos0 = s.pos();
        let mut seq = [SeqRun {
            kv: &mut s.kv.layers,
            rec: s.recurrent.as_mut(),
            pos0,
            rows: 0..tokens.len(),
        }];
        self.run(ws, &mut seq, tokens)?;
        if !rows.is_empty() {
            self.output(ws, rows)?;
        }
        s.advance(tokens);
        Ok(())
    }

    /// One run over `parts` (sequence index, range of its tokens) of `batch`; appends each
    /// sequence's wanted rows among those tokens to its output.
    fn run_parts(
        &self,
        ws: &mut Workspace<HostMem>,
        batch: &mut [SeqInput<'_>],
        parts: &[(usize, Range<usize>)],
        out: &mut [SeqOutput],
    ) -> Result<(), EngineError> {
        let mut tokens = Vec::new();
        let mut seqs = Vec::with_capacity(parts.len());
        let mut idx = parts.iter().map(|(i, _)| *i).peekable();
        for (i, b) in batch.iter_mut().enumerate() {
            if idx.peek() != Some(&i) {
                continue;
            }
            idx.next();
            let r = &parts[seqs.len()].1;
            let at = tokens.len();
            tokens.extend_from_slice(&b.tokens[r.clone()]);
            let pos0 = b.session.pos();
            seqs.push(SeqRun {
                kv: &mut b.session.kv.layers,
                rec: b.session.recurrent.as_mut(),
                pos0,
                rows: at..tokens.len(),
            });
        }
        self.run(ws, &mut seqs, &tokens)?;
        drop(seqs);
        // The wanted rows of every sequence in this run, as run rows, and whose they are.
        let (mut rows, mut owner) = (Vec::new(), Vec::new());
        let mut at = 0;
        for (i, r) in parts {
            let b = &batch[*i];
            let mut push = |x: usize| {
                rows.push(at + x - r.start);
                owner.push(*i);
            };
            match &b.want {
                Want::None => {}
                Want::Last if r.end == b.tokens.len() => push(r.end - 1),
                Want::Last => {}
                Want::All => r.clone().for_each(push),
                Want::Rows(w) => w.iter().copied().filter(|x| r.contains(x)).for_each(push),
            }
            at += r.len();
        }
        if !rows.is_empty() {
            self.output(ws, &rows)?;
        }
        let (nv, d) = (self.config.n_vocab, ws.hidden.cols());
        for (k, i) in owner.iter().enumerate() {
            out[*i]
                .logits
                .extend_from_slice(&ws.logits.read()[k * nv..(k + 1) * nv]);
            if batch[*i].hidden {
                out[*i]
                    .hidden
                    .extend_from_slice(&ws.hidden.read()[k * d..(k + 1) * d]);
            }
        }
        for (i, r) in parts {
            let b = &mut batch[*i];
            b.session.advance(&b.tokens[r.clone()]);
        }
        Ok(())
    }

    /// The graph over the run's rows on the CPU backend (the pool installed on this thread,
    /// else the global one): every layer, leaving the final residual stream in `ws.x`. With
    /// a device, the CPU runs the layers before [`Model::device_layers`] (if any) and the
    /// device the rest, the final residual staying on the device.
    fn run(
        &self,
        ws: &mut Workspace<HostMem>,
        seqs: &mut [SeqRun<'_>],
        tokens: &[u32],
    ) -> Result<(), EngineError> {
        ws.pos.clear();
        for s in seqs.iter() {
            ws.pos.extend((0..s.rows.len()).map(|t| s.pos0 + t));
        }
        let (cfg, n_layer) = (&self.config, self.config.n_layer);
        let cpu_layers = match &self.device {
            Some(_) => 0..self.device_from,
            None => 0..n_layer,
        };
        if !cpu_layers.is_empty() {
            pool::with_current(|p| {
                let be = Cpu::new(p);
                self.graph
                    .forward_layers(&be, cfg, ws, seqs, tokens, cpu_layers)
            })?;
        }
        match &self.device {
            Some(d) => {
                let run = (&ws.pos[..], seqs, tokens);
                d.forward(
                    &self.graph,
                    cfg,
                    run,
                    self.device_from..n_layer,
                    ws.x.read(),
                )
            }
            None => Ok(()),
        }
    }

    /// Logits of the run's `rows` (ascending) into `ws.logits` (`[rows][n_vocab]`), their
    /// residual stream staying in `ws.hidden` ([`Graph::output`]).
    fn output(&self, ws: &mut Workspace<HostMem>, rows: &[usize]) -> Result<(), EngineError> {
        if let Some(d) = &self.device {
            let ws = &mut *ws;
            return d.output(
                &self.graph,
                &self.config,
                rows,
                &mut ws.logits,
                &mut ws.hidden,
            );
        }
        pool::with_current(|p| self.graph.output(&Cpu::new(p), &self.config, ws, rows))
    }
}
