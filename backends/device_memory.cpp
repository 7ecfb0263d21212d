// backends/device_memory.cpp - DeviceMemory's ids.
#include <atomic>

#include "kiln/backend/backend.h"

namespace kiln {

uint64_t DeviceMemory::next_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kiln
