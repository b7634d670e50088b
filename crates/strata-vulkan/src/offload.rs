//! A loaded model's last layers onto a Vulkan device under a memory budget (`strata run
//! -ngl N --vram-budget SIZE`): [`strata_engine::offload::plan`] picks the layers,
//! [`offload`] uploads their weights and hands the model the device.

use std::time::Instant;

use strata_engine::backend::OnDevice;
use strata_engine::offload::{plan, Plan};
use strata_engine::{KvType, Model};

use crate::adapter::AdapterInfo;
use crate::error::VkError;
use crate::Vulkan;

/// Smallest margin [`default_budget`] leaves free.
pub const MARGIN_MIN: u64 = 512 << 20;

/// The bytes a model may take on a device when no budget is given: its free device-local
/// memory (VK_EXT_memory_budget; else the device-local heaps' size) minus a margin of 10 %
/// of that or [`MARGIN_MIN`], whichever is larger (for the driver, activations and other
/// processes).
pub fn default_budget(info: &AdapterInfo) -> u64 {
    let free = info.free_vram_bytes.unwrap_or(info.vram_bytes);
    free.saturating_sub((free / 10).max(MARGIN_MIN))
}

/// What [`offload`] did.
#[derive(Debug)]
pub struct Offloaded {
    pub plan: Plan,
    /// Bytes of weights uploaded.
    pub weight_bytes: u64,
    /// Seconds the upload took.
    pub seconds: f64,
}

/// Places up to `want` of `model`'s last layers (≥ the layer count: all, with the
/// embedding), its output norm and LM head on `vk`, within `budget` bytes of weights and KV
/// mirrors for sessions of `n_ctx` positions with `kv` caches; uploads their weights now and runs them there
/// from now on. `Ok(None)` when not even one layer fits: the model stays on the CPU.
///
/// Errors: an upload failed (an unsupported type, out of device memory); the model is then
/// unchanged.
pub fn offload(
    model: &mut Model,
    vk: Vulkan,
    want: usize,
    budget: u64,
    ctx: (usize, KvType),
) -> Result<Option<Offloaded>, VkError> {
    let p = plan(model.graph(), model.config(), want, budget, ctx);
    if p.is_empty() {
        return Ok(None);
    }
    let t0 = Instant::now();
    vk.preload(&p.matrices(model.graph()))?;
    let done = Offloaded {
        weight_bytes: vk.weight_bytes(),
        seconds: t0.elapsed().as_secs_f64(),
        plan: p.clone(),
    };
    model.set_device_from(Box::new(OnDevice::new(vk)), p.layers.start);
    Ok(Some(done))
}
