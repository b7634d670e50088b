//! The Vulkan instance: loading `libvulkan` at run time and listing the physical devices.

use std::sync::Arc;

use ash::vk;

use crate::adapter::AdapterInfo;
use crate::error::{Check, VkError};

/// The loader and a Vulkan instance (API 1.1 or newer), shared by every [`crate::Device`] made
/// from it. Dropping the last handle destroys the instance.
pub struct Instance {
    /// The loader library; it must stay loaded while the instance lives.
    _entry: ash::Entry,
    pub(crate) raw: ash::Instance,
}

impl Instance {
    /// Opens the Vulkan loader (no link-time dependency: `ash`'s `loaded` feature) and creates
    /// an instance without layers or extensions.
    ///
    /// Errors: [`VkError::NoLoader`] when no loader library is installed; [`VkError::Call`]
    /// when instance creation fails (e.g. no driver: `ERROR_INCOMPATIBLE_DRIVER`, reported as
    /// [`VkError::NoDevice`]).
    pub fn new() -> Result<Arc<Self>, VkError> {
        // SAFETY: loading the system's Vulkan loader runs its initialisers; this is the
        // documented way to use a loader that is not linked in.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| VkError::NoLoader(e.to_string()))?;
        // SAFETY: `entry` holds a valid loader.
        let version = unsafe { entry.try_enumerate_instance_version() }
            .check("vkEnumerateInstanceVersion")?
            .unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_1 {
            return Err(VkError::NoDevice(
                " (the Vulkan loader is older than 1.1)".into(),
            ));
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"strata")
            .engine_name(c"strata")
            .api_version(version.min(vk::API_VERSION_1_3));
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` and what it points to live across the call.
        let raw = match unsafe { entry.create_instance(&info, None) } {
            Ok(raw) => raw,
            Err(vk::Result::ERROR_INCOMPATIBLE_DRIVER) => {
                return Err(VkError::NoDevice(" (no Vulkan driver installed)".into()))
            }
            Err(result) => {
                return Err(VkError::Call {
                    call: "vkCreateInstance",
                    result,
                })
            }
        };
        Ok(Arc::new(Self { _entry: entry, raw }))
    }

    /// The physical devices in the loader's order (index = position, as `--device N` counts).
    ///
    /// Errors: [`VkError::Call`] when enumeration fails.
    pub fn adapters(&self) -> Result<Vec<AdapterInfo>, VkError> {
        // SAFETY: `self.raw` is a live instance.
        let devices =
            unsafe { self.raw.enumerate_physical_devices() }.check("vkEnumeratePhysicalDevices")?;
        Ok(devices
            .into_iter()
            .enumerate()
            .map(|(i, pd)| AdapterInfo::query(&self.raw, pd, i))
            .collect())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device made from this instance holds an `Arc<Instance>`, so none is
        // alive when the last handle drops.
        unsafe { self.raw.destroy_instance(None) };
    }
}

/// Lists the Vulkan adapters of this machine (`strata devices`).
///
/// Errors: [`VkError::NoLoader`] / [`VkError::NoDevice`] where there is no Vulkan at all.
///
/// ```no_run
/// for a in strata_vulkan::adapters()? {
///     println!("{a}");
/// }
/// # Ok::<(), strata_vulkan::VkError>(())
/// ```
pub fn adapters() -> Result<Vec<AdapterInfo>, VkError> {
    Instance::new()?.adapters()
}
