//! Strata's GPU backend on Vulkan (first slice): device discovery, buffers, compute pipelines
//! and the kernels of dense models, each checked against the CPU on lavapipe (tests/).
//!
//! - [`adapters`] / [`AdapterInfo`]: what `strata devices` lists.
//! - [`offload`]: a model's last layers and LM head placed on a device under a budget.
//! - [`Device`]: one adapter opened with a compute queue (and a transfer queue where the
//!   device has one).
//! - [`Buffer`] and [`transfer`]: device-local storage, host-visible staging, upload/read.
//! - [`Pipeline`], [`Recorder`]: SPIR-V compute pipelines (push and specialization
//!   constants) and batches of dispatches with barriers, submitted and waited on a fence.
//! - [`Kernels`]: matmul (with an optional bias) and row gathers (embeddings) on ggml block
//!   layouts ([`QMatrix`], types in [`MATMUL_TYPES`]); RMS norm, add (also of a broadcast
//!   row), scale, SiLU, GLU and RoPE; the Gated DeltaNet kernels (L2 norm of heads, causal
//!   conv1d with history, gates, the gated delta rule with state); output gates, the gated add
//!   of a shared expert, and column copies (split, concat); qwen4exp's hyper-connection
//!   collapse and combine, PLE gate, and attention over listed positions (QSA's kept tokens).
//!
//! The Vulkan loader is opened at run time: on a machine without one, [`adapters`] and
//! [`Device::new`] return [`VkError::NoLoader`] (or [`VkError::NoDevice`]) and nothing panics.
//! Shaders are GLSL in `shaders/`, compiled to SPIR-V by build.rs. See `docs/vulkan.md`.
//!
//! ```no_run
//! use strata_vulkan::{transfer, Device, Kernels, Recorder};
//!
//! let dev = Device::new(0)?;
//! let k = Kernels::new(&dev);
//! let x = transfer::upload_f32(&dev, &[1.0, 2.0, 3.0])?;
//! let mut rec = Recorder::new(&dev)?;
//! k.scale(&mut rec, &x, 3, 2.0)?;
//! rec.submit()?;
//! assert_eq!(transfer::read_f32(&dev, &x, 3)?, [2.0, 4.0, 6.0]);
//! # Ok::<(), strata_vulkan::VkError>(())
//! ```

mod adapter;
mod attention;
mod backend;
mod buffer;
mod device;
mod elementwise;
mod error;
mod gating;
mod get_rows;
mod hyper;
mod instance;
mod kernels;
mod kv_mirror;
mod matmul;
mod mul_mm;
pub mod offload;
mod pipeline;
mod recorder;
mod recurrent;
mod retired;
mod shaders;
mod sparse_attention;
mod state_mirror;
pub mod transfer;
pub mod upload;

pub use adapter::{AdapterInfo, AdapterKind};
pub use attention::{AttnDims, KvFormat, MAX_HEAD_DIM};
pub use backend::{VkBuf, VkMem, Vulkan};
pub use buffer::{Buffer, Location};
pub use device::Device;
pub use elementwise::{GluAct, RopePairs};
pub use error::VkError;
pub use gating::{Cols, GateAct};
pub use instance::{adapters, Instance};
pub use kernels::Kernels;
pub use matmul::QMatrix;
pub use pipeline::Pipeline;
pub use recorder::Recorder;
pub use recurrent::{ConvDims, DeltaDims};
pub use shaders::MATMUL_TYPES;
pub use sparse_attention::{position_lists, SparseDims};
