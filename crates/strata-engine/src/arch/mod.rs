//! One module per architecture, behind one trait, found through one registry.
//!
//! An [`Architecture`] reads its own hyper-parameters from the metadata (beyond the keys every
//! model has, which `config.rs` reads), names and shapes its tensors, and builds a [`Graph`]:
//! the forward pass over a run of rows. Which layers keep a KV cache and which keep recurrent
//! state follows from the configuration it fills in ([`ModelConfig::ssm`]).
//!
//! Adding an architecture is one module and one line in [`ARCHITECTURES`]. Its tensor list —
//! what a file must hold and what `strata synth` writes — is its weight loader run on a
//! [`source::Recorder`] ([`tensor_list`]), so tensor names are written once.

pub mod dense;
pub mod qwen3next;
pub mod qwen4exp;
pub mod source;

use std::ops::Range;

use strata_gguf::Metadata;

use crate::backend::Backend;
use crate::config::ModelConfig;
use crate::error::EngineError;
use crate::ops::linear::Matrix;
use crate::session::SeqRun;
use crate::workspace::Workspace;
use source::{Recorder, TensorSource, TensorSpec};

/// The architectures this engine runs, by `general.architecture`.
pub static ARCHITECTURES: &[&dyn Architecture] =
    &[&dense::Dense, &qwen3next::Qwen3Next, &qwen4exp::Qwen4Exp];

/// A model architecture (see the module docs).
pub trait Architecture: Sync {
    /// The `general.architecture` values it runs (also its GGUF key prefixes).
    fn names(&self) -> &'static [&'static str];

    /// Reads the architecture's own keys (`{arch}.…`) into `cfg`, whose common fields are set.
    ///
    /// Errors: a missing or inconsistent key, named.
    fn configure(&self, meta: &Metadata, cfg: &mut ModelConfig) -> Result<(), EngineError>;

    /// Builds the graph with its weights taken from `src`.
    ///
    /// Errors: a missing tensor, a shape that disagrees with `cfg`, an unsupported type.
    fn load(&self, src: &dyn TensorSource, cfg: &ModelConfig) -> Result<Graph, EngineError>;
}

/// The forward pass of one architecture with its weights: the architectures are a closed
/// set the engine owns, so this is an enum whose methods are generic over the backend that
/// runs them (a trait object could not have generic methods). A GPU backend runs the same
/// graph function as the CPU; no graph learns which backend runs it.
pub enum Graph {
    /// llama, qwen2, qwen3, gemma3, qwen3moe.
    Dense(dense::weights::Weights),
    /// qwen3next.
    Qwen3Next(qwen3next::weights::HybridWeights),
    /// qwen4exp.
    Qwen4Exp(Box<qwen4exp::weights::Qwen4ExpWeights>),
}

impl Graph {
    /// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions with
    /// its own caches and state) through every layer on backend `be`, leaving the final
    /// residual stream in `ws.x` (`[T][residual width]`: `n_embd`, or `hc·n_embd` with
    /// hyper-connections). `ws.pos` holds the rows' positions.
    ///
    /// Errors: a token outside the vocabulary, an unsupported weight type or op.
    pub fn forward<B: Backend>(
        &self,
        be: &B,
        cfg: &ModelConfig,
        ws: &mut Workspace<B::Mem>,
        seqs: &mut [SeqRun<'_>],
        tokens: &[u32],
    ) -> Result<(), EngineError> {
        self.forward_layers(be, cfg, ws, seqs, tokens, 0..cfg.n_layer)
    }

    /// [`Graph::forward`] through `layers` only (ascending, within `0..n_layer`): a range
    /// starting at 0 embeds the tokens first; any other range reads the residual stream
    /// entering its first layer from `ws.x` (`[T][residual width]`) and leaves the stream
    /// after its last layer there. Running `0..k` on one backend and `k..n_layer` on another,
    /// with the residual copied between them, is a whole forward (partial offload): each
    /// layer's KV cache and recurrent state are the sequences' own, whichever backend runs it.
    ///
    /// Errors: as [`Graph::forward`].
    pub fn forward_layers<B: Backend>(
        &self,
        be: &B,
        cfg: &ModelConfig,
        ws: &mut Workspace<B::Mem>,
        seqs: &mut [SeqRun<'_>],
        tokens: &[u32],
        layers: Range<usize>,
    ) -> Result<(), EngineError> {
        assert!(
            layers.end <= cfg.n_layer,
            "layers {layers:?} of {}",
            cfg.n_layer
        );
        match self {
            Graph::Dense(w) => dense::graph::forward(be, cfg, w, ws, seqs, tokens, layers),
            Graph::Qwen3Next(w) => qwen3next::graph::forward(be, cfg, w, ws, seqs, tokens, layers),
            Graph::Qwen4Exp(w) => qwen4exp::graph::forward(be, cfg, w, ws, seqs, tokens, layers),
        }
    }

    /// The logits of the run's `rows` (ascending row indices of `ws.x`, after
    /// [`Graph::forward`]) into `ws.logits` (`[rows][n_vocab]`), their final residual rows
    /// staying in `ws.hidden` (`[rows][residual width]`: what an MTP head reads). Most
    /// architectures apply the output norm and the LM head
    /// ([`dense::graph::output`]); qwen4exp collapses its hyper-connection streams with its
    /// final mixer instead of a norm.
    ///
    /// Errors: an unsupported weight type or op.
    pub fn output<B: Backend>(
        &self,
        be: &B,
        cfg: &ModelConfig,
        ws: &mut Workspace<B::Mem>,
        rows: &[usize],
    ) -> Result<(), EngineError> {
        match self {
            Graph::Dense(w) => dense::graph::output(be, cfg, &w.output_norm, &w.output, ws, rows),
            Graph::Qwen3Next(w) => {
                dense::graph::output(be, cfg, &w.output_norm, &w.output, ws, rows)
            }
            Graph::Qwen4Exp(w) => qwen4exp::graph::output(be, cfg, w, ws, rows),
        }
    }

    /// One MTP draft step over the run's rows: `ws.x` holds their input residual rows
    /// (`[T][residual width]`: the trunk's final residual of each row's position — what
    /// [`Graph::output`] leaves in `ws.hidden` — or the previous draft step's output),
    /// `tokens` the token after each of those positions and `ws.pos` the positions (the
    /// hidden's, as vLLM drafts). Writes each sequence's MTP keys and values to its KV layer
    /// `cfg.n_attn_layers()`, the draft logits of every row to `ws.logits`
    /// (`[T][n_vocab]`) and the MTP's output residual rows (the next draft step's input) to
    /// `ws.hidden` (`[T][residual width]`). qwen4exp: [`qwen4exp::graph::mtp`].
    ///
    /// Errors: [`EngineError::NoMtp`] for a model without an MTP layer, a token outside
    /// the vocabulary, an unsupported weight type.
    pub fn mtp<B: Backend>(
        &self,
        be: &B,
        cfg: &ModelConfig,
        ws: &mut Workspace<B::Mem>,
        seqs: &mut [SeqRun<'_>],
        tokens: &[u32],
    ) -> Result<(), EngineError> {
        match self {
            Graph::Qwen4Exp(w) => qwen4exp::graph::mtp(be, cfg, w, ws, seqs, tokens),
            _ => Err(EngineError::NoMtp),
        }
    }

    /// The weight matrices of a graph that a device backend runs whole, for it to upload at
    /// load: [`Graph::embedding_matrices`], every layer's [`Graph::layer_matrices`] and
    /// [`Graph::head_matrices`].
    pub fn device_matrices(&self) -> Vec<&Matrix<'static>> {
        let n_layer = match self {
            Graph::Dense(w) => w.layers.len(),
            Graph::Qwen3Next(w) => w.layers.len(),
            Graph::Qwen4Exp(w) => w.layers.len(),
        };
        let mut out = self.embedding_matrices();
        (0..n_layer).for_each(|il| out.extend(self.layer_matrices(il)));
        out.extend(self.head_matrices());
        out
    }

    /// The token embedding table (what a forward starting at layer 0 reads).
    pub fn embedding_matrices(&self) -> Vec<&Matrix<'static>> {
        match self {
            Graph::Dense(w) => vec![&w.token_embd],
            Graph::Qwen3Next(w) => vec![&w.token_embd],
            Graph::Qwen4Exp(w) => vec![&w.token_embd],
        }
    }

    /// The weight matrices layer `il` reads: its projections (for MoE layers the router and
    /// the three whole expert tensors, and the shared expert), qwen3next's and qwen4exp's
    /// DeltaNet projections, qwen4exp's hyper-connection gates, QSA indexer, and on the PLE
    /// layer its projections and n-gram table.
    pub fn layer_matrices(&self, il: usize) -> Vec<&Matrix<'static>> {
        match self {
            Graph::Dense(w) => {
                let lw = &w.layers[il];
                let mut out = vec![&lw.wq, &lw.wk, &lw.wv, &lw.wo];
                match &lw.ffn {
                    dense::weights::Ffn::Dense {
                        w_gate,
                        w_up,
                        w_down,
                    } => out.extend([w_gate, w_up, w_down]),
                    dense::weights::Ffn::Moe(m) => {
                        out.extend([&m.router, &m.gate.all, &m.up.all, &m.down.all])
                    }
                }
                out
            }
            Graph::Qwen3Next(w) => w.layer_matrices(il),
            Graph::Qwen4Exp(w) => w.layer_matrices(il),
        }
    }

    /// The matrices of the output after the last layer: the LM head (qwen4exp: also its
    /// final hyper-connection mixer).
    pub fn head_matrices(&self) -> Vec<&Matrix<'static>> {
        match self {
            Graph::Dense(w) => vec![&w.output],
            Graph::Qwen3Next(w) => vec![&w.output],
            Graph::Qwen4Exp(w) => vec![&w.output_hc.down, &w.output_hc.up, &w.output],
        }
    }
}

/// The architecture that runs `general.architecture` = `name`.
///
/// Errors: [`EngineError::UnsupportedArch`] with the supported names.
pub fn find(name: &str) -> Result<&'static dyn Architecture, EngineError> {
    ARCHITECTURES
        .iter()
        .copied()
        .find(|a| a.names().contains(&name))
        .ok_or_else(|| EngineError::UnsupportedArch(name.to_string(), supported().join(", ")))
}

/// Every supported `general.architecture` value.
pub fn supported() -> Vec<&'static str> {
    ARCHITECTURES
        .iter()
        .flat_map(|a| a.names())
        .copied()
        .collect()
}

/// The tensors a file of this configuration holds, in the order the loader asks for them.
///
/// Errors: as [`Architecture::load`] for an inconsistent configuration.
pub fn tensor_list(cfg: &ModelConfig) -> Result<Vec<TensorSpec>, EngineError> {
    let rec = Recorder::default();
    find(cfg.arch.name())?.load(&rec, cfg)?;
    Ok(rec.into_specs())
}
