// kiln/backends/vulkan.h - the `vulkan:N` backends: GLSL compute shaders generated from the
// Kernel IR (the GLSL dialect of codegen/, kir::glsl_source), compiled to SPIR-V in-process
// by shaderc, run through the Vulkan loader (Mesa's lavapipe on machines without a GPU).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/codegen/schedule.h"

namespace kiln {

/// One Vulkan physical device, as `kiln devices` lists it. Devices are numbered in the order
/// the loader reports them: `vulkan:0` is the first. Devices older than Vulkan 1.2 are not
/// listed (kiln's shaders need its 8-bit storage and explicit arithmetic types).
struct VulkanDeviceInfo {
  std::string name;            // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;            // "cpu", "discrete gpu", "integrated gpu", "virtual gpu", "other"
  std::string driver_name;     // "llvmpipe"
  std::string driver_info;     // "Mesa 22.3.6 (LLVM 15.0.6)"
  std::string driver_version;  // as the vendor encodes it ("0.0.1", "580.65.6")
  std::string api_version;     // "1.3.230"
  std::string uuid;            // pipelineCacheUUID, hex: what a driver's compiled code is valid for
  uint32_t vendor_id = 0, device_id = 0;
  struct Heap {
    int64_t bytes = 0;
    bool device_local = false;
  };
  std::vector<Heap> heaps;
  int64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding may span
  int64_t max_shared_memory = 0;         // bytes of `shared` per work-group
  int64_t max_work_group = 0;            // invocations per work-group (x)
  int64_t max_work_group_count = 0;      // work-groups per dispatch (x)
  int64_t max_push_constants = 0;        // bytes
  /// Storage buffers one compute shader may bind: maxPerStageDescriptorStorageBuffers,
  /// maxDescriptorSetStorageBuffers and maxPerStageResources, the least of them.
  int64_t max_storage_buffers = 0;
  /// Streaming multiprocessors or compute units, where the driver says (VK_NV_shader_sm_builtins,
  /// VK_AMD_shader_core_properties); 0 where it does not.
  int compute_units = 0;
  int subgroup_size = 0;
  std::string subgroup_operations;  // "basic vote arithmetic ballot shuffle ..."
  /// Basic and shuffle subgroup operations in compute shaders: what kiln's subgroup
  /// reductions use.
  bool subgroup_shuffle_in_compute = false;
  bool fp64 = false;
  bool int64 = false;
  /// shaderSignedZeroInfNanPreserveFloat32 (and Float64 where fp64): kiln's shaders then keep
  /// -0.0, infinities and NaN as IEEE 754 does (with_float_controls).
  bool signed_zero_inf_nan = false;
  /// shaderDenormPreserveFloat32 / Float64: kiln's shaders then keep subnormals of that width.
  /// Where the device cannot, it may flush them to zero, and not only in results: NVIDIA's
  /// driver by default compares a subnormal as zero but copies it unchanged, so sign(x) of
  /// one gave x.
  bool f32_subnormals = false;
  bool f64_subnormals = false;
};

/// Every Vulkan device this process can use (empty when no driver is installed). The first
/// call creates the instance and enumerates them; the list does not change afterwards.
const std::vector<VulkanDeviceInfo>& vulkan_devices();
/// How `kiln devices` describes `vulkan:index`: name, driver, memory heaps, limits, features.
std::string vulkan_device_description(int index);

/// The backend of `vulkan:index`. Throws kiln::Error naming the devices that exist when the
/// index is out of range, and the Vulkan error when the device fails to initialize.
Backend& vulkan_backend(int index);

}  // namespace kiln

namespace kiln::vulkan {

/// Whether KILN_VULKAN_VALIDATION=1 asked for the Khronos validation layer: every message
/// it reports then fails the next synchronization of the device with a kiln::Error (the
/// tests run so).
bool validation_enabled();

/// What `kiln codegen --target glsl|spirv` generates for while no Vulkan device is given: a
/// discrete GPU's capabilities (fp64 and int64, local memory, work-groups up to 1024,
/// subgroups of 32 that shuffle, 64 compute units, no preferred vector width).
Capabilities reference_capabilities();

/// `source`, a GLSL 4.50 compute shader, compiled to SPIR-V for Vulkan 1.1 by shaderc
/// (`optimize`: with spirv-opt's performance passes, which fold x + 0.0 into x whatever the
/// module's float controls say). Throws kiln::Error with the compiler's messages (each
/// naming `name`:line) and the source on failure.
std::vector<uint32_t> compile_glsl(std::string_view source, std::string_view name, bool optimize = true);

/// The IEEE 754 behaviour a module asks its driver for (SPV_KHR_float_controls). Each mode
/// applies to f32, and to f64 where the module uses doubles; a device must report the
/// matching shader*Preserve* property to take it (VulkanDeviceInfo).
struct FloatControls {
  /// SignedZeroInfNanPreserve: without it a driver may treat -0.0 as 0.0 and infinities and
  /// NaN as it likes (lavapipe: -1.0 / 0.0 gave a subnormal, 0.0 * -0.0 gave 0.0).
  bool signed_zero_inf_nan = false;
  /// DenormPreserve 32 / 64: without it a driver may flush subnormals to zero.
  bool f32_subnormals = false;
  bool f64_subnormals = false;
};

/// `spirv` with the execution modes `controls` asks for, and their capabilities.
std::vector<uint32_t> with_float_controls(std::span<const uint32_t> spirv, const FloatControls& controls);

/// SPIRV-Tools' validator (Vulkan 1.1 rules): "" when `spirv` is valid, else its messages.
std::string validate_spirv(std::span<const uint32_t> spirv);

/// `spirv` as SPIR-V assembly text.
std::string disassemble_spirv(std::span<const uint32_t> spirv);

}  // namespace kiln::vulkan
