//! Streaming a large upload (a weight matrix at load) into device memory through two staging
//! buffers of at most [`PIECE`] bytes, on the device's transfer (DMA) queue where it has one:
//! the host copies the next piece into one staging buffer while the device copies the
//! previous piece out of the other. Staging memory stays bounded (2 × [`PIECE`], not the
//! size of the upload), and uploads leave the compute queue free.
//!
//! Every copy of a call has finished when it returns (also when it fails), so nothing it
//! started reads or writes memory afterwards.

use ash::vk;

use crate::buffer::{Buffer, Location};
use crate::device::Device;
use crate::error::{Check, VkError};

/// Bytes of one staging buffer.
pub const PIECE: usize = 16 << 20;

/// Copies `bytes` into `dst` from byte 0 in pieces of at most `piece` bytes (see the module
/// docs). `dst` must be device memory of at least `bytes.len()` bytes.
///
/// Errors: [`VkError::Shape`] when `bytes` does not fit `dst`; allocation and submission
/// errors.
pub fn stream(dev: &Device, dst: &Buffer, bytes: &[u8], piece: usize) -> Result<(), VkError> {
    if bytes.len() as u64 > dst.size() {
        return Err(VkError::Shape {
            op: "upload",
            what: format!("{} bytes into a buffer of {}", bytes.len(), dst.size()),
        });
    }
    if bytes.is_empty() {
        return Ok(());
    }
    // Whole words, so that every piece starts at a multiple of 4 (Buffer sizes are words).
    let piece = (piece.clamp(4, PIECE.max(4)) / 4 * 4).min(bytes.len().div_ceil(4) * 4);
    let mut ring = Ring::new(dev, piece, bytes.len().div_ceil(piece).min(2))?;
    let result = bytes
        .chunks(piece)
        .enumerate()
        .try_for_each(|(i, part)| ring.copy(dst, (i * piece) as u64, part));
    // Waits for every copy in flight whatever happened (also in `Drop`, for a panic).
    let waited = ring.wait_all();
    result.and(waited)
}

/// Staging buffers, each with its command buffer and fence, used in turn.
struct Ring {
    dev: Device,
    pool: vk::CommandPool,
    slots: Vec<Slot>,
    next: usize,
}

struct Slot {
    staging: Buffer,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// A copy was submitted and its fence not yet waited on.
    pending: bool,
}

/// The upload queue: the transfer queue where the device has one, else the compute queue.
fn queue(dev: &Device) -> (&std::sync::Mutex<vk::Queue>, u32) {
    match &dev.ctx.transfer {
        Some((q, family)) => (q, *family),
        None => (&dev.ctx.compute, dev.ctx.compute_family),
    }
}

impl Ring {
    /// `slots` staging buffers of `piece` bytes.
    fn new(dev: &Device, piece: usize, slots: usize) -> Result<Self, VkError> {
        let raw = &dev.ctx.raw;
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue(dev).1)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY (all calls here): `raw` is live, create-infos outlive their calls, and the
        // objects are destroyed in `Drop` (which runs for a partly built ring too).
        let pool = unsafe { raw.create_command_pool(&info, None) }.check("vkCreateCommandPool")?;
        let mut ring = Ring {
            dev: dev.clone(),
            pool,
            slots: Vec::new(),
            next: 0,
        };
        for _ in 0..slots {
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let cmd = unsafe { raw.allocate_command_buffers(&alloc) }
                .check("vkAllocateCommandBuffers")?[0];
            let staging = Buffer::new(dev, piece as u64, Location::Host)?;
            let fence = unsafe { raw.create_fence(&vk::FenceCreateInfo::default(), None) }
                .check("vkCreateFence")?;
            ring.slots.push(Slot {
                staging,
                cmd,
                fence,
                pending: false,
            });
        }
        Ok(ring)
    }

    /// Copies `part` into `dst` at byte `at` through the next staging buffer, once the copy
    /// that last used it has finished.
    fn copy(&mut self, dst: &Buffer, at: u64, part: &[u8]) -> Result<(), VkError> {
        let i = self.next;
        self.next = (i + 1) % self.slots.len();
        self.wait(i)?;
        let raw = &self.dev.ctx.raw;
        let slot = &mut self.slots[i];
        // Whole words (the staging buffer and `dst` are sized in words), the last one
        // padded with zeros.
        let size = part.len().div_ceil(4) * 4;
        if let Some(m) = slot.staging.mapped_mut() {
            m[..part.len()].copy_from_slice(part);
            m[part.len()..size].fill(0);
        }
        let size = size as u64;
        let region = [vk::BufferCopy {
            src_offset: 0,
            dst_offset: at,
            size: size.min(dst.size() - at),
        }];
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let (queue, _) = queue(&self.dev);
        // SAFETY: the command buffer is idle (its fence was waited on and it was reset); the
        // regions lie within both buffers; the queue lock serialises submissions; `dst`
        // outlives the copy because `stream` waits for every copy before it returns.
        unsafe {
            raw.reset_command_buffer(slot.cmd, vk::CommandBufferResetFlags::empty())
                .check("vkResetCommandBuffer")?;
            raw.begin_command_buffer(slot.cmd, &begin)
                .check("vkBeginCommandBuffer")?;
            raw.cmd_copy_buffer(slot.cmd, slot.staging.raw, dst.raw, &region);
            raw.end_command_buffer(slot.cmd)
                .check("vkEndCommandBuffer")?;
            let cmds = [slot.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            let q = queue.lock().unwrap_or_else(|p| p.into_inner());
            raw.queue_submit(*q, &submit, slot.fence)
                .check("vkQueueSubmit")?;
        }
        slot.pending = true;
        Ok(())
    }

    /// Waits for slot `i`'s copy, if one is in flight, and resets its fence.
    fn wait(&mut self, i: usize) -> Result<(), VkError> {
        let slot = &mut self.slots[i];
        if !slot.pending {
            return Ok(());
        }
        let raw = &self.dev.ctx.raw;
        // SAFETY: the fence belongs to this device and was submitted with the slot's copy.
        unsafe {
            raw.wait_for_fences(&[slot.fence], true, u64::MAX)
                .check("vkWaitForFences")?;
            raw.reset_fences(&[slot.fence]).check("vkResetFences")?;
        }
        slot.pending = false;
        Ok(())
    }

    /// Waits for every copy in flight; the first error is returned after all were tried.
    fn wait_all(&mut self) -> Result<(), VkError> {
        let mut first = Ok(());
        for i in 0..self.slots.len() {
            let r = self.wait(i);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let raw = &self.dev.ctx.raw;
        // A copy still in flight (a panic between submit and wait) must finish before its
        // staging buffer is freed: wait for the whole device then.
        if self.slots.iter().any(|s| s.pending) {
            // SAFETY: the device is live.
            let _ = unsafe { raw.device_wait_idle() };
        }
        for s in &self.slots {
            // SAFETY: the fence is idle (waited on above or never submitted).
            unsafe { raw.destroy_fence(s.fence, None) };
        }
        // SAFETY: the command buffers are idle; destroying the pool frees them.
        unsafe { raw.destroy_command_pool(self.pool, None) };
    }
}
