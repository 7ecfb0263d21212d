// kiln/backend/host_memory.h - device memory that is host memory (cpu, interp).
#pragma once

#include <cstring>

#include "kiln/backend/backend.h"
#include "kiln/support/allocator.h"

namespace kiln {

/// Bytes from the caching host allocator: what host-memory devices hand out as buffers.
class HostMemory final : public DeviceMemory {
 public:
  explicit HostMemory(HostBuffer bytes) : DeviceMemory(static_cast<int64_t>(bytes.size())), bytes_(std::move(bytes)) {}
  std::byte* host_data() override { return bytes_.data(); }

 private:
  HostBuffer bytes_;
};

}  // namespace kiln
