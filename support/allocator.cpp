// support/allocator.cpp - the caching host allocator: mappings of 64 KiB and 2 MiB multiples
// and a free list by size.
#include "kiln/support/allocator.h"

#include "kiln/support/env.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "kiln/support/error.h"

namespace kiln {
namespace {

constexpr uint64_t kDefaultCacheMiB = 2048;

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

/// What a request of `bytes` reserves, as the statistics count it.
size_t reserved_size(size_t bytes) {
  if (bytes >= kHostLargeThreshold) return round_up(bytes, kHostHugePageSize);
  if (bytes >= kHostMediumThreshold) return round_up(bytes, kHostMediumGranule);
  return round_up(bytes, kHostMinAlignment);
}

/// Maps `size` bytes of plain pages. Null on failure.
void* map_pages(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}


/// Maps `size` bytes (a multiple of 2 MiB) at a 2 MiB boundary and asks for huge pages:
/// over-map by one huge page, then unmap the unaligned head and the tail. Null on failure.
void* map_huge(size_t size) {
  if (size > std::numeric_limits<size_t>::max() - kHostHugePageSize) return nullptr;
  const size_t span = size + kHostHugePageSize;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(base, kHostHugePageSize);
  const size_t head = aligned - base;
  const size_t tail = span - head - size;
  if (head > 0) ::munmap(raw, head);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Without THP (mode `never`, or an old kernel) this fails and the buffer is merely aligned.
  (void)::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void unmap(void* p, size_t size) {
  const int rc = ::munmap(p, size);
  KILN_ASSERT(rc == 0, "host allocator: munmap of a block it mapped failed");
}

struct Allocator {
  std::mutex mu;
  /// Rounded size -> released blocks of that size; the most recently released is reused
  /// first, since its pages are the likeliest to still be in the TLB and caches.
  std::map<size_t, std::vector<void*>> free_blocks;  // guarded by mu
  uint64_t cache_limit = allocator_cache_limit_from_env();     // guarded by mu
  // Counters are atomics so that small allocations take no lock. bytes_cached is written
  // under mu and read without it.
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> bytes_in_use{0};
  std::atomic<uint64_t> bytes_cached{0};
  std::atomic<uint64_t> peak_bytes_in_use{0};

  void count_allocation(size_t reserved, bool hit) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (hit) cache_hits.fetch_add(1, std::memory_order_relaxed);
    const uint64_t now = bytes_in_use.fetch_add(reserved, std::memory_order_relaxed) + reserved;
    uint64_t peak = peak_bytes_in_use.load(std::memory_order_relaxed);
    while (now > peak &&
           !peak_bytes_in_use.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  /// Takes cached blocks out until at most `keep` bytes stay cached; the caller unmaps them
  /// after dropping the lock.
  std::vector<std::pair<void*, size_t>> evict_locked(uint64_t keep) {
    std::vector<std::pair<void*, size_t>> out;
    uint64_t cached = bytes_cached.load(std::memory_order_relaxed);
    while (cached > keep) {
      auto it = std::prev(free_blocks.end());  // largest first: fewest unmaps
      out.emplace_back(it->second.back(), it->first);
      cached -= it->first;
      it->second.pop_back();
      if (it->second.empty()) free_blocks.erase(it);
    }
    bytes_cached.store(cached, std::memory_order_relaxed);
    return out;
  }
};

Allocator& allocator() {
  static Allocator* a = new Allocator();  // never destroyed: static tensors free at exit
  return *a;
}

alignas(kHostMinAlignment) std::byte empty_block[kHostMinAlignment];

// A medium or large block: from the cache, else freshly mapped.
void* allocate_mapped(Allocator& a, size_t size, bool huge) {
  {
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.free_blocks.find(size);
    if (it != a.free_blocks.end()) {
      void* p = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) a.free_blocks.erase(it);
      a.bytes_cached.fetch_sub(size, std::memory_order_relaxed);
      a.count_allocation(size, true);
      return p;
    }
  }
  auto map = [&] { return huge ? map_huge(size) : map_pages(size); };
  void* p = map();
  if (p == nullptr) {
    host_allocator_trim();  // blocks of other sizes may be what the system is missing
    p = map();
    if (p == nullptr) throw std::bad_alloc();
  }
  a.count_allocation(size, false);
  return p;
}

}  // namespace

void* host_allocate(size_t bytes) {
  if (bytes == 0) return empty_block;
  Allocator& a = allocator();
  const size_t size = reserved_size(bytes);
  if (size < bytes) throw std::bad_alloc();  // rounding overflowed
  if (bytes >= kHostMediumThreshold) return allocate_mapped(a, size, bytes >= kHostLargeThreshold);
  void* p = std::aligned_alloc(kHostMinAlignment, size);
  if (p == nullptr) {
    host_allocator_trim();
    p = std::aligned_alloc(kHostMinAlignment, size);
    if (p == nullptr) throw std::bad_alloc();
  }
  a.count_allocation(size, false);
  return p;
}

void host_release(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  Allocator& a = allocator();
  const size_t size = reserved_size(bytes);
  a.bytes_in_use.fetch_sub(size, std::memory_order_relaxed);
  if (bytes < kHostMediumThreshold) {
    std::free(p);
    return;
  }
  KILN_ASSERT(reinterpret_cast<uintptr_t>(p) % (bytes >= kHostLargeThreshold ? kHostHugePageSize : 4096) == 0,
              "host_release: a medium or large block is page-aligned (wrong pointer or size?)");
  {
    std::lock_guard<std::mutex> lock(a.mu);
    const uint64_t cached = a.bytes_cached.load(std::memory_order_relaxed);
    if (cached + size <= a.cache_limit) {
      a.free_blocks[size].push_back(p);
      a.bytes_cached.store(cached + size, std::memory_order_relaxed);
      return;
    }
  }
  unmap(p, size);
}

void host_allocator_trim() {
  std::vector<std::pair<void*, size_t>> blocks;
  {
    Allocator& a = allocator();
    std::lock_guard<std::mutex> lock(a.mu);
    blocks = a.evict_locked(0);
  }
  for (const auto& [p, size] : blocks) unmap(p, size);
}

uint64_t allocator_cache_limit_from_env() {
  // 0 turns the cache off; anything that is not a plain integer keeps the default, with a warning.
  const auto mib = env_int("KILN_ALLOCATOR_CACHE_MB", 0, int64_t{1} << 40);
  return static_cast<uint64_t>(mib.value_or(static_cast<int64_t>(kDefaultCacheMiB))) << 20;
}

uint64_t host_allocator_set_cache_limit(uint64_t bytes) {
  std::vector<std::pair<void*, size_t>> blocks;
  uint64_t previous = 0;
  {
    Allocator& a = allocator();
    std::lock_guard<std::mutex> lock(a.mu);
    previous = std::exchange(a.cache_limit, bytes);
    blocks = a.evict_locked(bytes);
  }
  for (const auto& [p, size] : blocks) unmap(p, size);
  return previous;
}

HostAllocatorStats host_allocator_stats() {
  const Allocator& a = allocator();
  HostAllocatorStats s;
  s.allocations = a.allocations.load(std::memory_order_relaxed);
  s.cache_hits = a.cache_hits.load(std::memory_order_relaxed);
  s.bytes_in_use = a.bytes_in_use.load(std::memory_order_relaxed);
  s.bytes_cached = a.bytes_cached.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = a.peak_bytes_in_use.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kiln
