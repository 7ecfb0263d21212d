// kiln/backends/host_memory.h - device memory that is host memory (cpu, interp).
#pragma once

#include <cstring>

#include "kiln/backends/backend.h"
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

/// A host tensor's bytes used in place (Backend::borrow), the tensor kept alive with them.
/// Kernels only read it: the engine never donates borrowed memory to a run.
class BorrowedHostMemory final : public DeviceMemory {
 public:
  explicit BorrowedHostMemory(std::shared_ptr<const HostTensor> host)
      : DeviceMemory(static_cast<int64_t>(host->nbytes())), host_(std::move(host)) {}
  std::byte* host_data() override { return const_cast<std::byte*>(host_->data()); }
  bool borrowed() const override { return true; }

 private:
  std::shared_ptr<const HostTensor> host_;
};

}  // namespace kiln
