// tools/kiln/devices_command.cpp - `kiln devices`: every device this process can run on.
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/backend/cpu.h"
#include "kiln/backend/opencl.h"
#include "kiln/backend/vulkan.h"
#include "kiln/engine/engine.h"

namespace kiln::cli {
namespace {

std::string bytes(int64_t n) {
  if (n >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(n) / (1 << 30));
  if (n >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
  return fmt::format("{} KiB", n >> 10);
}

std::string describe(Device d) {
  switch (d.kind) {
    case Device::Kind::Cpu: return fmt::format("LLVM JIT for {}", cpu_target_description());
    case Device::Kind::Interp: return "the reference interpreter (no compiler)";
    case Device::Kind::OpenCL: {
      const OpenClDeviceInfo& i = opencl_devices().at(static_cast<size_t>(d.index));
      return fmt::format(
          "{} ({})\n    platform {} ({}), driver {}, {}\n"
          "    {} global memory (one buffer up to {}), {} local, {} compute units, work-groups up to {}\n"
          "    fp64 {}, int64 {}, subgroups {}, preferred float vector {}, correctly rounded f32 divide/sqrt {}",
          i.name, i.type, i.platform, i.platform_version, i.driver_version, i.c_version, bytes(i.global_memory),
          bytes(i.max_allocation), bytes(i.local_memory), i.compute_units, i.max_work_group, i.fp64 ? "yes" : "no",
          i.int64 ? "yes" : "no", i.subgroups ? "yes" : "no", i.preferred_float_vector,
          i.correctly_rounded_divide_sqrt ? "yes" : "no");
    }
    case Device::Kind::Vulkan: {
      const VulkanDeviceInfo& i = vulkan_devices().at(static_cast<size_t>(d.index));
      std::string heaps;
      for (const VulkanDeviceInfo::Heap& h : i.heaps)
        heaps += fmt::format("{}{}{}", heaps.empty() ? "" : " + ", bytes(h.bytes), h.device_local ? " device-local" : "");
      return fmt::format(
          "{} ({})\n    driver {} {} ({}), Vulkan {}, pipeline cache {}\n"
          "    memory heaps {}; one binding up to {}, {} shared, {} compute units, work-groups up to {} (at most {} "
          "per dispatch), {} bytes of push constants\n"
          "    fp64 {}, int64 {}, signed zeros/inf/NaN preserved {}, subnormals preserved f32 {} f64 {}, "
          "subgroup size {} ({})",
          i.name, i.type, i.driver_name, i.driver_version, i.driver_info, i.api_version, i.uuid, heaps,
          bytes(i.max_storage_buffer_range), bytes(i.max_shared_memory),
          i.compute_units > 0 ? std::to_string(i.compute_units) : std::string("unreported"), i.max_work_group, i.max_work_group_count,
          i.max_push_constants, i.fp64 ? "yes" : "no", i.int64 ? "yes" : "no", i.signed_zero_inf_nan ? "yes" : "no",
          i.f32_subnormals ? "yes" : "no", i.f64_subnormals ? "yes" : "no", i.subgroup_size,
          i.subgroup_operations);
    }
  }
  return "?";
}

}  // namespace

Command add_devices_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("devices", "List the devices kiln can run on (the names --device takes).");
  return {sub, [] {
            for (Device d : registered_devices()) std::cout << fmt::format("{:<10} {}\n", d.str(), describe(d));
            return 0;
          }};
}

}  // namespace kiln::cli
