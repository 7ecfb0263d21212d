// engine/registry.cpp - the device registry: one row per device, the only place that names
// backends. A new backend adds its row here.
#include <array>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "kernel_engine.h"
#include "kiln/backend/cpu.h"
#include "kiln/engine/compile.h"
#include "kiln/support/error.h"

namespace kiln {
namespace {

struct DeviceRow {
  Device device;
  const char* name;
  std::unique_ptr<Engine> (*make)();
};

const std::array<DeviceRow, 2> kDevices{{
    {Device::cpu(), "cpu", [] { return engine::make_kernel_engine(Device::cpu(), cpu_backend()); }},
    {Device::interp(), "interp", [] { return engine::make_interpreter_engine(); }},
}};

}  // namespace

Buffer::Buffer(Device device, TensorType type, std::shared_ptr<DeviceMemory> memory)
    : device_(device), type_(std::move(type)), memory_(std::move(memory)) {
  KILN_ASSERT(memory_ && memory_->bytes() >= type_.bytes(), "a buffer's memory holds its tensor");
}

const std::byte* Buffer::host_data() const { return memory_->host_data(); }

Engine& engine_for(Device device) {
  // Engines are made on first use (a backend may be costly to start) and never destroyed:
  // kernels may still run during static destruction.
  static std::array<Engine*, kDevices.size()> engines{};
  static std::array<std::once_flag, kDevices.size()> made;
  for (size_t i = 0; i < kDevices.size(); ++i) {
    if (!(kDevices[i].device == device)) continue;
    std::call_once(made[i], [&] { engines[i] = kDevices[i].make().release(); });
    return *engines[i];
  }
  throw Error(fmt::format("device {} is not registered in this build", device.str()));
}

std::vector<Device> registered_devices() {
  std::vector<Device> out;
  for (const DeviceRow& row : kDevices) out.push_back(row.device);
  return out;
}

Device Device::parse(std::string_view name) {
  std::string names;
  for (const DeviceRow& row : kDevices) {
    if (name == row.name) return row.device;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", row.name);
  }
  throw Error(fmt::format("unknown device '{}' (available: {})", name, names));
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
