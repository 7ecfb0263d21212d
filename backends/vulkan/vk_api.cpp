// backends/vulkan/vk_api.cpp - see vk_api.h.
#include "vk_api.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "kiln/backends/indexed_backend.h"
#include "kiln/support/units.h"
#include "kiln/support/env.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"

namespace kiln::vulkan {

std::string result_name(VkResult r) {
  const char* name = "unknown result";
  switch (r) {
#define KILN_VK_RESULT(e) \
  case e: name = #e; break;
    KILN_VK_RESULT(VK_SUCCESS)
    KILN_VK_RESULT(VK_NOT_READY)
    KILN_VK_RESULT(VK_TIMEOUT)
    KILN_VK_RESULT(VK_INCOMPLETE)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    KILN_VK_RESULT(VK_ERROR_DEVICE_LOST)
    KILN_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    KILN_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    KILN_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    KILN_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    KILN_VK_RESULT(VK_ERROR_UNKNOWN)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTATION)
    KILN_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef KILN_VK_RESULT
    default: break;
  }
  return fmt::format("{} ({})", name, static_cast<int>(r));
}

void check(VkResult r, std::string_view what) {
  if (r != VK_SUCCESS) throw Error(fmt::format("vulkan: {}: {}", what, result_name(r)));
}

bool validation_enabled() {
  static const bool on = [] {
    return env_flag("KILN_VULKAN_VALIDATION").value_or(false);
  }();
  return on;
}

namespace {

std::mutex& messages_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& messages() {
  static std::vector<std::string> m;
  return m;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  const char* level = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
  std::string text = fmt::format("{} {}: {}", level, data->pMessageIdName ? data->pMessageIdName : "",
                                 data->pMessage ? data->pMessage : "");
  log_line("vulkan", text);
  std::lock_guard lock(messages_mutex());
  messages().push_back(std::move(text));
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

VkInstance make_instance() {
  uint32_t version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
    log_line("vulkan", "the Vulkan loader is older than 1.2: no vulkan devices");
    return VK_NULL_HANDLE;
  }
  auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  auto info = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  std::vector<const char*> layers, extensions;
  auto messenger = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  if (validation_enabled()) {
    if (!has_layer(kValidationLayer))
      throw Error("KILN_VULKAN_VALIDATION=1, but the Khronos validation layer is not installed "
                  "(Debian: vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    messenger.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    messenger.pfnUserCallback = on_validation_message;
    info.pNext = &messenger;  // also reports on vkCreateInstance and vkDestroyInstance
  }
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkInstance instance = VK_NULL_HANDLE;
  if (VkResult r = vkCreateInstance(&info, nullptr, &instance); r != VK_SUCCESS) {
    // No driver (VK_ERROR_INCOMPATIBLE_DRIVER) is a machine without Vulkan, not an error.
    log_line("vulkan", fmt::format("vkCreateInstance: {}: no vulkan devices", result_name(r)));
    return VK_NULL_HANDLE;
  }
  if (validation_enabled()) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerEXT handle = VK_NULL_HANDLE;
    if (!create || create(instance, &messenger, nullptr, &handle) != VK_SUCCESS)
      throw Error("vulkan: the validation layer's messenger could not be created");
  }
  return instance;
}

std::string version_text(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

// Drivers encode their versions as they like; NVIDIA's is 10.8.8.6 bits.
std::string driver_version_text(uint32_t vendor, uint32_t v) {
  if (vendor == 0x10de) return fmt::format("{}.{}.{}", (v >> 22) & 0x3ff, (v >> 14) & 0xff, (v >> 6) & 0xff);
  return version_text(v);
}

std::string type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual gpu";
    default: return "other";
  }
}

std::string subgroup_operations(VkSubgroupFeatureFlags f) {
  std::string out;
  const std::pair<VkSubgroupFeatureFlagBits, const char*> names[] = {
      {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},         {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
      {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"}, {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},     {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
      {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"}, {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"}};
  for (const auto& [bit, name] : names)
    if (f & bit) out += fmt::format("{}{}", out.empty() ? "" : " ", name);
  return out.empty() ? "none" : out;
}

std::vector<std::string> device_extensions(VkPhysicalDevice p) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(p, nullptr, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> props(n);
  if (vkEnumerateDeviceExtensionProperties(p, nullptr, &n, props.data()) != VK_SUCCESS) return {};
  std::vector<std::string> out;
  for (uint32_t e = 0; e < n; ++e) out.emplace_back(props[e].extensionName);
  return out;
}

std::vector<FoundDevice> enumerate() {
  std::vector<FoundDevice> out;
  VkInstance inst = instance();
  if (!inst) return out;
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "enumerating devices");
  std::vector<VkPhysicalDevice> physical(n);
  check(vkEnumeratePhysicalDevices(inst, &n, physical.data()), "enumerating devices");
  for (VkPhysicalDevice p : physical) {
    // Core Vulkan does not say how many compute units a device has; NVIDIA's and AMD's
    // extensions do. A struct may join the chain only when its extension is there.
    const std::vector<std::string> extensions = device_extensions(p);
    const auto has = [&](std::string_view e) { return std::ranges::find(extensions, e) != extensions.end(); };
    auto sm = vk_struct<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
    auto amd_cores = vk_struct<VkPhysicalDeviceShaderCorePropertiesAMD>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD);
    void* vendor_chain = nullptr;
    if (has(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
      sm.pNext = vendor_chain;
      vendor_chain = &sm;
    }
    if (has(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
      amd_cores.pNext = vendor_chain;
      vendor_chain = &amd_cores;
    }
    auto subgroup = vk_struct<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    subgroup.pNext = vendor_chain;
    auto floats = vk_struct<VkPhysicalDeviceFloatControlsProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES);
    floats.pNext = &subgroup;
    auto driver = vk_struct<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
    driver.pNext = &floats;
    auto props = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props.pNext = &driver;
    vkGetPhysicalDeviceProperties2(p, &props);
    const VkPhysicalDeviceProperties& pr = props.properties;
    if (pr.apiVersion < VK_API_VERSION_1_2) {
      log_line("vulkan", fmt::format("{} supports Vulkan {} only; kiln needs 1.2", pr.deviceName, version_text(pr.apiVersion)));
      continue;
    }
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
    std::vector<VkQueueFamilyProperties> fam(families);
    vkGetPhysicalDeviceQueueFamilyProperties(p, &families, fam.data());
    // A compute queue, preferring one without graphics (a dedicated compute engine).
    int family = -1;
    for (uint32_t f = 0; f < families; ++f) {
      if (!(fam[f].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      if (family < 0 || !(fam[f].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = static_cast<int>(f);
    }
    if (family < 0) continue;
    VkPhysicalDeviceFeatures features{};
    vkGetPhysicalDeviceFeatures(p, &features);
    VkPhysicalDeviceMemoryProperties memory{};
    vkGetPhysicalDeviceMemoryProperties(p, &memory);

    FoundDevice d;
    d.physical = p;
    d.queue_family = static_cast<uint32_t>(family);
    VulkanDeviceInfo& i = d.info;
    i.name = pr.deviceName;
    i.type = type_name(pr.deviceType);
    i.driver_name = driver.driverName;
    i.driver_info = driver.driverInfo;
    i.driver_version = driver_version_text(pr.vendorID, pr.driverVersion);
    i.api_version = version_text(pr.apiVersion);
    for (uint8_t b : pr.pipelineCacheUUID) i.uuid += fmt::format("{:02x}", b);
    i.vendor_id = pr.vendorID;
    i.device_id = pr.deviceID;
    for (uint32_t h = 0; h < memory.memoryHeapCount; ++h)
      i.heaps.push_back({static_cast<int64_t>(memory.memoryHeaps[h].size),
                         (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
    i.max_storage_buffer_range = pr.limits.maxStorageBufferRange;
    i.max_shared_memory = pr.limits.maxComputeSharedMemorySize;
    i.max_work_group = std::min(pr.limits.maxComputeWorkGroupInvocations, pr.limits.maxComputeWorkGroupSize[0]);
    i.max_work_group_count = pr.limits.maxComputeWorkGroupCount[0];
    i.max_push_constants = pr.limits.maxPushConstantsSize;
    i.max_storage_buffers = std::min({pr.limits.maxPerStageDescriptorStorageBuffers, pr.limits.maxDescriptorSetStorageBuffers,
                                      pr.limits.maxPerStageResources});
    i.subgroup_size = static_cast<int>(subgroup.subgroupSize);
    i.subgroup_operations = subgroup_operations(subgroup.supportedOperations);
    constexpr VkSubgroupFeatureFlags kShuffle = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    i.subgroup_shuffle_in_compute =
        (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (subgroup.supportedOperations & kShuffle) == kShuffle;
    if (sm.shaderSMCount > 0)
      i.compute_units = static_cast<int>(sm.shaderSMCount);
    else if (amd_cores.shaderEngineCount > 0)
      i.compute_units = static_cast<int>(amd_cores.shaderEngineCount * amd_cores.shaderArraysPerEngineCount *
                                         amd_cores.computeUnitsPerShaderArray);
    i.fp64 = features.shaderFloat64;
    i.int64 = features.shaderInt64;
    i.signed_zero_inf_nan =
        floats.shaderSignedZeroInfNanPreserveFloat32 && (!i.fp64 || floats.shaderSignedZeroInfNanPreserveFloat64);
    i.f32_subnormals = floats.shaderDenormPreserveFloat32;
    i.f64_subnormals = i.fp64 && floats.shaderDenormPreserveFloat64;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

VkInstance instance() {
  static const VkInstance made = make_instance();
  return made;
}

const std::vector<FoundDevice>& found_devices() {
  static const std::vector<FoundDevice> found = enumerate();
  return found;
}

std::vector<std::string> take_validation_messages() {
  std::lock_guard lock(messages_mutex());
  return std::exchange(messages(), {});
}

}  // namespace kiln::vulkan

namespace kiln {

const std::vector<VulkanDeviceInfo>& vulkan_devices() {
  static const std::vector<VulkanDeviceInfo> infos = device_infos(vulkan::found_devices());
  return infos;
}

std::string vulkan_device_description(int index) {
  const VulkanDeviceInfo& i = vulkan_devices().at(static_cast<size_t>(index));
  std::string heaps;
  for (const VulkanDeviceInfo::Heap& h : i.heaps)
    heaps += fmt::format("{}{}{}", heaps.empty() ? "" : " + ", human_bytes(h.bytes), h.device_local ? " device-local" : "");
  return fmt::format(
      "{} ({})\n    driver {} {} ({}), Vulkan {}, pipeline cache {}\n"
      "    memory heaps {}; one binding up to {}, {} shared, {} compute units, work-groups up to {} (at most {} "
      "per dispatch), {} bytes of push constants\n"
      "    fp64 {}, int64 {}, signed zeros/inf/NaN preserved {}, subnormals preserved f32 {} f64 {}, "
      "subgroup size {} ({})",
      i.name, i.type, i.driver_name, i.driver_version, i.driver_info, i.api_version, i.uuid, heaps,
      human_bytes(i.max_storage_buffer_range), human_bytes(i.max_shared_memory),
      i.compute_units > 0 ? std::to_string(i.compute_units) : std::string("unreported"), i.max_work_group,
      i.max_work_group_count, i.max_push_constants, i.fp64 ? "yes" : "no", i.int64 ? "yes" : "no",
      i.signed_zero_inf_nan ? "yes" : "no", i.f32_subnormals ? "yes" : "no", i.f64_subnormals ? "yes" : "no",
      i.subgroup_size, i.subgroup_operations);
}

}  // namespace kiln
