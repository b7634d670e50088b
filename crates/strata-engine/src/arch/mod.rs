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

use strata_gguf::Metadata;

use crate::backend::{Cpu, HostMem};
use crate::config::ModelConfig;
use crate::error::EngineError;
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
    fn load(
        &self,
        src: &dyn TensorSource,
        cfg: &ModelConfig,
    ) -> Result<Box<dyn Graph>, EngineError>;
}

/// The forward pass of one architecture with its weights.
///
/// An architecture writes its graph once, generic over [`crate::backend::Backend`]; this
/// trait hands it the backend that runs it. A GPU backend adds its own `forward_*` entry here,
/// implemented by the same generic function.
pub trait Graph: Send + Sync {
    /// Runs the run's `tokens` (the rows of `seqs`, each sequence at its own positions with
    /// its own caches and state) through every layer on the CPU backend `be`, leaving the
    /// final residual stream in `ws.x` (`[T][residual width]`: `n_embd`, or
    /// `hc·n_embd` with hyper-connections).
    ///
    /// Errors: a token outside the vocabulary, an unsupported weight type.
    fn forward(
        &self,
        be: &Cpu<'_>,
        cfg: &ModelConfig,
        ws: &mut Workspace<HostMem>,
        seqs: &mut [SeqRun<'_>],
        tokens: &[u32],
    ) -> Result<(), EngineError>;

    /// The logits of the run's `rows` (ascending row indices of `ws.x`, after
    /// [`Graph::forward`]) into `ws.logits` (`[rows][n_vocab]`), their final residual rows
    /// staying in `ws.hidden` (`[rows][residual width]`: what an MTP head reads). Most
    /// architectures apply the output norm and the LM head
    /// ([`dense::graph::output`]); qwen4exp collapses its hyper-connection streams with its
    /// final mixer instead of a norm.
    ///
    /// Errors: an unsupported weight type.
    fn output(
        &self,
        be: &Cpu<'_>,
        cfg: &ModelConfig,
        ws: &mut Workspace<HostMem>,
        rows: &[usize],
    ) -> Result<(), EngineError>;

    /// One MTP draft step over the run's rows: `ws.x` holds their input residual rows
    /// (`[T][residual width]`: the trunk's final residual of each row's position — what
    /// [`Graph::output`] leaves in `ws.hidden` — or the previous draft step's output),
    /// `tokens` the token after each of those positions and `ws.pos` the positions (the
    /// hidden's, as vLLM drafts). Writes each sequence's MTP keys and values to its KV layer
    /// `cfg.n_attn_layers()`, the draft logits of every row to `ws.logits`
    /// (`[T][n_vocab]`) and the MTP's output residual rows (the next draft step's input) to
    /// `ws.hidden` (`[T][residual width]`). qwen4exp: [`qwen4exp::graph::mtp`].
    ///
    /// Errors: [`EngineError::NoMtp`] for a model without an MTP layer (the default), a
    /// token outside the vocabulary, an unsupported weight type.
    fn mtp(
        &self,
        _be: &Cpu<'_>,
        _cfg: &ModelConfig,
        _ws: &mut Workspace<HostMem>,
        _seqs: &mut [SeqRun<'_>],
        _tokens: &[u32],
    ) -> Result<(), EngineError> {
        Err(EngineError::NoMtp)
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
