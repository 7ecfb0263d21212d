// backends/vulkan/vk_api.h - the Vulkan C API as the vulkan backend uses it: results as
// kiln::Error, the process's instance (with the validation layer when asked for), and the
// devices it enumerates.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backends/vulkan.h"

namespace kiln::vulkan {

/// A Vulkan info structure of type `type`, every other member zero.
template <class T>
T vk_struct(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)".
std::string result_name(VkResult r);
/// Throws kiln::Error "vulkan: <what>: <result name>" unless `r` is VK_SUCCESS.
void check(VkResult r, std::string_view what);

/// A physical device kiln can use, with the queue family it computes on.
struct FoundDevice {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VulkanDeviceInfo info;
};

/// The process's instance (Vulkan 1.2, headless), made on first use and kept until exit;
/// VK_NULL_HANDLE when no loader or driver is installed.
VkInstance instance();
/// Every usable device of instance(), enumerated once.
const std::vector<FoundDevice>& found_devices();

/// What the validation layer reported since the last call, one message per entry; empty
/// without KILN_VULKAN_VALIDATION=1.
std::vector<std::string> take_validation_messages();

}  // namespace kiln::vulkan
