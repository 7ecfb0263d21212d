// engine/registry.cpp - the device registry: one row per device, the only place that names
// backends. A new backend adds its row here.
#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "kernel_engine.h"
#include "kiln/backends/cpu.h"
#include "kiln/backends/opencl.h"
#include "kiln/backends/vulkan.h"
#include "kiln/engine/compile.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

// A kind of device: what the public row says of it (engine.h), the enum value of its
// Device, how many there are, how to describe one and how to make the engine of one.
struct DeviceKind {
  DeviceKindInfo info;
  Device::Kind kind;
  size_t (*count)();
  std::string (*describe)(int index);
  std::unique_ptr<Engine> (*make)(int index);
};

constexpr DumpStage kCpuStages[] = {{"llvm", "ll"}};
constexpr DumpStage kOpenClStages[] = {{"opencl", "opencl"}};
constexpr DumpStage kVulkanStages[] = {{"glsl", "glsl"}, {"spirv", "spirv"}};

const std::array<DeviceKind, 4> kKinds{{
    {{"cpu", false, "cpu", kCpuStages}, Device::Kind::Cpu, [] { return size_t{1}; },
     [](int) { return fmt::format("LLVM JIT for {}", cpu_target_description()); },
     [](int) { return engine::make_kernel_engine(Device::cpu(), cpu_backend()); }},
    {{"interp", false, "", {}}, Device::Kind::Interp, [] { return size_t{1}; },
     [](int) -> std::string { return "the reference interpreter (no compiler)"; },
     [](int) { return engine::make_interpreter_engine(); }},
    {{"opencl", true, "opencl", kOpenClStages}, Device::Kind::OpenCL, [] { return opencl_devices().size(); },
     opencl_device_description, [](int i) { return engine::make_kernel_engine(Device::opencl(i), opencl_backend(i)); }},
    {{"vulkan", true, "vulkan", kVulkanStages}, Device::Kind::Vulkan, [] { return vulkan_devices().size(); },
     vulkan_device_description, [](int i) { return engine::make_kernel_engine(Device::vulkan(i), vulkan_backend(i)); }},
}};

size_t kind_index(Device device) {
  for (size_t k = 0; k < kKinds.size(); ++k)
    if (kKinds[k].kind == device.kind) return k;
  throw Error(fmt::format("device kind {} is not registered in this build", static_cast<int>(device.kind)));
}

std::string available_devices() {
  std::string names;
  for (const Device& d : registered_devices()) names += fmt::format("{}{}", names.empty() ? "" : ", ", d.str());
  return names;
}

}  // namespace

Buffer::Buffer(Device device, TensorType type, std::shared_ptr<DeviceMemory> memory)
    : device_(device), type_(std::move(type)), memory_(std::move(memory)) {
  KILN_ASSERT(memory_ && memory_->bytes() >= type_.bytes(), "a buffer's memory holds its tensor");
}

const std::byte* Buffer::host_data() const { return memory_->host_data(); }

void register_custom_host() {
  static std::once_flag once;
  std::call_once(once, [] { set_custom_host_factory(cpu_custom_host_function); });
}

Engine& engine_for(Device device) {
  // Engines are made on first use (a backend may be costly to start) and never destroyed:
  // kernels may still run during static destruction. A device that fails to start throws
  // here, every time it is asked for; other devices keep working. Every sync asks: after
  // the first call for a device this is two loads, no lock.
  struct Slot {
    std::once_flag made;
    Engine* engine = nullptr;
  };
  static std::array<std::once_flag, kKinds.size()> counted;
  // Per kind, one slot per device; never freed, like the engines, which stay reachable
  // through these pointers until exit (LeakSanitizer reports them otherwise).
  static std::array<Slot*, kKinds.size()> slots{};
  static std::array<size_t, kKinds.size()> counts{};
  const size_t k = kind_index(device);
  register_custom_host();
  std::call_once(counted[k], [&] {
    counts[k] = kKinds[k].count();
    slots[k] = new Slot[std::max<size_t>(counts[k], 1)];
  });
  if (device.index < 0 || static_cast<size_t>(device.index) >= counts[k])
    throw Error(fmt::format("device {} does not exist (available: {})", device.str(), available_devices()));
  Slot& slot = slots[k][static_cast<size_t>(device.index)];
  std::call_once(slot.made, [&] {
    // KILN_NO_COMPILE is read where a compile would happen, which a warm cache never
    // reaches: a value it does not understand is refused here, before anything runs.
    compile_allowed();
    slot.engine = kKinds[k].make(device.index).release();
  });
  return *slot.engine;
}

std::vector<Device> registered_devices() {
  std::vector<Device> out;
  for (const DeviceKind& k : kKinds)
    for (size_t i = 0; i < k.count(); ++i) out.push_back(Device{k.kind, static_cast<int>(i)});
  return out;
}

std::span<const DeviceKindInfo> device_kinds() {
  // Made on first use, not at static initialization: KILN_DUMP and device names may be
  // asked for from other files' static objects.
  static const std::array<DeviceKindInfo, kKinds.size()> infos = [] {
    std::array<DeviceKindInfo, kKinds.size()> out;
    for (size_t k = 0; k < kKinds.size(); ++k) out[k] = kKinds[k].info;
    return out;
  }();
  return infos;
}

const DeviceKindInfo& device_kind(Device device) { return device_kinds()[kind_index(device)]; }

std::string device_description(Device device) { return kKinds[kind_index(device)].describe(device.index); }

std::string Device::str() const {
  const DeviceKindInfo& k = device_kind(*this);
  return k.indexed ? fmt::format("{}:{}", k.name, index) : std::string(k.name);
}

Device Device::parse(std::string_view name) {
  for (const DeviceKind& k : kKinds) {
    const std::string_view kind = k.info.name;
    if (name == kind) return Device{k.kind, 0};
    // "opencl:3"
    if (!k.info.indexed || name.size() <= kind.size() + 1 || !name.starts_with(kind) || name[kind.size()] != ':') continue;
    const std::string_view digits = name.substr(kind.size() + 1);
    int index = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) return Device{k.kind, index};
  }
  throw Error(fmt::format("unknown device '{}' (available: {})", name, available_devices()));
}

BufferRef copy_to_device(const BufferRef& b, Device to) {
  if (b->device() == to) return b;
  return engine_for(to).upload(engine_for(b->device()).download(*b));
}

std::vector<HostTensor> run_on_host(Device device, const Graph& g, std::span<const HostTensor> inputs) {
  Engine& e = engine_for(device);
  std::vector<BufferRef> refs;
  refs.reserve(inputs.size());
  for (const HostTensor& t : inputs) refs.push_back(e.upload(t));
  std::vector<HostTensor> out;
  for (const BufferRef& r : e.run(g, refs)) out.push_back(e.download(*r));
  return out;
}

size_t plan_cache_size(Device device) { return engine::plan_cache_size(engine_for(device)); }
size_t plan_cache_capacity(Device device) { return engine::plan_cache_capacity(engine_for(device)); }
void plan_cache_clear(Device device) { engine::plan_cache_clear(engine_for(device)); }

}  // namespace kiln
