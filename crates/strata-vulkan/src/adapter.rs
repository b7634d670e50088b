//! What a physical device offers: name, type, memory, subgroup size and shader features.

use std::fmt;

use ash::vk;

/// The kind of a physical device (`VkPhysicalDeviceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterKind {
    Discrete,
    Integrated,
    Virtual,
    /// A software rasteriser such as lavapipe.
    Cpu,
    Other,
}

/// One physical device as `strata devices` lists it, and as [`crate::Device::new`] opens it.
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    /// Position in the loader's list (`--device N`).
    pub index: usize,
    pub name: String,
    pub kind: AdapterKind,
    /// Vulkan version the driver offers (`VK_MAKE_API_VERSION` packed).
    pub api_version: u32,
    /// Bytes of the device-local memory heaps (system RAM for CPU and many integrated devices).
    pub vram_bytes: u64,
    /// Bytes of the device-local heaps this process may still take when the adapter was
    /// listed (the heaps' budget minus their usage, VK_EXT_memory_budget), `None` when the
    /// device lacks the extension.
    pub free_vram_bytes: Option<u64>,
    /// Default subgroup (wave/warp) size: 32 on NVIDIA, 64 (or 32) on AMD, 8 on lavapipe.
    pub subgroup_size: u32,
    /// Compute shaders may use subgroup arithmetic (`subgroupAdd`).
    pub subgroup_arithmetic: bool,
    /// `shaderFloat16`: f16 arithmetic in shaders.
    pub f16: bool,
    /// `shaderInt8`: 8-bit integer arithmetic in shaders.
    pub int8: bool,
    /// `storageBuffer8BitAccess`: 8-bit loads and stores from storage buffers.
    pub storage_8bit: bool,
    /// `storageBuffer16BitAccess`: 16-bit loads and stores from storage buffers.
    pub storage_16bit: bool,
    /// Largest storage buffer one descriptor may cover (bytes).
    pub max_storage_buffer_range: u64,
    /// Storage buffers one compute shader may bind (`maxPerStageDescriptorStorageBuffers`;
    /// Vulkan guarantees 4, GPUs and lavapipe offer far more; the kernels use at most 7).
    pub max_storage_buffers_per_stage: u32,
    /// Bytes of shared memory one compute workgroup may use (`maxComputeSharedMemorySize`;
    /// Vulkan guarantees 16 KiB, GPUs offer 32–64 KiB).
    pub max_compute_shared_memory: u32,
    /// A queue family with compute, if any.
    pub compute_family: Option<u32>,
    /// A transfer-only queue family (a DMA engine), where the device has one.
    pub transfer_family: Option<u32>,
    pub(crate) physical: vk::PhysicalDevice,
}

/// The device-local heaps' budget minus usage (VK_EXT_memory_budget), if the device has it.
fn memory_budget(instance: &ash::Instance, pd: vk::PhysicalDevice) -> Option<u64> {
    // SAFETY: `pd` came from this instance.
    let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.ok()?;
    let has = exts
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(ash::ext::memory_budget::NAME));
    if !has {
        return None;
    }
    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
    // SAFETY: `pd` came from this instance; the chained struct outlives the call, and the
    // device supports the extension whose struct it is.
    unsafe { instance.get_physical_device_memory_properties2(pd, &mut props) };
    let mem = props.memory_properties;
    let free = mem.memory_heaps[..mem.memory_heap_count as usize]
        .iter()
        .zip(budget.heap_budget.iter().zip(budget.heap_usage.iter()))
        .filter(|(h, _)| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|(_, (b, u))| b.saturating_sub(*u))
        .sum();
    Some(free)
}

impl AdapterInfo {
    /// Reads the properties of `pd`, the `index`-th device of `instance`.
    pub(crate) fn query(instance: &ash::Instance, pd: vk::PhysicalDevice, index: usize) -> Self {
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        // SAFETY: `pd` came from this instance; the chained struct outlives the call.
        unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
        let props = props2.properties;
        let (subgroup_size, sg_stages, sg_ops) = (
            subgroup.subgroup_size,
            subgroup.supported_stages,
            subgroup.supported_operations,
        );

        // The 1.2 feature structs are only valid to chain on a 1.2 device.
        let (mut f16, mut int8, mut storage_8bit) = (false, false, false);
        let mut s16 = vk::PhysicalDevice16BitStorageFeatures::default();
        if props.api_version >= vk::API_VERSION_1_2 {
            let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut f2 = vk::PhysicalDeviceFeatures2::default()
                .push_next(&mut v12)
                .push_next(&mut s16);
            // SAFETY: as above.
            unsafe { instance.get_physical_device_features2(pd, &mut f2) };
            f16 = v12.shader_float16 == vk::TRUE;
            int8 = v12.shader_int8 == vk::TRUE;
            storage_8bit = v12.storage_buffer8_bit_access == vk::TRUE;
        } else {
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut s16);
            // SAFETY: as above.
            unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        }

        // SAFETY: as above.
        let mem = unsafe { instance.get_physical_device_memory_properties(pd) };
        let vram_bytes = mem.memory_heaps[..mem.memory_heap_count as usize]
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .sum();
        let free_vram_bytes = memory_budget(instance, pd);

        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let compute_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .map(|i| i as u32);
        let transfer_family = families
            .iter()
            .position(|f| {
                f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                    && !f
                        .queue_flags
                        .intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
            })
            .map(|i| i as u32);

        let name = props
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "(unnamed)".into());
        let kind = match props.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => AdapterKind::Discrete,
            vk::PhysicalDeviceType::INTEGRATED_GPU => AdapterKind::Integrated,
            vk::PhysicalDeviceType::VIRTUAL_GPU => AdapterKind::Virtual,
            vk::PhysicalDeviceType::CPU => AdapterKind::Cpu,
            _ => AdapterKind::Other,
        };
        Self {
            index,
            name,
            kind,
            api_version: props.api_version,
            vram_bytes,
            free_vram_bytes,
            subgroup_size,
            subgroup_arithmetic: sg_stages.contains(vk::ShaderStageFlags::COMPUTE)
                && sg_ops.contains(vk::SubgroupFeatureFlags::ARITHMETIC),
            f16,
            int8,
            storage_8bit,
            storage_16bit: s16.storage_buffer16_bit_access == vk::TRUE,
            max_storage_buffer_range: props.limits.max_storage_buffer_range as u64,
            max_storage_buffers_per_stage: props.limits.max_per_stage_descriptor_storage_buffers,
            max_compute_shared_memory: props.limits.max_compute_shared_memory_size,
            compute_family,
            transfer_family,
            physical: pd,
        }
    }

    /// The shader features as short names (`subgroup-arith f16 int8 storage8 storage16`).
    pub fn features(&self) -> Vec<&'static str> {
        let flags = [
            (self.subgroup_arithmetic, "subgroup-arith"),
            (self.f16, "f16"),
            (self.int8, "int8"),
            (self.storage_8bit, "storage8"),
            (self.storage_16bit, "storage16"),
            (self.transfer_family.is_some(), "transfer-queue"),
        ];
        flags.iter().filter(|f| f.0).map(|f| f.1).collect()
    }
}

impl fmt::Display for AdapterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdapterKind::Discrete => "discrete",
            AdapterKind::Integrated => "integrated",
            AdapterKind::Virtual => "virtual",
            AdapterKind::Cpu => "cpu",
            AdapterKind::Other => "other",
        })
    }
}

/// One line: `0: NAME (discrete, Vulkan 1.3, 24.0 GiB, subgroup 32; f16 int8 …)`.
impl fmt::Display for AdapterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({}, Vulkan {}.{}, {:.1} GiB, subgroup {}; {})",
            self.index,
            self.name,
            self.kind,
            vk::api_version_major(self.api_version),
            vk::api_version_minor(self.api_version),
            self.vram_bytes as f64 / (1u64 << 30) as f64,
            self.subgroup_size,
            self.features().join(" ")
        )
    }
}
