//! An opened device: its compute queue (and transfer queue, where it has one) and memory types.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::adapter::AdapterInfo;
use crate::error::{Check, VkError};
use crate::instance::Instance;
use crate::retired::{self, Dead, Retired};

/// A logical device on one adapter. Cheap to clone (one shared handle); buffers, pipelines and
/// recorders hold a clone, so the device lives until the last of them drops.
#[derive(Clone)]
pub struct Device {
    pub(crate) ctx: Arc<Ctx>,
}

/// The shared state behind [`Device`].
pub(crate) struct Ctx {
    pub(crate) raw: ash::Device,
    pub(crate) info: AdapterInfo,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    /// Queue handles need external synchronisation for submission.
    pub(crate) compute: Mutex<vk::Queue>,
    pub(crate) compute_family: u32,
    /// A dedicated transfer (DMA) queue and its family, where the device has one: streamed
    /// uploads (`crate::upload`, weights at load) run on it, and every buffer is then shared
    /// by both families (`Buffer::new`).
    pub(crate) transfer: Option<(Mutex<vk::Queue>, u32)>,
    /// Open batches and the buffers dropped while they are open ([`crate::retired`]).
    retired: Mutex<Retired>,
    /// Queue submissions so far (each is followed by a fence wait).
    submissions: AtomicU64,
    // Declared last: dropped after `raw` is destroyed in `Drop`.
    _instance: Arc<Instance>,
}

impl Device {
    /// Opens adapter `index` (as [`crate::adapters`] numbers them).
    ///
    /// Errors: [`VkError::NoLoader`] / [`VkError::NoDevice`] without Vulkan or without that
    /// adapter; [`VkError::Unsupported`] for a device below Vulkan 1.1 or without a compute
    /// queue; [`VkError::Call`] when device creation fails.
    pub fn new(index: usize) -> Result<Self, VkError> {
        let instance = Instance::new()?;
        let adapters = instance.adapters()?;
        let n = adapters.len();
        let info = adapters
            .into_iter()
            .nth(index)
            .ok_or_else(|| VkError::NoDevice(format!(" with index {index} (found {n})")))?;
        Self::open(instance, info)
    }

    fn open(instance: Arc<Instance>, info: AdapterInfo) -> Result<Self, VkError> {
        let unsupported = |why: &str| VkError::Unsupported {
            device: info.name.clone(),
            why: why.into(),
        };
        if info.api_version < vk::API_VERSION_1_1 {
            return Err(unsupported("Vulkan 1.1 is required"));
        }
        let compute_family = info
            .compute_family
            .ok_or_else(|| unsupported("no compute queue"))?;
        let priority = [1.0f32];
        let mut queues = vec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(compute_family)
            .queue_priorities(&priority)];
        if let Some(tf) = info.transfer_family {
            queues.push(
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(tf)
                    .queue_priorities(&priority),
            );
        }
        let create = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: the physical device belongs to `instance`; `create` outlives the call.
        let raw = unsafe { instance.raw.create_device(info.physical, &create, None) }
            .check("vkCreateDevice")?;
        // SAFETY: one queue of each family was requested above.
        let compute = unsafe { raw.get_device_queue(compute_family, 0) };
        let transfer = info
            .transfer_family
            // SAFETY: as above.
            .map(|tf| (Mutex::new(unsafe { raw.get_device_queue(tf, 0) }), tf));
        // SAFETY: as above.
        let memory = unsafe {
            instance
                .raw
                .get_physical_device_memory_properties(info.physical)
        };
        Ok(Self {
            ctx: Arc::new(Ctx {
                raw,
                info,
                memory,
                compute: Mutex::new(compute),
                compute_family,
                transfer,
                retired: Mutex::new(Retired::default()),
                submissions: AtomicU64::new(0),
                _instance: instance,
            }),
        })
    }

    /// The adapter this device runs on.
    pub fn info(&self) -> &AdapterInfo {
        &self.ctx.info
    }

    /// True when the device has a transfer-only queue (opened beside the compute queue).
    pub fn has_transfer_queue(&self) -> bool {
        self.ctx.transfer.is_some()
    }

    /// Queue submissions so far by every recorder on this device. Each is followed by a fence
    /// wait, so the difference over a forward counts the times the host waited for the
    /// device (the tests bound it).
    pub fn submissions(&self) -> u64 {
        self.ctx.submissions.load(Ordering::Relaxed)
    }

    /// Waits until the device is idle.
    ///
    /// Errors: [`VkError::Call`] (e.g. device lost).
    pub fn wait_idle(&self) -> Result<(), VkError> {
        // SAFETY: `raw` is live; queues are not used concurrently by this call's contract
        // (every submission in this crate holds the queue lock and waits on its fence).
        unsafe { self.ctx.raw.device_wait_idle() }.check("vkDeviceWaitIdle")
    }

    /// The index of a memory type allowed by `type_bits` that has all of `want`, preferring
    /// one that also has `prefer`.
    pub(crate) fn memory_type(
        &self,
        type_bits: u32,
        want: vk::MemoryPropertyFlags,
        prefer: vk::MemoryPropertyFlags,
    ) -> Option<u32> {
        let m = &self.ctx.memory;
        let ok = |i: u32, flags: vk::MemoryPropertyFlags| {
            type_bits & (1 << i) != 0 && m.memory_types[i as usize].property_flags.contains(flags)
        };
        (0..m.memory_type_count)
            .find(|&i| ok(i, want | prefer))
            .or_else(|| (0..m.memory_type_count).find(|&i| ok(i, want)))
    }
}

impl Ctx {
    fn retired(&self) -> MutexGuard<'_, Retired> {
        self.retired.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A recorder starts a batch.
    pub(crate) fn open_batch(&self) {
        self.retired().open();
    }

    /// A recorder's batch has run (or will never run): the last one destroys the buffers
    /// retired meanwhile.
    pub(crate) fn close_batch(&self) {
        let dead = self.retired().close();
        for d in dead {
            retired::destroy(&self.raw, d);
        }
    }

    /// A dropped buffer: destroyed now, or when the open batches have run.
    pub(crate) fn release(&self, d: Dead) {
        let now = self.retired().retire(d);
        if let Some(d) = now {
            retired::destroy(&self.raw, d);
        }
    }

    /// Counts one queue submission.
    pub(crate) fn submitted(&self) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: every object made from the device holds a `Device` clone, so none is alive
        // here; waiting first lets in-flight work finish.
        unsafe {
            let _ = self.raw.device_wait_idle();
            let dead = self.retired().dead_all();
            for d in dead {
                retired::destroy(&self.raw, d);
            }
            self.raw.destroy_device(None);
        }
    }
}
