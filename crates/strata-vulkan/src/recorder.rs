//! Recording kernels and copies into one command buffer, then submitting and waiting.

use std::marker::PhantomData;
use std::sync::Arc;

use ash::vk;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Check, VkError};
use crate::pipeline::Pipeline;

/// Descriptor sets per pool; a recorder adds pools as a batch needs them.
const SETS_PER_POOL: u32 = 1024;
/// Storage-buffer bindings per set the pools are sized for (the kernels use at most 7: the
/// delta rule; `Pipeline::new` checks the device allows that many).
const BINDINGS_PER_SET: u32 = 8;

/// A batch of dispatches and copies on the compute queue. Each command is followed by a
/// full memory barrier (compute and transfer), so commands see the results of the ones
/// recorded before them; [`Recorder::submit`] runs the batch and waits on a fence. The
/// `strata_vulkan::Vulkan` backend keeps one recorder open across the ops of a forward and
/// submits it only where the host reads device data.
///
/// The buffers a batch uses are borrowed for the recorder's life `'a`, and it holds its
/// pipelines, so nothing the device may still read can be freed while the recorder lives:
///
/// ```compile_fail
/// # fn f(dev: &strata_vulkan::Device, k: &strata_vulkan::Kernels)
/// #     -> Result<(), strata_vulkan::VkError> {
/// let mut rec = strata_vulkan::Recorder::new(dev)?;
/// {
///     let x = strata_vulkan::transfer::upload_f32(dev, &[1.0])?;
///     k.scale(&mut rec, &x, 1, 2.0)?; // error: `x` does not live long enough
/// }
/// rec.submit()?;
/// # Ok(()) }
/// ```
///
/// ```no_run
/// # fn f(dev: &strata_vulkan::Device, k: &strata_vulkan::Kernels,
/// #      x: &strata_vulkan::Buffer) -> Result<(), strata_vulkan::VkError> {
/// let mut rec = strata_vulkan::Recorder::new(dev)?;
/// k.scale(&mut rec, x, 64, 0.5)?;
/// k.scale(&mut rec, x, 64, 2.0)?; // sees the first scale's result
/// rec.submit()?;
/// # Ok(()) }
/// ```
pub struct Recorder<'a> {
    dev: Device,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    descriptor_pools: Vec<vk::DescriptorPool>,
    /// Sets allocated from the last pool.
    sets_in_last: u32,
    recording: bool,
    /// Staging buffers that must live until the batch has run.
    keep: Vec<Buffer>,
    /// Buffers shared with a kernel set (the i-quant tables) that the batch reads.
    shared: Vec<Arc<Buffer>>,
    /// The pipelines of the recorded dispatches.
    pipelines: Vec<Arc<Pipeline>>,
    /// The buffers of the recorded commands are borrowed for `'a`.
    uses: PhantomData<&'a Buffer>,
}

impl<'a> Recorder<'a> {
    /// A recorder with its own command pool, fence and descriptor pools.
    ///
    /// Errors: [`VkError::Call`].
    pub fn new(dev: &Device) -> Result<Self, VkError> {
        let raw = &dev.ctx.raw;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(dev.ctx.compute_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY (all calls here): `raw` is live, create-infos outlive their calls, and the
        // objects are destroyed in `Drop`.
        let pool =
            unsafe { raw.create_command_pool(&pool_info, None) }.check("vkCreateCommandPool")?;
        let mut me = Self {
            dev: dev.clone(),
            pool,
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            descriptor_pools: Vec::new(),
            sets_in_last: SETS_PER_POOL,
            recording: false,
            keep: Vec::new(),
            shared: Vec::new(),
            pipelines: Vec::new(),
            uses: PhantomData,
        };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        me.cmd =
            unsafe { raw.allocate_command_buffers(&alloc) }.check("vkAllocateCommandBuffers")?[0];
        me.fence = unsafe { raw.create_fence(&vk::FenceCreateInfo::default(), None) }
            .check("vkCreateFence")?;
        Ok(me)
    }

    /// This recorder for buffers borrowed for any lifetime `'b`: the crate's backend keeps
    /// one batch open across ops, recording buffers that it may replace or drop before the
    /// batch runs.
    pub(crate) fn scoped<'b>(&mut self) -> &mut Recorder<'b> {
        // SAFETY: `Recorder<'a>` and `Recorder<'b>` differ only in the lifetime of a
        // `PhantomData`, so they have one layout. The lifetime only guards that recorded
        // buffers outlive the batch, and a buffer dropped while a batch is open is not
        // destroyed but retired by its device until no batch is open (`crate::retired`).
        unsafe { &mut *(self as *mut Recorder<'a>).cast::<Recorder<'b>>() }
    }

    /// The device this recorder submits to.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    fn begin(&mut self) -> Result<(), VkError> {
        if !self.recording {
            let info = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: the command buffer is idle (reset after the last submit's fence).
            unsafe { self.dev.ctx.raw.begin_command_buffer(self.cmd, &info) }
                .check("vkBeginCommandBuffer")?;
            self.recording = true;
            self.dev.ctx.open_batch();
        }
        Ok(())
    }

    fn descriptor_set(&mut self, p: &Pipeline) -> Result<vk::DescriptorSet, VkError> {
        let raw = &self.dev.ctx.raw;
        if self.sets_in_last == SETS_PER_POOL {
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: SETS_PER_POOL * BINDINGS_PER_SET,
            }];
            let info = vk::DescriptorPoolCreateInfo::default()
                .max_sets(SETS_PER_POOL)
                .pool_sizes(&sizes);
            // SAFETY: as in `new`.
            let pool = unsafe { raw.create_descriptor_pool(&info, None) }
                .check("vkCreateDescriptorPool")?;
            self.descriptor_pools.push(pool);
            self.sets_in_last = 0;
        }
        let layouts = [p.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(
                *self
                    .descriptor_pools
                    .last()
                    .expect("a pool was just ensured"),
            )
            .set_layouts(&layouts);
        // SAFETY: the pool has room (counted by `sets_in_last`).
        let set =
            unsafe { raw.allocate_descriptor_sets(&info) }.check("vkAllocateDescriptorSets")?[0];
        self.sets_in_last += 1;
        Ok(set)
    }

    /// Records `p` over `groups` workgroups with `bufs` bound to bindings `0..` and `push` as
    /// its push constants.
    ///
    /// Errors: [`VkError::Shape`] when the binding count or push size differ from the
    /// pipeline's; [`VkError::Call`].
    pub fn dispatch(
        &mut self,
        p: &Arc<Pipeline>,
        bufs: &[&'a Buffer],
        push: &[u8],
        groups: [u32; 3],
    ) -> Result<(), VkError> {
        self.record_dispatch(p, bufs, push, groups)
    }

    /// [`Recorder::dispatch`] with buffers the caller keeps alive until the batch has run
    /// some other way (its own borrow, or [`Recorder::keep`]).
    pub(crate) fn record_dispatch(
        &mut self,
        p: &Arc<Pipeline>,
        bufs: &[&Buffer],
        push: &[u8],
        groups: [u32; 3],
    ) -> Result<(), VkError> {
        if bufs.len() != p.n_bindings as usize
            || push.len() != p.push_bytes as usize
            || bufs.len() > BINDINGS_PER_SET as usize
        {
            return Err(VkError::Shape {
                op: p.name,
                what: format!(
                    "{} buffers and {} push bytes given, the pipeline takes {} and {}",
                    bufs.len(),
                    push.len(),
                    p.n_bindings,
                    p.push_bytes
                ),
            });
        }
        self.begin()?;
        let set = self.descriptor_set(p)?;
        let infos: Vec<_> = bufs
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(b.raw)
                    .range(vk::WHOLE_SIZE)]
            })
            .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        let raw = &self.dev.ctx.raw;
        // SAFETY: the set is fresh and unused; the buffers outlive the batch (borrowed for
        // `'a`, or kept by the crate-internal callers) and the pipeline is held in
        // `self.pipelines` until `submit` has waited on the fence.
        unsafe {
            raw.update_descriptor_sets(&writes, &[]);
            raw.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, p.raw);
            raw.cmd_bind_descriptor_sets(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                p.layout,
                0,
                &[set],
                &[],
            );
            if !push.is_empty() {
                raw.cmd_push_constants(self.cmd, p.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
            raw.cmd_dispatch(self.cmd, groups[0], groups[1], groups[2]);
        }
        self.pipelines.push(p.clone());
        self.barrier();
        Ok(())
    }

    /// Records a copy of the first `bytes` of `src` into `dst`.
    ///
    /// Errors: [`VkError::Shape`] when `bytes` exceeds either buffer; [`VkError::Call`].
    pub fn copy(&mut self, src: &'a Buffer, dst: &'a Buffer, bytes: u64) -> Result<(), VkError> {
        self.record_copy(src, dst, bytes)
    }

    /// [`Recorder::copy`] with buffers the caller keeps alive until the batch has run some
    /// other way.
    pub(crate) fn record_copy(
        &mut self,
        src: &Buffer,
        dst: &Buffer,
        bytes: u64,
    ) -> Result<(), VkError> {
        self.record_copy_at(src, dst, 0, bytes)
    }

    /// Records a copy of the first `bytes` of `src` to byte `dst_offset` of `dst` (buffers
    /// kept alive by the caller, as [`Recorder::record_copy`]).
    pub(crate) fn record_copy_at(
        &mut self,
        src: &Buffer,
        dst: &Buffer,
        dst_offset: u64,
        bytes: u64,
    ) -> Result<(), VkError> {
        if bytes > src.size() || dst_offset + bytes > dst.size() {
            return Err(VkError::Shape {
                op: "copy",
                what: format!(
                    "{bytes} bytes from {} into {} at {dst_offset}",
                    src.size(),
                    dst.size()
                ),
            });
        }
        if bytes == 0 {
            return Ok(());
        }
        self.begin()?;
        let region = [vk::BufferCopy::default().dst_offset(dst_offset).size(bytes)];
        // SAFETY: as in `dispatch`.
        unsafe {
            self.dev
                .ctx
                .raw
                .cmd_copy_buffer(self.cmd, src.raw, dst.raw, &region)
        };
        self.barrier();
        Ok(())
    }

    /// Keeps `b` alive until the batch has run (a staging buffer of a recorded copy).
    pub fn keep(&mut self, b: Buffer) {
        self.keep.push(b);
    }

    /// Keeps a shared buffer alive until the batch has run (one the kernel set may drop first).
    pub(crate) fn keep_shared(&mut self, b: &Arc<Buffer>) {
        if !self.shared.iter().any(|s| Arc::ptr_eq(s, b)) {
            self.shared.push(b.clone());
        }
    }

    fn barrier(&mut self) {
        let all = vk::AccessFlags::SHADER_READ
            | vk::AccessFlags::SHADER_WRITE
            | vk::AccessFlags::TRANSFER_READ
            | vk::AccessFlags::TRANSFER_WRITE;
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(all | vk::AccessFlags::HOST_READ)];
        let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
        // SAFETY: recording is open (`begin` ran before every caller).
        unsafe {
            self.dev.ctx.raw.cmd_pipeline_barrier(
                self.cmd,
                stages,
                stages | vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &mb,
                &[],
                &[],
            )
        };
    }

    /// Runs everything recorded since the last submit and waits for it; the recorder is
    /// then empty and reusable. A no-op when nothing was recorded.
    ///
    /// Errors: [`VkError::Call`] (device lost, out of memory); the batch is dropped then
    /// (after waiting for the device), and the recorder is empty and reusable all the same.
    pub fn submit(&mut self) -> Result<(), VkError> {
        if !self.recording {
            return Ok(());
        }
        self.recording = false;
        let run = self.run();
        if run.is_err() {
            // SAFETY: `raw` is live; whatever part of the batch was submitted finishes.
            let _ = unsafe { self.dev.ctx.raw.device_wait_idle() };
        }
        let reset = self.reset();
        self.keep.clear();
        self.shared.clear();
        self.pipelines.clear();
        self.dev.ctx.close_batch();
        run.and(reset)
    }

    /// Ends the command buffer, submits it and waits on the fence.
    fn run(&mut self) -> Result<(), VkError> {
        let raw = &self.dev.ctx.raw;
        // SAFETY: the command buffer is in the recording state; the queue lock serialises
        // submissions; the fence is unsignaled (reset after every wait).
        unsafe {
            raw.end_command_buffer(self.cmd)
                .check("vkEndCommandBuffer")?;
            let cmds = [self.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            {
                let queue = self
                    .dev
                    .ctx
                    .compute
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                raw.queue_submit(*queue, &submit, self.fence)
                    .check("vkQueueSubmit")?;
            }
            self.dev.ctx.submitted();
            raw.wait_for_fences(&[self.fence], true, u64::MAX)
                .check("vkWaitForFences")?;
        }
        Ok(())
    }

    /// The fence, command buffer and descriptor pools ready for the next batch (after the
    /// batch has run or failed: nothing of it is pending).
    fn reset(&mut self) -> Result<(), VkError> {
        let raw = &self.dev.ctx.raw;
        // SAFETY: nothing recorded is pending (waited on, or the device is idle).
        unsafe {
            raw.reset_fences(&[self.fence]).check("vkResetFences")?;
            raw.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty())
                .check("vkResetCommandBuffer")?;
            for &p in &self.descriptor_pools {
                raw.reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty())
                    .check("vkResetDescriptorPool")?;
            }
        }
        // Keep the first pool for the next batch; free the ones a large batch added.
        if self.descriptor_pools.len() > 1 {
            for p in self.descriptor_pools.drain(1..) {
                // SAFETY: reset above, and no set of it is in use any more.
                unsafe { raw.destroy_descriptor_pool(p, None) };
            }
        }
        self.sets_in_last = if self.descriptor_pools.is_empty() {
            SETS_PER_POOL
        } else {
            0
        };
        Ok(())
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        let raw = &self.dev.ctx.raw;
        // SAFETY: nothing recorded here is in flight (`submit` waits; a batch never submitted
        // is only discarded), and waiting for the device first covers the rest.
        unsafe {
            let _ = raw.device_wait_idle();
            if self.recording {
                self.recording = false;
                self.keep.clear();
                self.dev.ctx.close_batch();
            }
            for &p in &self.descriptor_pools {
                raw.destroy_descriptor_pool(p, None);
            }
            raw.destroy_fence(self.fence, None);
            raw.destroy_command_pool(self.pool, None);
        }
    }
}
