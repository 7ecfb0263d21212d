// Caches stay bounded in long loops. Runs with small capacities (KILN_PLAN_CACHE_SIZE=8,
// KILN_KERNEL_CACHE_SIZE=8, KILN_DISK_CACHE_MB=1, set below before anything starts the
// engine, which reads them once) in an executable of its own.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "kiln/backends/cpu.h"
#include "kiln/engine/compile.h"
#include "kiln/kiln.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/stats.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

[[maybe_unused]] const bool kSmallCaches = [] {
  ::setenv("KILN_PLAN_CACHE_SIZE", "8", 1);
  ::setenv("KILN_KERNEL_CACHE_SIZE", "8", 1);
  ::setenv("KILN_DISK_CACHE_MB", "1", 1);
  return true;
}();

uintmax_t dir_bytes(const fs::path& dir) {
  uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

TEST(CacheBounds, CapacitiesComeFromTheEnvironment) {
  EXPECT_EQ(plan_cache_capacity(Device::cpu()), 8u);
  EXPECT_EQ(DiskCache::max_bytes(), int64_t{1} << 20);
}

// An SGD step whose learning rate changes every step, 100,000 times: one compilation, one
// plan, and nothing that grows with the number of steps.
TEST(CacheBounds, HundredThousandStepsWithAChangingScalarCompileOnce) {
  RuntimeCounters& c = runtime_counters();
  Tensor w = full({256}, 1.0f);
  const Tensor g = full({256}, 0.5f).eval();
  w.eval();
  const uint64_t misses = c.plan_misses, compiled = c.kernels_compiled;
  for (int step = 0; step < 100000; ++step) {
    const float lr = 1e-6f * static_cast<float>(step % 977 + 1);
    w = (w - g * lr).eval();
  }
  EXPECT_LE(c.plan_misses - misses, 1u);
  EXPECT_LE(c.kernels_compiled - compiled, 1u);
  EXPECT_LE(plan_cache_size(Device::cpu()), 8u);
  EXPECT_LE(cpu_cached_kernels(), 8u);
  EXPECT_LT(w.to_vector<float>()[0], 1.0f);
}

// A new graph every step (a growing shape): the plan cache and the kernel LRU evict, code no
// executable holds is unlinked, and the disk cache stays under its cap.
TEST(CacheBounds, NewGraphsEveryStepEvictLeastRecentlyUsed) {
  RuntimeCounters& c = runtime_counters();
  const uint64_t plan_ev = c.plan_evictions, kern_ev = c.kernel_evictions, unloaded = c.kernels_unloaded;
  for (int n = 1; n <= 40; ++n) {
    const Tensor x = arange(n, DType::F32);
    EXPECT_EQ(((x * 2.0f + 1.0f).exp()).to_vector<float>().size(), static_cast<size_t>(n));
  }
  EXPECT_LE(plan_cache_size(Device::cpu()), 8u);
  EXPECT_GE(c.plan_evictions - plan_ev, 30u);
  EXPECT_LE(cpu_cached_kernels(), 8u);
  EXPECT_GT(c.kernel_evictions - kern_ev, 0u);
  EXPECT_GT(c.kernels_unloaded - unloaded, 0u);
  const fs::path dir = DiskCache::default_root() / "cpu";
  if (fs::exists(dir)) {
    EXPECT_LE(dir_bytes(dir), static_cast<uintmax_t>(DiskCache::max_bytes()));
  }
  // What was evicted is rebuilt (from disk) when needed again, and still right.
  EXPECT_EQ(((arange(1, DType::F32) * 2.0f + 1.0f).exp()).item<float>(), std::exp(1.0f));
}

// Regression (found by review): a kernel whose last holder dropped it still owned its symbol
// while its unlinking waited for the JIT's lock; a thread that needed the same kernel then
// linked it again, failed on the duplicate symbol, and deleted the good disk entry. Two
// threads evicting and relinking the same kernels must never see an error.
TEST(CacheBounds, ThreadsEvictingAndRelinkingTheSameKernelsNeverFail) {
  auto work = [](int thread) {
    for (int round = 0; round < 40; ++round) {
      for (int n = 1; n <= 12; ++n) {
        const Tensor x = arange(n, DType::F32);
        const float got = ((x * 3.0f - 1.0f).tanh()).sum().item<float>();
        float want = 0;
        for (int i = 0; i < n; ++i) want += std::tanh(3.0f * static_cast<float>(i) - 1.0f);
        EXPECT_NEAR(got, want, 1e-4f * n) << "thread " << thread << " n " << n;
      }
      if (round % 3 == thread) plan_cache_clear(Device::cpu());
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
}

TEST(CacheBounds, DiskCacheRemovesLeastRecentlyUsedEntriesPastItsCap) {
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-disk-cap-{}", ::getpid());
  fs::remove_all(root);
  DiskCache cache(root, "t");
  const std::string payload(400 * 1024, 'x');
  RuntimeCounters& c = runtime_counters();
  const uint64_t evicted = c.disk_evictions;
  ASSERT_TRUE(cache.store("a", "ca", payload));
  ASSERT_TRUE(cache.store("b", "cb", payload));
  fs::last_write_time(cache.path_of("a"), fs::file_time_type::clock::now() - std::chrono::hours(1));
  fs::last_write_time(cache.path_of("b"), fs::file_time_type::clock::now() - std::chrono::hours(2));
  ASSERT_TRUE(cache.load("a", "ca").has_value());  // a is now the most recently used
  ASSERT_TRUE(cache.store("c", "cc", payload));     // 1.2 MiB > 1 MiB: b goes
  EXPECT_FALSE(fs::exists(cache.path_of("b")));
  EXPECT_TRUE(fs::exists(cache.path_of("a")));
  EXPECT_TRUE(fs::exists(cache.path_of("c")));
  EXPECT_EQ(c.disk_evictions - evicted, 1u);
  EXPECT_LE(dir_bytes(root / "t"), static_cast<uintmax_t>(DiskCache::max_bytes()));
  fs::remove_all(root);
}

// The long chains below, a tenth as long in a sanitizer build (where the million ops take
// five minutes): still far past every length at which they once failed.
#ifdef KILN_SANITIZED
constexpr int kChainShare = 10;
#else
constexpr int kChainShare = 1;
#endif

// Regression (issue 10): long fused chains overflowed the stack (the LLVM emitter at 6000
// ops, lowering at 20000, 1500 under ASan). A million-op chain with the pending cap off now
// runs: fusion bounds a kernel's size (FusionPolicy::max_kernel_ops), the emitter walks
// kernels without recursion, and the chain's kernels share one compiled body.
TEST(LongChains, AMillionOpChainWithThePendingCapOffRuns) {
  const uint32_t cap = max_pending();
  set_max_pending(std::numeric_limits<uint32_t>::max());
  std::vector<float> x0(64);
  for (size_t i = 0; i < x0.size(); ++i) x0[i] = static_cast<float>(i) * 0.01f;
  Tensor y = from_vector<float>(x0, {64});
  constexpr int kSteps = 500000 / kChainShare;  // 2 ops each
  for (int it = 0; it < kSteps; ++it) y = y * 1.0000001f + 0.5f;
  const std::vector<float> got = y.to_vector<float>();
  set_max_pending(cap);
  // The same f32 operations in the same order (volatile: no fused multiply-add).
  for (size_t i = 0; i < x0.size(); i += 9) {
    float want = x0[i];
    for (int it = 0; it < kSteps; ++it) {
      volatile float product = want * 1.0000001f;
      want = product + 0.5f;
    }
    EXPECT_EQ(got[i], want) << i;
  }
}

// Regression (issue 10): a chain of views that fold into nothing simpler (transposes between
// reshapes) was one index expression whose text doubled at every view; 8,000 views took
// minutes and 200,000 never finished, then overflowed LLVM's stack in one huge kernel.
// Index expressions are now shared DAGs built once per node, and fusion stores a view once
// FusionPolicy::max_kernel_ops views are read through it.
TEST(LongChains, TwoHundredThousandViewsRun) {
  const uint32_t cap = max_pending();
  set_max_pending(std::numeric_limits<uint32_t>::max());
  std::vector<float> x0(16);
  for (size_t i = 0; i < x0.size(); ++i) x0[i] = static_cast<float>(i);
  Tensor y = from_vector<float>(x0, {4, 4});
  constexpr int kRounds = 50000 / kChainShare;  // 4 views each
  for (int it = 0; it < kRounds; ++it) y = y.permute({1, 0}).reshape({2, 8}).permute({1, 0}).reshape({4, 4});
  const std::vector<float> got = y.to_vector<float>();
  set_max_pending(cap);
  auto transpose = [](const std::vector<float>& a, int rows, int cols) {
    std::vector<float> t(a.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = a[static_cast<size_t>(r * cols + c)];
    return t;
  };
  std::vector<float> want = x0;
  for (int it = 0; it < kRounds; ++it) want = transpose(transpose(want, 4, 4), 2, 8);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kiln
