//! The backend seam: the ops a model graph is made of, on buffers the backend owns.
//!
//! A graph ([`crate::arch`]) is written once, generic over [`Backend`], as the list of ops of
//! its paper: `be.rms_norm(...)`, `be.matmul(&lw.wq, ...)`, `be.attend(...)`. It never touches
//! activation memory itself and never branches on which backend runs it. A backend brings:
//!
//! - its activation memory ([`Memory`]): `[rows][cols]` f32 buffers ([`RowBuf`]) that the
//!   runner's [`crate::workspace::Workspace`] holds and reuses across runs, plus the scratch
//!   of its compound ops (the routed experts). The CPU's buffers are host vectors; a GPU's
//!   are device allocations.
//! - the ops. Weights are handles ([`Matrix`]): ggml type, shape and where the bytes live —
//!   in the mapped file, which a GPU backend uploads once at load and finds again by the
//!   handle's address ([`Matrix::data`]); small weights (norms, biases) are `&[f32]` copies.
//! - per-sequence state (attention KV, convolution and delta-rule state) reached through the
//!   run's [`SeqRun`]s, so a sequence keeps its state while any backend computes on it.
//!
//! [`Cpu`] is today's kernels on a worker pool that it is given explicitly. Every backend is
//! checked op by op by the cases of `tests/conformance_cases/`, run through this trait: the
//! CPU's instruction-set paths against its scalar path (`tests/conformance.rs`), a device
//! backend against the CPU (strata-vulkan's `tests/conformance.rs` includes the same cases).
//!
//! Shapes below: `T` = rows of the run (tokens of every sequence in it), row-major `[T][dim]`.

mod cpu;
mod device;

pub use cpu::{Cpu, HostMem};
pub use device::{DeviceRun, OnDevice};

use crate::error::EngineError;
use crate::ops::attention::AttnShape;
use crate::ops::delta_net::DeltaShape;
use crate::ops::linear::Matrix;
use crate::ops::moe::MoeWeights;
use crate::ops::qsa::{BlockKeyWeights, QsaShape};
use crate::ops::rope::Rope;
use crate::session::SeqRun;

/// A backend's activation buffer of `[rows][cols]` f32.
pub trait RowBuf: Default + Send {
    /// Sizes it for `rows` rows of `cols` (contents unspecified afterwards). Its memory is
    /// kept when it shrinks, for the next run.
    fn resize(&mut self, rows: usize, cols: usize);
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
}

/// Where a backend keeps activations and its compound ops' scratch.
pub trait Memory {
    type Buf: RowBuf;
    /// Buffers of [`Backend::moe`], grown to the largest run.
    type MoeScratch: Default + Send;
}

/// The activation buffer type of backend `B`.
pub type Buf<B> = <<B as Backend>::Mem as Memory>::Buf;

/// Which gated linear unit a feed-forward block applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Glu {
    /// `silu(gate) ⊙ up` (Shazeer 2020; llama, qwen).
    SwiGlu,
    /// `gelu_tanh(gate) ⊙ up` (Gemma).
    GegluTanh,
}

/// The inputs of [`Backend::delta_rule`] (all `[T][…]`, see [`DeltaShape`]).
pub struct DeltaBufs<'a, B: Backend + ?Sized> {
    /// Queries and keys `[T][n_k_heads·d_k]`, L2-normed.
    pub q: &'a Buf<B>,
    pub k: &'a Buf<B>,
    /// Values `[T][n_v_heads·d_v]`.
    pub v: &'a Buf<B>,
    /// Per-head log decay and write strength β `[T][n_v_heads]`.
    pub log_decay: &'a Buf<B>,
    pub beta: &'a Buf<B>,
}

/// The inputs of [`Backend::attend_qsa`] (all `[T][…]`).
pub struct QsaBufs<'a, B: Backend + ?Sized> {
    /// Queries `[T][n_head·head_dim]`, keys and values `[T][n_kv_head·head_dim]` (normed and
    /// rotated as for [`Backend::attend`]).
    pub q: &'a Buf<B>,
    pub k: &'a Buf<B>,
    pub v: &'a Buf<B>,
    /// Indexer queries `[T][ni·di]` (normed and rotated) and raw indexer keys `[T][di]`.
    pub iq: &'a Buf<B>,
    pub ik: &'a Buf<B>,
}

/// One output of [`Backend::matmuls`]: `y = x·Wᵀ (+ bias)`, `y` `[T][w.rows]` (resized).
pub struct MatmulTo<'a, 'w, B: Backend + ?Sized> {
    pub w: &'a Matrix<'w>,
    pub bias: Option<&'a [f32]>,
    pub y: &'a mut Buf<B>,
}

impl<'a, 'w, B: Backend + ?Sized> MatmulTo<'a, 'w, B> {
    /// `y = x·Wᵀ` (no bias).
    pub fn new(w: &'a Matrix<'w>, y: &'a mut Buf<B>) -> Self {
        MatmulTo { w, bias: None, y }
    }
}

/// The ops of the model graphs (see the module docs). Element-wise ops require equal shapes;
/// a mismatch is a bug in the graph (debug assertions), not an input error.
pub trait Backend: Sync {
    type Mem: Memory;

    /// A short name for logs and test output (`cpu-avx512`).
    fn name(&self) -> String;

    /// Ends a forward or output run: a device backend reports here the first error of an op
    /// that returns none (an unsupported op, a device fault), which made the run's results
    /// void. The CPU's ops cannot fail that way.
    ///
    /// Errors: that error.
    fn finish(&self) -> Result<(), EngineError> {
        Ok(())
    }

    /// Writes the recurrent state that this backend keeps on its device for `seqs` back into
    /// their host state ([`crate::recurrent_state::RecurrentState`]), which the host reads
    /// after a forward (checkpoints, snapshots). The device runner calls it at the end of
    /// every forward over its layers; the CPU keeps no other copy (a no-op).
    ///
    /// Errors: a device error while reading the state back.
    fn sync_state(&self, seqs: &mut [SeqRun<'_>]) -> Result<(), EngineError> {
        let _ = seqs;
        Ok(())
    }

    /// Row `t` of `x` = `scale · table[tokens[t]]`; `x`: `[T][n_embd]`, resized.
    ///
    /// Errors: a token id outside the table.
    fn embed(
        &self,
        table: &Matrix<'_>,
        scale: f32,
        tokens: &[u32],
        x: &mut Buf<Self>,
    ) -> Result<(), EngineError>;

    /// Row `t` of `x` = the table rows `ids[t·per_row .. (t+1)·per_row]` side by side
    /// (`[T][per_row·table.cols]`, resized): a hyper-connection residual of `per_row` copies
    /// of each token's embedding, or PLE's hashed n-gram rows.
    ///
    /// Errors: an id outside the table.
    fn embed_rows(
        &self,
        table: &Matrix<'_>,
        ids: &[u32],
        per_row: usize,
        x: &mut Buf<Self>,
    ) -> Result<(), EngineError>;

    /// `cs[t]` = RoPE cos/sin pairs of position `pos[t]` (`[T][n_rot]`, resized).
    fn rope_angles(&self, rope: &Rope, pos: &[usize], cs: &mut Buf<Self>);

    /// `y = x·Wᵀ (+ bias)`: `x` `[T][w.cols]`, `y` `[T][w.rows]` (resized). The input is
    /// `&mut` because a backend may cache its quantized form in it until it is written again.
    ///
    /// Errors: a weight type the backend cannot multiply.
    fn matmul(
        &self,
        w: &Matrix<'_>,
        bias: Option<&[f32]>,
        x: &mut Buf<Self>,
        y: &mut Buf<Self>,
    ) -> Result<(), EngineError>;

    /// Several [`Backend::matmul`]s of one input (q/k/v, gate/up), each output as that op
    /// would write it (bit for bit); a backend may run them as one fused op. The default runs
    /// them one after another.
    ///
    /// Errors: as [`Backend::matmul`].
    fn matmuls(
        &self,
        x: &mut Buf<Self>,
        outs: &mut [MatmulTo<'_, '_, Self>],
    ) -> Result<(), EngineError> {
        for o in outs.iter_mut() {
            self.matmul(o.w, o.bias, x, o.y)?;
        }
        Ok(())
    }

    /// RMS norm of every `w.len()`-wide piece of `x` (a token row, or one head of it) times
    /// `w`, into `out` (resized to `x`'s shape).
    fn rms_norm(&self, x: &Buf<Self>, w: &[f32], eps: f32, out: &mut Buf<Self>);

    /// RMS norm of every `group`-wide piece of `x` on its own, times `w` (one weight per
    /// element of a row: `w.len() == x.cols()`), into `out` (resized): a hyper-connection row
    /// normed per stream.
    fn rms_norm_grouped(
        &self,
        x: &Buf<Self>,
        w: &[f32],
        group: usize,
        eps: f32,
        out: &mut Buf<Self>,
    );

    /// [`Backend::rms_norm`] in place.
    fn rms_norm_in_place(&self, x: &mut Buf<Self>, w: &[f32], eps: f32);

    /// `x[i] /= ‖x_head‖` for every `head_dim`-wide head (llama.cpp's GDN L2 norm).
    fn l2_norm_heads(&self, x: &mut Buf<Self>, head_dim: usize, eps: f32);

    /// Rotates every `head_dim`-wide head of row `t` of `x` by the angles `cs[t]`.
    fn rope(&self, rope: &Rope, x: &mut Buf<Self>, head_dim: usize, cs: &Buf<Self>);

    /// For every sequence of the run: appends the keys and values of its rows to its cache of
    /// attention layer `layer` (positions `pos0..`), then attends its queries over its cache
    /// into its rows of `out` (`[T][n_head·head_dim]`, resized).
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        q: &Buf<Self>,
        k: &Buf<Self>,
        v: &Buf<Self>,
        shape: &AttnShape,
        out: &mut Buf<Self>,
    );

    /// [`Backend::attend`] restricted by QSA (see [`crate::ops::qsa`]): for every sequence,
    /// appends its keys, values and raw indexer keys to its cache of attention layer `layer`,
    /// then attends each query over its kept tokens into `out` (`[T][n_head·head_dim]`).
    #[allow(clippy::too_many_arguments)]
    fn attend_qsa(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: QsaBufs<'_, Self>,
        shape: &AttnShape,
        qsa: &QsaShape,
        bk: BlockKeyWeights<'_>,
        out: &mut Buf<Self>,
    );

    /// For every sequence: its rows of `x` (`[T][C]`) through the causal depthwise convolution
    /// `w` (`[C][K]`) continuing its conv state of recurrent layer `layer`, into `out`.
    fn conv1d(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        x: &Buf<Self>,
        w: &[f32],
        out: &mut Buf<Self>,
    );

    /// For every sequence: its rows of `x` (`[T][C]`) through PLE's depthwise convolution `w`
    /// (`[C][K]`) with its taps `dilation` rows apart, continuing the sequence's PLE state
    /// ([`crate::recurrent_state::PleState::conv`]), into `out` (resized).
    fn ple_conv(
        &self,
        seqs: &mut [SeqRun<'_>],
        x: &Buf<Self>,
        w: &[f32],
        dilation: usize,
        out: &mut Buf<Self>,
    );

    /// For every sequence: the gated delta rule over its rows, continuing its delta-rule
    /// state of recurrent layer `layer`; `out`: `[T][n_v_heads·d_v]`, resized.
    fn delta_rule(
        &self,
        seqs: &mut [SeqRun<'_>],
        layer: usize,
        shape: &DeltaShape,
        x: DeltaBufs<'_, Self>,
        out: &mut Buf<Self>,
    );

    /// The per-head gates of a Gated DeltaNet from the `ba` projection (`[T][2·n_v_heads]`,
    /// grouped per key head: its value heads' β logits, then their α logits):
    /// `β = σ(b)`, `log_decay = softplus(α + dt_bias)·a`; both `[T][n_v_heads]`, resized.
    #[allow(clippy::too_many_arguments)]
    fn delta_gates(
        &self,
        ba: &Buf<Self>,
        dt_bias: &[f32],
        a: &[f32],
        n_k_heads: usize,
        beta: &mut Buf<Self>,
        log_decay: &mut Buf<Self>,
    );

    /// `a += b`.
    fn add(&self, a: &mut Buf<Self>, b: &Buf<Self>);

    /// `x *= s`.
    fn scale(&self, x: &mut Buf<Self>, s: f32);

    /// Hyper-connection collapse: `out[t] = (1/hc) · Σ_s σ(g[t][s]) ⊙ rn[t][s]` over the
    /// `hc = n_streams` streams of `rn` and `g` (`[T][hc·d]`); `out`: `[T][d]`, resized.
    fn hc_collapse(&self, rn: &Buf<Self>, g: &Buf<Self>, n_streams: usize, out: &mut Buf<Self>);

    /// Hyper-connection combine: `r[t][s] += 2·σ(inj[t][s] / hc) · y[t]` for every stream;
    /// `r`: `[T][hc·d]`, `y`: `[T][d]`, `inj`: `[T][hc]`.
    fn hc_expand_add(&self, r: &mut Buf<Self>, y: &Buf<Self>, inj: &Buf<Self>);

    /// PLE gate: `out[t][s] = σ(sign(σₛ)·√max(|σₛ|, 1e-6)) · val[t]`, `σₛ = key[t][s] ·
    /// qry[t][s] / √d` per stream; `key`, `qry`: `[T][hc·d]`, `val`: `[T][d]`, `out` as `key`.
    fn ple_gate(&self, key: &Buf<Self>, qry: &Buf<Self>, val: &Buf<Self>, out: &mut Buf<Self>);

    /// `gate = act(gate) ⊙ up`.
    fn glu(&self, act: Glu, gate: &mut Buf<Self>, up: &Buf<Self>);

    /// `x = silu(x)`.
    fn silu(&self, x: &mut Buf<Self>);

    /// `x = x ⊙ silu(z)`.
    fn mul_silu(&self, x: &mut Buf<Self>, z: &Buf<Self>);

    /// `x = x ⊙ σ(g)`.
    fn mul_sigmoid(&self, x: &mut Buf<Self>, g: &Buf<Self>);

    /// `out[t] += σ(g[t]) · y[t]` with one gate logit per row (`g`: `[T][1]`).
    fn add_gated(&self, out: &mut Buf<Self>, y: &Buf<Self>, g: &Buf<Self>);

    /// `x = cap · tanh(x / cap)` (Gemma's logit soft cap).
    fn softcap(&self, x: &mut Buf<Self>, cap: f32);

    /// Splits every row of `x` into pieces: the row is `widths` repeated (`x.cols()` is a
    /// multiple of their sum) and piece `i` of every repeat goes, in order, to `outs[i]`
    /// (resized). Example: a `[q | gate]` pair per head → a q buffer and a gate buffer.
    fn split(&self, x: &Buf<Self>, widths: &[usize], outs: &mut [&mut Buf<Self>]);

    /// The rows of `parts` side by side (`[T][Σ cols]`, resized): the inverse of
    /// [`Backend::split`] with one piece per part.
    fn concat(&self, parts: &[&Buf<Self>], out: &mut Buf<Self>);

    /// `out[i] = x[rows[i]]`.
    fn gather_rows(&self, x: &Buf<Self>, rows: &[usize], out: &mut Buf<Self>);

    /// The routed experts of one layer (route → place → compute → combine, see
    /// [`crate::ops::moe`]): `out` (`[T][n_embd]`, resized) = the weighted sum of the chosen
    /// experts' outputs for every row of `x` (normed).
    ///
    /// Errors: unsupported weight types; an expert placed on a unit this backend lacks.
    fn moe(
        &self,
        w: &MoeWeights,
        x: &mut Buf<Self>,
        out: &mut Buf<Self>,
        scratch: &mut <Self::Mem as Memory>::MoeScratch,
    ) -> Result<(), EngineError>;

    /// [`Backend::moe`] of `x` and [`Backend::matmuls`] of the same `x` into `outs` (a shared
    /// expert's projections), each output as those ops would write it (bit for bit); a
    /// backend may run the router with `outs` as one fused op. The default runs `matmuls`,
    /// then `moe`.
    ///
    /// Errors: as [`Backend::moe`] and [`Backend::matmul`].
    fn moe_and_matmuls(
        &self,
        w: &MoeWeights,
        x: &mut Buf<Self>,
        out: &mut Buf<Self>,
        scratch: &mut <Self::Mem as Memory>::MoeScratch,
        outs: &mut [MatmulTo<'_, '_, Self>],
    ) -> Result<(), EngineError> {
        self.matmuls(x, outs)?;
        self.moe(w, x, out, scratch)
    }

    /// Writes host data `src` (`[rows][cols]`) into `b` (resized).
    fn upload(&self, src: &[f32], cols: usize, b: &mut Buf<Self>);

    /// The buffer's contents in host memory (`[rows][cols]`), e.g. logits to sample from.
    /// A device backend copies them into a host mirror kept in the buffer; the CPU's buffer
    /// already is one. The `Vec` may be swapped out, which leaves the buffer empty.
    fn host<'a>(&self, b: &'a mut Buf<Self>) -> &'a mut Vec<f32>;
}
