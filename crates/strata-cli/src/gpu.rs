//! `-ngl/--gpu-layers N` and `--device N`: where a loaded model's layers run.
//!
//! With the `vulkan` feature, a Vulkan device and a dense model (llama, qwen2, qwen3,
//! gemma3), qwen3moe, qwen3next or qwen4exp, `-ngl N` with N ≥ the layer count (or -1) runs
//! every layer (with the routed experts, Gated DeltaNet layers and shared experts, and
//! qwen4exp's hyper-connections, QSA and PLE), the embedding and the LM head on the device;
//! its weights are uploaded at load. qwen4exp's MTP draft layer stays on the CPU. Partial
//! offload, a missing loader or device: one line saying so, and the CPU runs the model.

use strata_engine::Model;

/// Places `model` on the GPU as `-ngl gpu_layers --device device` asks (see the module docs).
pub fn place(model: &mut Model, gpu_layers: Option<i64>, device: usize) {
    let Some(n) = gpu_layers.filter(|n| *n != 0) else {
        return;
    };
    let n_layer = model.config().n_layer;
    if n >= 0 && (n as u64) < n_layer as u64 {
        eprintln!(
            "notice: partial offload (-ngl {n} of {n_layer} layers) is not supported yet; running on the CPU (-ngl {n_layer} or more runs every layer on the GPU)"
        );
        return;
    }
    if let Err(why) = offload(model, device) {
        eprintln!("notice: {why}; running on the CPU");
    }
}

#[cfg(feature = "vulkan")]
fn offload(model: &mut Model, device: usize) -> Result<(), String> {
    use strata_engine::backend::OnDevice;
    use strata_vulkan::Vulkan;

    let arch = model.config().arch.name();
    let mats = model
        .graph()
        .device_matrices()
        .ok_or_else(|| format!("{arch} does not run on the Vulkan backend yet"))?;
    let vk = Vulkan::new(device).map_err(|e| format!("no Vulkan device {device} ({e})"))?;
    let t0 = std::time::Instant::now();
    vk.preload(&mats)
        .map_err(|e| format!("the weights could not be placed on the Vulkan device: {e}"))?;
    let name = &vk.device().info().name;
    let n_layer = model.config().n_layer;
    eprintln!(
        "offloaded {n_layer}/{n_layer} layers, the embedding and the LM head to Vulkan device {device} ({name}): {:.1} MiB of weights in {:.1} s; the KV cache grows on the device as tokens are fed",
        vk.weight_bytes() as f64 / (1u64 << 20) as f64,
        t0.elapsed().as_secs_f64()
    );
    model.set_device(Box::new(OnDevice::new(vk)));
    Ok(())
}

#[cfg(not(feature = "vulkan"))]
fn offload(_: &mut Model, _: usize) -> Result<(), String> {
    Err("this build has no GPU backend (rebuild with `--features vulkan`), -ngl ignored".into())
}
