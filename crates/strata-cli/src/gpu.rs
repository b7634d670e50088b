//! `-ngl/--gpu-layers N`, `--vram-budget SIZE` and `--device N`: where a loaded model's
//! layers run.
//!
//! With the `vulkan` feature, a Vulkan device and a dense model (llama, qwen2, qwen3,
//! gemma3), qwen3moe, qwen3next or qwen4exp, `-ngl N` puts the model's LAST N layers (llama.cpp's
//! convention), its output norm and its LM head on the device, their weights uploaded at
//! load; the CPU runs the embedding and the first layers and hands the residual stream to
//! the device at every run. N ≥ the layer count (or -1) runs every layer and the embedding on
//! the device. Layers are placed from the last one backwards while their weights and KV
//! mirrors (at the session's context) fit the budget: `--vram-budget`, else the device's free
//! memory minus 10 % or 512 MiB, whichever is larger; fewer than asked are placed when the
//! budget runs out, with a notice. qwen4exp's MTP draft layer stays on the CPU. One stderr
//! line says what went where; when nothing fits, or there is no loader or device, one line
//! says so and the CPU runs the model.

use strata_engine::{KvType, Model};

/// Places `model` on the GPU as `-ngl gpu_layers --vram-budget budget --device device` asks,
/// for sessions of `n_ctx` positions with `kv` caches (see the module docs).
pub fn place(
    model: &mut Model,
    gpu_layers: Option<i64>,
    budget: Option<u64>,
    device: usize,
    ctx: (usize, KvType),
) {
    let Some(n) = gpu_layers.filter(|n| *n != 0) else {
        return;
    };
    let want = usize::try_from(n).unwrap_or(usize::MAX);
    if let Err(why) = offload(model, want, budget, device, ctx) {
        eprintln!("notice: {why}; running on the CPU");
    }
}

#[cfg(feature = "vulkan")]
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// `bytes` in GiB from 1 GiB up, else in MiB.
#[cfg(feature = "vulkan")]
fn gib(bytes: u64) -> String {
    match bytes >= 1 << 30 {
        true => format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64),
        false => mib(bytes),
    }
}

#[cfg(feature = "vulkan")]
fn offload(
    model: &mut Model,
    want: usize,
    budget: Option<u64>,
    device: usize,
    (n_ctx, kv): (usize, KvType),
) -> Result<(), String> {
    use strata_vulkan::offload::{default_budget, offload};
    use strata_vulkan::{VkError, Vulkan};

    let vk = Vulkan::new(device).map_err(|e| match e {
        // These say which device is missing and why.
        VkError::NoLoader(_) | VkError::NoDevice(_) => e.to_string(),
        e => format!("Vulkan device {device}: {e}"),
    })?;
    let info = vk.device().info().clone();
    let budget = budget.unwrap_or_else(|| default_budget(&info));
    let n_layer = model.config().n_layer;
    let done = offload(model, vk, want, budget, (n_ctx, kv))
        .map_err(|e| format!("the weights could not be placed on the Vulkan device: {e}"))?
        .ok_or_else(|| {
            format!(
                "the LM head and layer {} do not fit the {} budget of Vulkan device {device} ({})",
                n_layer - 1,
                gib(budget),
                info.name
            )
        })?;
    let p = &done.plan;
    let on = p.layers.len();
    if on < p.wanted {
        eprintln!(
            "notice: -ngl asked for {} layers, {on} fit the {} budget (--vram-budget)",
            p.wanted,
            gib(budget)
        );
    }
    let (what, cpu) = match p.layers.start {
        0 => (", the embedding and the LM head", String::new()),
        k => (
            " and the LM head",
            format!("; the CPU runs the embedding and layers 0..{k}"),
        ),
    };
    eprintln!(
        "offloaded {on}/{n_layer} layers ({}..{n_layer}){what} to Vulkan device {device} ({}): {} of weights in {:.1} s, KV up to {} at {n_ctx} positions, budget {}{cpu}",
        p.layers.start,
        info.name,
        mib(done.weight_bytes),
        done.seconds,
        mib(p.kv_bytes),
        gib(budget),
    );
    Ok(())
}

#[cfg(not(feature = "vulkan"))]
fn offload(
    _: &mut Model,
    _: usize,
    _: Option<u64>,
    _: usize,
    _: (usize, KvType),
) -> Result<(), String> {
    Err("this build has no GPU backend (built without the `vulkan` feature), -ngl ignored".into())
}
