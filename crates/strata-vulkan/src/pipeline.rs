//! Compute pipelines from SPIR-V: storage-buffer bindings, push constants, specialization.

use ash::vk;

use crate::device::Device;
use crate::error::{Check, VkError};

/// A compute pipeline whose shader reads `n_bindings` storage buffers (bindings `0..n`, set 0)
/// and `push_bytes` of push constants. Specialization constant `i` is `spec[i]` (u32; the
/// kernels use id 0 for the workgroup size).
pub struct Pipeline {
    dev: Device,
    pub(crate) name: &'static str,
    pub(crate) raw: vk::Pipeline,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) n_bindings: u32,
    pub(crate) push_bytes: u32,
}

impl Pipeline {
    /// Builds the pipeline (the driver compiles the shader here: milliseconds on a GPU, up
    /// to a second on lavapipe).
    ///
    /// Errors: [`VkError::BadSpirv`] for a blob that is not SPIR-V; [`VkError::Unsupported`]
    /// for more bindings than the device allows a shader; [`VkError::Call`] when the driver
    /// rejects the shader (e.g. a capability the device lacks).
    pub fn new(
        dev: &Device,
        name: &'static str,
        spirv: &[u8],
        n_bindings: u32,
        push_bytes: u32,
        spec: &[u32],
    ) -> Result<Self, VkError> {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(spirv))
            .map_err(|_| VkError::BadSpirv(name))?;
        let limit = dev.info().max_storage_buffers_per_stage;
        if n_bindings > limit {
            return Err(VkError::Unsupported {
                device: dev.info().name.clone(),
                why: format!(
                    "kernel {name} binds {n_bindings} storage buffers, the device allows {limit}"
                ),
            });
        }
        let raw_dev = &dev.ctx.raw;
        let bindings: Vec<_> = (0..n_bindings)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY (this and the calls below): `raw_dev` is live and every create-info outlives
        // its call; objects are destroyed in `Drop` or on the error path here.
        let set_layout = unsafe { raw_dev.create_descriptor_set_layout(&set_info, None) }
            .check("vkCreateDescriptorSetLayout")?;
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(push_bytes)];
        let layouts = [set_layout];
        let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
        if push_bytes > 0 {
            layout_info = layout_info.push_constant_ranges(&ranges);
        }
        let layout = match unsafe { raw_dev.create_pipeline_layout(&layout_info, None) } {
            Ok(l) => l,
            Err(result) => {
                unsafe { raw_dev.destroy_descriptor_set_layout(set_layout, None) };
                return Err(VkError::Call {
                    call: "vkCreatePipelineLayout",
                    result,
                });
            }
        };
        let cleanup = || unsafe {
            raw_dev.destroy_pipeline_layout(layout, None);
            raw_dev.destroy_descriptor_set_layout(set_layout, None);
        };
        let module_info = vk::ShaderModuleCreateInfo::default().code(&words);
        let module = match unsafe { raw_dev.create_shader_module(&module_info, None) } {
            Ok(m) => m,
            Err(result) => {
                cleanup();
                return Err(VkError::Call {
                    call: "vkCreateShaderModule",
                    result,
                });
            }
        };
        let entries: Vec<_> = (0..spec.len() as u32)
            .map(|i| vk::SpecializationMapEntry {
                constant_id: i,
                offset: 4 * i,
                size: 4,
            })
            .collect();
        let spec_bytes: Vec<u8> = spec.iter().flat_map(|v| v.to_le_bytes()).collect();
        let spec_info = vk::SpecializationInfo::default()
            .map_entries(&entries)
            .data(&spec_bytes);
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main")
            .specialization_info(&spec_info);
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout);
        let created =
            unsafe { raw_dev.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        unsafe { raw_dev.destroy_shader_module(module, None) };
        let raw = match created {
            Ok(p) => p[0],
            Err((_, result)) => {
                cleanup();
                return Err(VkError::Call {
                    call: "vkCreateComputePipelines",
                    result,
                });
            }
        };
        Ok(Self {
            dev: dev.clone(),
            name,
            raw,
            layout,
            set_layout,
            n_bindings,
            push_bytes,
        })
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        let raw_dev = &self.dev.ctx.raw;
        // SAFETY: recorders wait for their work before returning, so no command buffer in
        // flight uses the pipeline.
        unsafe {
            raw_dev.destroy_pipeline(self.raw, None);
            raw_dev.destroy_pipeline_layout(self.layout, None);
            raw_dev.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}
