//! The kernel set of a device: pipelines built on first use, and the launch geometry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use strata_quant::GgmlType;

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::VkError;
use crate::pipeline::Pipeline;

/// Most workgroups per grid dimension every device supports (`maxComputeWorkGroupCount`).
pub(crate) const MAX_GROUPS: u32 = 65535;

/// The compute kernels on one device. Each pipeline is built the first time it is used
/// (the driver compiles it then) and kept. Thread-safe: recorders on several threads may
/// share one `Kernels`.
pub struct Kernels {
    pub(crate) dev: Device,
    /// Invocations per workgroup: a power of two from 32 to 128, four subgroups where the
    /// subgroup is small (32 on lavapipe's 8-wide subgroups, 128 on 32- and 64-wide).
    pub(crate) wg: u32,
    cache: Mutex<HashMap<&'static str, Arc<Pipeline>>>,
    /// The i-quants' grid and sign tables, uploaded on first use.
    iq_tables: Mutex<Option<Arc<Buffer>>>,
}

impl Kernels {
    /// The kernels for `dev`.
    pub fn new(dev: &Device) -> Self {
        Self {
            dev: dev.clone(),
            wg: workgroup_size(dev.info().subgroup_size),
            cache: Mutex::new(HashMap::new()),
            iq_tables: Mutex::new(None),
        }
    }

    /// Invocations per workgroup of the reducing kernels.
    pub fn workgroup_size(&self) -> u32 {
        self.wg
    }

    /// The pipeline `name`, built from `spirv` on first use.
    pub(crate) fn pipeline(
        &self,
        name: &'static str,
        spirv: &[u8],
        n_bindings: u32,
        push_bytes: u32,
        spec: &[u32],
    ) -> Result<Arc<Pipeline>, VkError> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(name) {
            return Ok(p.clone());
        }
        let p = Arc::new(Pipeline::new(
            &self.dev, name, spirv, n_bindings, push_bytes, spec,
        )?);
        cache.insert(name, p.clone());
        Ok(p)
    }

    /// The table buffer the kernels of `ty` read besides their own buffers (uploaded the first
    /// time a type needs it), or `None` for a type without tables.
    ///
    /// Errors: allocation and upload errors.
    pub(crate) fn tables_for(&self, ty: GgmlType) -> Result<Option<Arc<Buffer>>, VkError> {
        if !crate::shaders::uses_iq_tables(ty) {
            return Ok(None);
        }
        let mut t = self.iq_tables.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            let buf = crate::transfer::upload(&self.dev, crate::shaders::IQ_TABLES)?;
            *t = Some(Arc::new(buf));
        }
        Ok(t.clone())
    }
}

/// Invocations per workgroup for subgroup size `sg`: four subgroups, at least 32 and at most
/// 128 (every device allows 128), a power of two so the shared-memory trees halve evenly.
fn workgroup_size(sg: u32) -> u32 {
    (4 * sg.max(1)).clamp(32, 128).next_power_of_two().min(128)
}

/// Push-constant bytes of 32-bit words (u32 or f32 bits), in order.
pub(crate) fn push(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A grid of `n` workgroups as `[x, y, 1]` with `x ≤ MAX_GROUPS` (`x + y·x_count` indexes).
pub(crate) fn grid(n: u32) -> [u32; 3] {
    if n <= MAX_GROUPS {
        [n.max(1), 1, 1]
    } else {
        [MAX_GROUPS, n.div_ceil(MAX_GROUPS), 1]
    }
}

/// `n` as u32, or a [`VkError::Shape`] naming `op` when it does not fit.
pub(crate) fn u32_of(op: &'static str, n: usize) -> Result<u32, VkError> {
    u32::try_from(n).map_err(|_| VkError::Shape {
        op,
        what: format!("{n} does not fit 32 bits"),
    })
}

/// Checks that `buf` holds at least `elems` f32 values.
pub(crate) fn check_f32(
    op: &'static str,
    what: &str,
    buf: &crate::Buffer,
    elems: usize,
) -> Result<(), VkError> {
    if (elems as u64) * 4 > buf.size() {
        return Err(VkError::Shape {
            op,
            what: format!(
                "{what} needs {elems} f32, its buffer holds {}",
                buf.size() / 4
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgroups_are_four_subgroups_within_32_to_128() {
        assert_eq!(workgroup_size(8), 32); // lavapipe
        assert_eq!(workgroup_size(16), 64); // Intel
        assert_eq!(workgroup_size(32), 128); // NVIDIA, AMD RDNA
        assert_eq!(workgroup_size(64), 128); // AMD GCN: two subgroups
        assert_eq!(workgroup_size(4), 32);
        assert_eq!(workgroup_size(0), 32);
    }

    #[test]
    fn grids_split_past_the_per_dimension_limit_and_cover_every_group() {
        assert_eq!(grid(0), [1, 1, 1]);
        assert_eq!(grid(7), [7, 1, 1]);
        assert_eq!(grid(MAX_GROUPS), [MAX_GROUPS, 1, 1]);
        let [x, y, _] = grid(MAX_GROUPS + 1);
        assert_eq!((x, y), (MAX_GROUPS, 2));
        let n = 3 * MAX_GROUPS + 5;
        let [x, y, _] = grid(n);
        assert!(x as u64 * y as u64 >= n as u64 && (x as u64) * (y as u64 - 1) < n as u64);
        assert_eq!(push(&[1, 2.5f32.to_bits()]), [1, 0, 0, 0, 0, 0, 0x20, 0x40]);
    }
}
