//! Buffers dropped while a batch may still use them, destroyed once no batch is open.
//!
//! A [`crate::Recorder`] opens a batch when it records its first command and closes it after
//! its fence wait (or when it is dropped). A [`crate::Buffer`] dropped while any batch of its
//! device is open is retired here instead of destroyed, because a command already recorded
//! (not yet submitted, or still running) may bind it; the last batch to close destroys what
//! was retired. So the backend can keep one batch open across ops (a whole forward) while the
//! activations, KV mirrors and staging buffers it recorded are replaced or dropped.

use ash::vk;

/// One buffer's handles, destroyed later.
pub(crate) struct Dead {
    pub(crate) buffer: vk::Buffer,
    pub(crate) memory: vk::DeviceMemory,
    pub(crate) mapped: bool,
}

/// The open batches of a device and the buffers retired while they are open.
#[derive(Default)]
pub(crate) struct Retired {
    open: usize,
    dead: Vec<Dead>,
}

impl Retired {
    /// A batch starts recording.
    pub(crate) fn open(&mut self) {
        self.open += 1;
    }

    /// A batch has run (or was dropped after waiting for the device): when it was the last
    /// open one, the retired buffers are returned for destruction.
    pub(crate) fn close(&mut self) -> Vec<Dead> {
        self.open = self.open.saturating_sub(1);
        if self.open == 0 {
            std::mem::take(&mut self.dead)
        } else {
            Vec::new()
        }
    }

    /// `d` if it may be destroyed now (no batch open), else `None` (kept until the last
    /// batch closes).
    pub(crate) fn retire(&mut self, d: Dead) -> Option<Dead> {
        if self.open == 0 {
            Some(d)
        } else {
            self.dead.push(d);
            None
        }
    }
}

impl Retired {
    /// Everything retired (the device is being destroyed: nothing runs any more).
    pub(crate) fn dead_all(&mut self) -> Vec<Dead> {
        std::mem::take(&mut self.dead)
    }
}

/// Destroys `d`'s buffer and frees its memory.
pub(crate) fn destroy(raw: &ash::Device, d: Dead) {
    // SAFETY: no batch that may bind the buffer is open or running (`Retired`), and the
    // memory is freed after the buffer that binds it.
    unsafe {
        if d.mapped {
            raw.unmap_memory(d.memory);
        }
        raw.destroy_buffer(d.buffer, None);
        raw.free_memory(d.memory, None);
    }
}
