//! Moving data between host memory and device-local buffers through staging buffers.

use crate::buffer::{Buffer, Location};
use crate::device::Device;
use crate::error::VkError;
use crate::recorder::Recorder;

/// Records a write of `bytes` into the start of `dst`: they are copied into a fresh staging
/// buffer now, and from there into `dst` when `rec` runs (after what `rec` recorded before).
///
/// Errors: [`VkError::Shape`] when `bytes` does not fit `dst`; allocation errors.
pub fn write<'a>(rec: &mut Recorder<'a>, dst: &'a Buffer, bytes: &[u8]) -> Result<(), VkError> {
    if bytes.len() as u64 > dst.size() {
        return Err(VkError::Shape {
            op: "write",
            what: format!("{} bytes into a buffer of {}", bytes.len(), dst.size()),
        });
    }
    let mut staging = Buffer::new(rec.device(), bytes.len() as u64, Location::Host)?;
    if let Some(m) = staging.mapped_mut() {
        m[..bytes.len()].copy_from_slice(bytes);
    }
    rec.record_copy(&staging, dst, bytes.len().div_ceil(4) as u64 * 4)?;
    rec.keep(staging);
    Ok(())
}

/// Records a write of `bytes` at byte `offset` (a multiple of 4) of `dst`, as [`write`].
///
/// Errors: [`VkError::Shape`] when they do not fit `dst`; allocation errors.
pub fn write_at<'a>(
    rec: &mut Recorder<'a>,
    dst: &'a Buffer,
    offset: u64,
    bytes: &[u8],
) -> Result<(), VkError> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut staging = Buffer::new(rec.device(), bytes.len() as u64, Location::Host)?;
    if let Some(m) = staging.mapped_mut() {
        m[..bytes.len()].copy_from_slice(bytes);
    }
    rec.record_copy_at(&staging, dst, offset, bytes.len() as u64)?;
    rec.keep(staging);
    Ok(())
}

/// A new device-local buffer holding `bytes` (padded with zeros to whole words); waits for
/// the copy. Large uploads stream through bounded staging memory on the transfer queue where
/// the device has one ([`crate::upload`]).
///
/// Errors: allocation and submission errors.
pub fn upload(dev: &Device, bytes: &[u8]) -> Result<Buffer, VkError> {
    let buf = Buffer::new(dev, bytes.len() as u64, Location::Device)?;
    crate::upload::stream(dev, &buf, bytes, crate::upload::PIECE)?;
    Ok(buf)
}

/// A new device-local buffer holding the f32 values `data`.
///
/// Errors: as [`upload`].
pub fn upload_f32(dev: &Device, data: &[f32]) -> Result<Buffer, VkError> {
    upload(dev, &f32_bytes(data))
}

/// The first `len` bytes of `src`, copied back through a staging buffer; waits for the copy
/// and for everything submitted before it on the device's compute queue.
///
/// Errors: [`VkError::Shape`] when `len` exceeds the buffer; submission errors.
pub fn read(dev: &Device, src: &Buffer, len: usize) -> Result<Vec<u8>, VkError> {
    if len as u64 > src.size() {
        return Err(VkError::Shape {
            op: "read",
            what: format!("{len} bytes from a buffer of {}", src.size()),
        });
    }
    let staging = Buffer::new(dev, len as u64, Location::Host)?;
    let mut rec = Recorder::new(dev)?;
    rec.copy(src, &staging, len.div_ceil(4) as u64 * 4)?;
    rec.submit()?;
    Ok(staging
        .mapped()
        .map(|m| m[..len].to_vec())
        .unwrap_or_default())
}

/// The first `n` f32 values of `src` (see [`read`]).
///
/// Errors: as [`read`].
pub fn read_f32(dev: &Device, src: &Buffer, n: usize) -> Result<Vec<f32>, VkError> {
    let bytes = read(dev, src, 4 * n)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Little-endian bytes of `data` (the layout shaders read).
pub(crate) fn f32_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}
