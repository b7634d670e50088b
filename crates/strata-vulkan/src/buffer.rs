//! Storage buffers: device-local memory for kernels, host-visible memory for staging.

use ash::vk;

use crate::device::Device;
use crate::error::{Check, VkError};
use crate::retired::Dead;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// Device-local (VRAM): what kernels read and write. Never mapped; filled and read back
    /// through a staging buffer ([`crate::transfer`]).
    Device,
    /// Host-visible, coherent and mapped for the buffer's life: staging for uploads and
    /// downloads (cached where the device offers it, for fast reads back).
    Host,
}

/// A storage buffer of `size` bytes (rounded up to whole 4-byte words: shaders read words).
/// Usable as a kernel binding and as a copy source and destination.
pub struct Buffer {
    dev: Device,
    pub(crate) raw: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    location: Location,
    mapped: Option<Mapped>,
}

/// The host address of a mapped buffer.
struct Mapped(*mut u8);
// SAFETY: the pointer is to device memory mapped for the buffer's life; access goes through
// `&self`/`&mut self` methods of `Buffer`, which bound it by `size`.
unsafe impl Send for Mapped {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Mapped {}

impl Buffer {
    /// Allocates `size` bytes (at least one word) at `location`.
    ///
    /// Errors: [`VkError::NoMemoryType`], or [`VkError::Call`] (out of device memory;
    /// a size above the device's `maxStorageBufferRange` is [`VkError::Shape`]).
    pub fn new(dev: &Device, size: u64, location: Location) -> Result<Self, VkError> {
        let size = size.max(4).div_ceil(4) * 4;
        let max = dev.info().max_storage_buffer_range;
        if size > max {
            return Err(VkError::Shape {
                op: "buffer",
                what: format!("{size} bytes exceed the device's storage buffer range {max}"),
            });
        }
        let raw_dev = &dev.ctx.raw;
        let info = vk::BufferCreateInfo::default().size(size).usage(
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
        );
        // With a transfer queue beside the compute queue, buffers are shared by both
        // families (uploads on one, kernels on the other) without ownership transfers.
        let families = dev
            .ctx
            .transfer
            .as_ref()
            .map(|(_, tf)| [dev.ctx.compute_family, *tf]);
        let info = match &families {
            Some(f) => info
                .sharing_mode(vk::SharingMode::CONCURRENT)
                .queue_family_indices(f),
            None => info.sharing_mode(vk::SharingMode::EXCLUSIVE),
        };
        // SAFETY: `raw_dev` is live; `info` outlives the call.
        let raw = unsafe { raw_dev.create_buffer(&info, None) }.check("vkCreateBuffer")?;
        // SAFETY: `raw` was just created on this device.
        let req = unsafe { raw_dev.get_buffer_memory_requirements(raw) };
        let (want, prefer, what) = match location {
            Location::Device => (
                vk::MemoryPropertyFlags::DEVICE_LOCAL,
                vk::MemoryPropertyFlags::empty(),
                "device-local",
            ),
            Location::Host => (
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
                vk::MemoryPropertyFlags::HOST_CACHED,
                "host-visible",
            ),
        };
        let destroy = |e| {
            // SAFETY: `raw` is unused and unbound.
            unsafe { raw_dev.destroy_buffer(raw, None) };
            e
        };
        let type_index = dev
            .memory_type(req.memory_type_bits, want, prefer)
            .ok_or(VkError::NoMemoryType(what))
            .map_err(destroy)?;
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index);
        // SAFETY: as above.
        let memory = unsafe { raw_dev.allocate_memory(&alloc, None) }
            .check("vkAllocateMemory")
            .map_err(destroy)?;
        let free = |e| {
            // SAFETY: `memory` is unbound or bound to `raw` only, which is destroyed too.
            unsafe { raw_dev.free_memory(memory, None) };
            destroy(e)
        };
        // SAFETY: `memory` is fresh and large enough (`req.size`).
        unsafe { raw_dev.bind_buffer_memory(raw, memory, 0) }
            .check("vkBindBufferMemory")
            .map_err(free)?;
        let mapped = match location {
            Location::Device => None,
            Location::Host => {
                // SAFETY: host-visible memory, mapped once for the buffer's life.
                let p = unsafe {
                    raw_dev.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                }
                .check("vkMapMemory")
                .map_err(free)?;
                Some(Mapped(p.cast()))
            }
        };
        Ok(Self {
            dev: dev.clone(),
            raw,
            memory,
            size,
            location,
            mapped,
        })
    }

    /// Size in bytes (a multiple of 4).
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn location(&self) -> Location {
        self.location
    }

    /// The mapped bytes of a [`Location::Host`] buffer; `None` for a device buffer.
    pub fn mapped(&self) -> Option<&[u8]> {
        // SAFETY: mapped for `size` bytes for the buffer's life; coherent memory, and no
        // device work writes it while `&self` is held by the caller after a fence wait.
        self.mapped
            .as_ref()
            .map(|m| unsafe { std::slice::from_raw_parts(m.0, self.size as usize) })
    }

    /// The mapped bytes of a [`Location::Host`] buffer, writable.
    pub fn mapped_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: as in `mapped`, and `&mut self` makes this the only view.
        self.mapped
            .as_ref()
            .map(|m| unsafe { std::slice::from_raw_parts_mut(m.0, self.size as usize) })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // A batch still being recorded or running may bind the buffer: the device destroys
        // it once no batch is open (`crate::retired`).
        self.dev.ctx.release(Dead {
            buffer: self.raw,
            memory: self.memory,
            mapped: self.mapped.is_some(),
        });
    }
}
