// kiln/support/allocator.h - the caching host allocator: huge pages for large buffers.
//
// Memory-bound loops lose up to 39% on 4 KiB pages, and an eager program that mmaps a fresh
// 64 MiB temporary per op spends most of its time in page faults. So buffers of 1 MiB and
// more are rounded up to whole 2 MiB pages, mapped 2 MiB-aligned with MADV_HUGEPAGE, and
// kept in a free list on release, to be handed out again for the next request of the same
// rounded size. Buffers of 64 KiB to 1 MiB are mapped and cached the same way in multiples
// of 64 KiB, without huge pages: from malloc, blocks of that size were mapped and unmapped
// again on every call of a small CNN (MobileNetV3: 870 page faults, ~1 ms, per 3 ms call).
// Smaller buffers come from plain 64-byte aligned allocation.
//
// The cache holds at most $KILN_ALLOCATOR_CACHE_MB MiB (default 2048); a release that would
// exceed it unmaps the block. Memory is never zeroed here: callers that need zeros write them.
// All functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace kiln {

/// Every pointer from host_allocate is aligned to at least this (512-bit vector loads).
inline constexpr size_t kHostMinAlignment = 64;
/// Requests of this size or more are large: huge pages, cached on release.
inline constexpr size_t kHostLargeThreshold = size_t{1} << 20;
/// Large buffers are aligned to, and sized in multiples of, this (one x86-64 huge page).
inline constexpr size_t kHostHugePageSize = size_t{2} << 20;
/// Requests of this size or more, below kHostLargeThreshold, are medium: mapped in
/// multiples of kHostMediumGranule (page-aligned), cached on release.
inline constexpr size_t kHostMediumThreshold = size_t{64} << 10;
inline constexpr size_t kHostMediumGranule = size_t{64} << 10;

/// Returns `bytes` of uninitialized memory, aligned to kHostMinAlignment, to a page when
/// bytes >= kHostMediumThreshold, and to kHostHugePageSize when bytes >= kHostLargeThreshold. Never null: `bytes == 0` gives a
/// non-null pointer that must not be dereferenced. Throws std::bad_alloc when the system
/// has no memory left, after the cache has been trimmed.
void* host_allocate(size_t bytes);

/// Gives back a pointer from host_allocate; `bytes` must be the size it was requested with.
/// Medium and large blocks go to the cache (or to the system when the cache is full). Null
/// is ignored.
void host_release(void* p, size_t bytes);

/// Unmaps every cached block.
void host_allocator_trim();

/// Sets the cache's capacity in bytes (initially from $KILN_ALLOCATOR_CACHE_MB) and returns
/// the previous one. Cached blocks beyond the new capacity are unmapped at once.
uint64_t host_allocator_set_cache_limit(uint64_t bytes);
/// The cache capacity in bytes that $KILN_ALLOCATOR_CACHE_MB asks for (0 turns caching off);
/// device backends size their buffer pools by it too.
uint64_t allocator_cache_limit_from_env();

/// Process-wide counters. Sizes count what is reserved: large requests rounded up to 2 MiB,
/// medium ones to 64 KiB, small ones to 64 bytes.
struct HostAllocatorStats {
  uint64_t allocations = 0;        ///< host_allocate calls with bytes > 0, hits included
  uint64_t cache_hits = 0;         ///< of those, served from the cache
  uint64_t bytes_in_use = 0;       ///< handed out and not yet released
  uint64_t bytes_cached = 0;       ///< released large blocks held for reuse
  uint64_t peak_bytes_in_use = 0;  ///< maximum of bytes_in_use since the process started
};
HostAllocatorStats host_allocator_stats();

/// Move-only owner of one host_allocate block; releases it on destruction.
class HostBuffer {
 public:
  HostBuffer() = default;
  /// Uninitialized `bytes` from host_allocate.
  explicit HostBuffer(size_t bytes) : data_(host_allocate(bytes)), size_(bytes) {}
  HostBuffer(HostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      host_release(data_, size_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { host_release(data_, size_); }

  /// Null only for a default-constructed or moved-from buffer.
  std::byte* data() const { return static_cast<std::byte*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
