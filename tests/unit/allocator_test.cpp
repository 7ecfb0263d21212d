// The caching host allocator and HostTensor storage on it: alignment, reuse of released
// large blocks, the cache's cap, statistics, zero fill over recycled garbage, threads.
#include "kiln/support/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/ir/host_tensor.h"

namespace kiln {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

/// Restores the cache's capacity when a test that changed it ends.
struct CacheLimitGuard {
  uint64_t previous;
  explicit CacheLimitGuard(uint64_t limit) : previous(host_allocator_set_cache_limit(limit)) {}
  ~CacheLimitGuard() { host_allocator_set_cache_limit(previous); }
};

TEST(HostAllocator, SmallBuffersAre64ByteAligned) {
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{63}, size_t{64}, size_t{100}, size_t{4096},
                       size_t{65537}, kHostLargeThreshold - 1}) {
    void* p = host_allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, 64)) << bytes << " bytes at " << p;
    std::memset(p, 0x5a, bytes);  // the whole request is usable
    blocks.emplace_back(p, bytes);
  }
  for (auto [p, bytes] : blocks) host_release(p, bytes);
}

TEST(HostAllocator, LargeBuffersAreHugePageAligned) {
  for (size_t bytes : {kHostLargeThreshold, 2 * kMiB, 2 * kMiB + 1, 5 * kMiB + 123, 64 * kMiB}) {
    void* p = host_allocate(bytes);
    EXPECT_TRUE(aligned(p, kHostHugePageSize)) << bytes << " bytes at " << p;
    static_cast<unsigned char*>(p)[bytes - 1] = 1;
    host_release(p, bytes);
  }
}

TEST(HostAllocator, ZeroBytesGiveANonNullPointer) {
  void* p = host_allocate(0);
  EXPECT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 64));
  host_release(p, 0);
  host_release(nullptr, 123);  // ignored
}

TEST(HostAllocator, ReleasedLargeBufferIsHandedOutAgainUnzeroed) {
  const CacheLimitGuard guard(256 * kMiB);  // caching on, whatever the environment says
  const size_t bytes = 6 * kMiB + 17;
  void* p = host_allocate(bytes);
  std::memset(p, 0xab, bytes);
  const HostAllocatorStats before_release = host_allocator_stats();
  host_release(p, bytes);
  const HostAllocatorStats released = host_allocator_stats();
  EXPECT_EQ(released.bytes_in_use, before_release.bytes_in_use - 8 * kMiB);
  EXPECT_EQ(released.bytes_cached, before_release.bytes_cached + 8 * kMiB);

  // Same rounded size (8 MiB), not the same request: still a hit.
  void* q = host_allocate(7 * kMiB);
  const HostAllocatorStats after = host_allocator_stats();
  EXPECT_EQ(q, p);
  EXPECT_EQ(after.allocations, released.allocations + 1);
  EXPECT_EQ(after.cache_hits, released.cache_hits + 1);
  EXPECT_EQ(after.bytes_cached, released.bytes_cached - 8 * kMiB);
  EXPECT_EQ(after.bytes_in_use, released.bytes_in_use + 8 * kMiB);
  // The allocator does not clear memory: the earlier contents are still there.
  const auto* bytes_q = static_cast<const unsigned char*>(q);
  EXPECT_EQ(bytes_q[0], 0xab);
  EXPECT_EQ(bytes_q[bytes - 1], 0xab);
  host_release(q, 7 * kMiB);
}

// Temporaries of 64 KiB to 1 MiB (a small CNN's activations) are mapped pages kept for the
// next call: from malloc they were unmapped at release and faulted in again at every call.
TEST(HostAllocator, ReleasedMediumBufferIsHandedOutAgain) {
  const CacheLimitGuard guard(256 * kMiB);
  const size_t bytes = 802816;  // [1, 16, 112, 112] f32: 784 KiB
  void* p = host_allocate(bytes);
  EXPECT_TRUE(aligned(p, 4096));
  std::memset(p, 0xcd, bytes);
  const HostAllocatorStats before_release = host_allocator_stats();
  host_release(p, bytes);
  const HostAllocatorStats released = host_allocator_stats();
  EXPECT_EQ(released.bytes_in_use, before_release.bytes_in_use - 832 * 1024);  // 64 KiB multiples
  EXPECT_EQ(released.bytes_cached, before_release.bytes_cached + 832 * 1024);
  void* q = host_allocate(bytes - 1000);  // the same rounded size
  EXPECT_EQ(q, p);
  EXPECT_EQ(host_allocator_stats().cache_hits, released.cache_hits + 1);
  EXPECT_EQ(static_cast<const unsigned char*>(q)[0], 0xcd);
  host_release(q, bytes - 1000);
  // Below 64 KiB: malloc's, not cached.
  void* small = host_allocate(kHostMediumThreshold - 1);
  const uint64_t cached = host_allocator_stats().bytes_cached;
  host_release(small, kHostMediumThreshold - 1);
  EXPECT_EQ(host_allocator_stats().bytes_cached, cached);
}

TEST(HostAllocator, StatsCountAllocationsAndPeak) {
  const CacheLimitGuard guard(256 * kMiB);  // caching on, whatever the environment says
  const HostAllocatorStats s0 = host_allocator_stats();
  void* small = host_allocate(100);  // reserves 128 bytes
  const HostAllocatorStats s1 = host_allocator_stats();
  EXPECT_EQ(s1.allocations, s0.allocations + 1);
  EXPECT_EQ(s1.cache_hits, s0.cache_hits);
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + 128);
  EXPECT_GE(s1.peak_bytes_in_use, s1.bytes_in_use);

  host_allocator_trim();  // so that the next large request maps a fresh block
  void* large = host_allocate(3 * kMiB);
  const HostAllocatorStats s2 = host_allocator_stats();
  EXPECT_EQ(s2.allocations, s1.allocations + 1);
  EXPECT_EQ(s2.cache_hits, s1.cache_hits);
  EXPECT_EQ(s2.bytes_in_use, s1.bytes_in_use + 4 * kMiB);
  EXPECT_GE(s2.peak_bytes_in_use, s2.bytes_in_use);

  host_release(large, 3 * kMiB);
  host_release(small, 100);
  const HostAllocatorStats s3 = host_allocator_stats();
  EXPECT_EQ(s3.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s3.bytes_cached, 4 * kMiB);
  EXPECT_EQ(s3.peak_bytes_in_use, s2.peak_bytes_in_use) << "the peak never goes down";
  EXPECT_EQ(s3.allocations, s2.allocations) << "releases are not allocations";
}

TEST(HostAllocator, CacheRespectsItsCapAndTrimEmptiesIt) {
  host_allocator_trim();
  EXPECT_EQ(host_allocator_stats().bytes_cached, 0u);
  const CacheLimitGuard guard(4 * kMiB);

  void* blocks[3];
  for (void*& p : blocks) p = host_allocate(2 * kMiB);
  for (void* p : blocks) host_release(p, 2 * kMiB);
  EXPECT_EQ(host_allocator_stats().bytes_cached, 4 * kMiB) << "the third block was unmapped";

  void* big = host_allocate(6 * kMiB);  // larger than the whole cache: never kept
  host_release(big, 6 * kMiB);
  EXPECT_EQ(host_allocator_stats().bytes_cached, 4 * kMiB);

  host_allocator_set_cache_limit(2 * kMiB);  // shrinking evicts at once
  EXPECT_EQ(host_allocator_stats().bytes_cached, 2 * kMiB);

  host_allocator_trim();
  EXPECT_EQ(host_allocator_stats().bytes_cached, 0u);

  // With the cache empty, the next request is a miss.
  const HostAllocatorStats before = host_allocator_stats();
  void* p = host_allocate(2 * kMiB);
  EXPECT_EQ(host_allocator_stats().cache_hits, before.cache_hits);
  host_release(p, 2 * kMiB);
}

TEST(HostAllocator, ZeroCacheLimitReturnsEveryBlock) {
  const CacheLimitGuard guard(0);
  void* p = host_allocate(2 * kMiB);
  host_release(p, 2 * kMiB);
  EXPECT_EQ(host_allocator_stats().bytes_cached, 0u);
}

/// The VmFlags line of the mapping that contains `p`, from /proc/self/smaps; empty if none.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HostAllocator, LargeBuffersAreAdvisedForHugePages) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "the kernel has no transparent huge pages";
  const size_t bytes = 4 * kMiB;
  void* p = host_allocate(bytes);
  const std::string flags = vm_flags_of(p);
  if (flags.empty()) {
    host_release(p, bytes);
    GTEST_SKIP() << "/proc/self/smaps is not readable";
  }
  EXPECT_NE(flags.find(" hg"), std::string::npos) << "MADV_HUGEPAGE missing: " << flags;
  host_release(p, bytes);
}

TEST(HostAllocator, ConcurrentAllocateAndRelease) {
  const CacheLimitGuard guard(256 * kMiB);  // caching on, whatever the environment says
  const HostAllocatorStats before = host_allocator_stats();
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  const size_t sizes[] = {24, 4096, 100000, kHostLargeThreshold, 3 * kMiB, 4 * kMiB};
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (int r = 0; r < kRounds; ++r) {
        const size_t bytes = sizes[static_cast<size_t>(r + t) % std::size(sizes)];
        auto* p = static_cast<unsigned char*>(host_allocate(bytes));
        const auto mark = static_cast<unsigned char>(t * 31 + r);
        p[0] = mark;
        p[bytes / 2] = mark;
        p[bytes - 1] = mark;
        held.emplace_back(p, bytes);
        if (held.size() > 3) {  // hold a few at a time, so blocks move between threads
          auto [q, n] = held.front();
          held.erase(held.begin());
          const auto* qb = q;
          if (qb[0] != qb[n / 2] || qb[0] != qb[n - 1]) ++failures[static_cast<size_t>(t)];
          host_release(q, n);
        }
        if (!aligned(p, bytes >= kHostLargeThreshold ? kHostHugePageSize : 64))
          ++failures[static_cast<size_t>(t)];
      }
      for (auto [q, n] : held) host_release(q, n);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
  const HostAllocatorStats after = host_allocator_stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.allocations, before.allocations + kThreads * kRounds);
  EXPECT_GT(after.cache_hits, before.cache_hits);
}

TEST(HostBuffer, OwnsAndMoves) {
  const uint64_t in_use = host_allocator_stats().bytes_in_use;
  {
    HostBuffer a(2 * kMiB);
    EXPECT_EQ(a.size(), 2 * kMiB);
    EXPECT_EQ(host_allocator_stats().bytes_in_use, in_use + 2 * kMiB);
    std::byte* p = a.data();
    HostBuffer b(std::move(a));
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(a.size(), 0u);
    b = HostBuffer(64);  // the 2 MiB block is released here
    EXPECT_EQ(host_allocator_stats().bytes_in_use, in_use + 64);
  }
  EXPECT_EQ(host_allocator_stats().bytes_in_use, in_use);
}

TEST(HostTensorStorage, DataIsAligned) {
  const HostTensor small(TensorType{DType::F32, {3}});
  EXPECT_TRUE(aligned(small.data(), 64));
  const HostTensor large(TensorType{DType::F64, {512, 512}});  // 2 MiB
  EXPECT_TRUE(aligned(large.data(), kHostHugePageSize));
}

TEST(HostTensorStorage, CopyIsDeep) {
  HostTensor a = HostTensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  HostTensor b(a);
  EXPECT_NE(b.data(), a.data());
  b.set_double(0, 9);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{9, 2, 3, 4}));

  // Assignment over a tensor of the same size and of a different size.
  HostTensor same = HostTensor::from_vector<int32_t>({7, 7, 7, 7}, {4});
  same = a;
  EXPECT_EQ(same.type(), a.type());
  EXPECT_NE(same.data(), a.data());
  EXPECT_EQ(same.to_vector<float>(), a.to_vector<float>());
  HostTensor other = HostTensor::from_vector<double>({1, 2, 3, 4, 5}, {5});
  other = a;
  EXPECT_EQ(other.nbytes(), a.nbytes());
  EXPECT_EQ(other.to_vector<float>(), a.to_vector<float>());
  other.set_double(3, -1);
  EXPECT_EQ(a.get_double(3), 4);

  const HostTensor& self = other;
  other = self;  // self-assignment keeps the contents
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{1, 2, 3, -1}));

  // Large tensors copy deep too.
  HostTensor big(TensorType{DType::F32, {1024, 1024}});
  big.set_double(12345, 3.5);
  const HostTensor big_copy = big;
  big.set_double(12345, 0);
  EXPECT_EQ(big_copy.get_double(12345), 3.5);
}

TEST(HostTensorStorage, MoveTransfersTheBuffer) {
  HostTensor a = HostTensor::from_vector<int64_t>({1, 2, 3}, {3});
  const std::byte* p = a.data();
  HostTensor b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  HostTensor c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.nbytes(), 3 * sizeof(int64_t));
}

TEST(HostTensorStorage, UninitializedHasTheRightSize) {
  const HostTensor t = HostTensor::uninitialized(TensorType{DType::I32, {3, 5}});
  EXPECT_EQ(t.nbytes(), 3u * 5u * 4u);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.type(), (TensorType{DType::I32, {3, 5}}));
  const HostTensor big = HostTensor::uninitialized(TensorType{DType::F32, {3, 1000, 1000}});
  EXPECT_EQ(big.nbytes(), 12'000'000u);
}

TEST(HostTensorStorage, ZeroFillOverARecycledBlockThatHeldGarbage) {
  const CacheLimitGuard guard(256 * kMiB);  // caching on, whatever the environment says
  const TensorType type{DType::F32, {1024, 1024}};  // 4 MiB: cached on release
  const std::byte* recycled = nullptr;
  {
    HostTensor garbage = HostTensor::uninitialized(type);
    std::memset(garbage.data(), 0xcd, garbage.nbytes());
    recycled = garbage.data();
  }
  const HostTensor zeros(type);
  EXPECT_EQ(zeros.data(), recycled) << "the block was not recycled: the test proves nothing";
  const std::vector<float> v = zeros.to_vector<float>();
  size_t nonzero = 0;
  for (float x : v) nonzero += x != 0.0f;
  EXPECT_EQ(nonzero, 0u);
}

TEST(HostTensorStorage, ZeroSizeTensors) {
  const HostTensor empty(TensorType{DType::F32, {0, 4}});
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.to_vector<float>().empty());
  const HostTensor copy = empty;
  EXPECT_EQ(copy.nbytes(), 0u);
  const HostTensor uninit = HostTensor::uninitialized(TensorType{DType::I64, {5, 0}});
  EXPECT_EQ(uninit.nbytes(), 0u);
  const HostTensor from = HostTensor::from_vector<int32_t>({}, {0});
  EXPECT_EQ(from.nbytes(), 0u);
  HostTensor defaulted;
  EXPECT_EQ(defaulted.nbytes(), 0u);
  defaulted = copy;
  EXPECT_EQ(defaulted.nbytes(), 0u);
}

}  // namespace
}  // namespace kiln
