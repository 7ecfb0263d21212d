// backends/device_memory.cpp - DeviceMemory's ids and its count in the memory gauge.
#include <atomic>

#include "kiln/backends/backend.h"
#include "kiln/runtime/stats.h"

namespace kiln {

DeviceMemory::DeviceMemory(int64_t bytes) : bytes_(bytes), id_(next_id()) { device_memory_gauge().allocated(bytes); }

DeviceMemory::~DeviceMemory() { device_memory_gauge().freed(bytes_); }

uint64_t DeviceMemory::next_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kiln
