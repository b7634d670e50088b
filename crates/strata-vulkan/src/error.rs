//! The crate's error type: every failure of device discovery, memory, pipelines and kernels.

use ash::vk;
use strata_quant::GgmlType;

/// What went wrong on the Vulkan side. [`VkError::NoLoader`] and [`VkError::NoDevice`] are the
/// expected "no GPU here" cases: callers turn them into a one-line notice and run on the CPU.
#[derive(Debug, thiserror::Error)]
pub enum VkError {
    /// `libvulkan.so.1` / `vulkan-1.dll` could not be opened.
    #[error("no Vulkan loader ({0}); install the Vulkan loader and a driver (Debian: libvulkan1 mesa-vulkan-drivers)")]
    NoLoader(String),
    /// The loader found no physical device, or not the one asked for.
    #[error("no Vulkan device{0}")]
    NoDevice(String),
    /// The device lacks something the backend needs (named).
    #[error("Vulkan device {device:?} is not supported: {why}")]
    Unsupported { device: String, why: String },
    /// A Vulkan call returned an error code.
    #[error("{call} failed: {result}")]
    Call {
        call: &'static str,
        result: vk::Result,
    },
    /// No memory type offers the properties a buffer needs.
    #[error("no Vulkan memory type for a {0} buffer")]
    NoMemoryType(&'static str),
    /// A weight type without a GPU kernel (yet).
    #[error("no Vulkan matmul kernel for {0:?}")]
    UnsupportedType(GgmlType),
    /// Shapes or sizes that do not fit together (names the op and what was wrong).
    #[error("{op}: {what}")]
    Shape { op: &'static str, what: String },
    /// A SPIR-V blob that is not a whole number of words or lacks the magic number.
    #[error("invalid SPIR-V for shader {0}")]
    BadSpirv(&'static str),
}

/// Maps a `VkResult` to [`VkError::Call`] naming the call.
pub(crate) trait Check<T> {
    fn check(self, call: &'static str) -> Result<T, VkError>;
}

impl<T> Check<T> for Result<T, vk::Result> {
    fn check(self, call: &'static str) -> Result<T, VkError> {
        self.map_err(|result| VkError::Call { call, result })
    }
}
