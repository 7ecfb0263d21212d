// kiln/runtime/stats.h - process-wide counters of the runtime and its caches.
//
// Every cache lookup and every compilation counts here; tests read the counters to prove
// that a repeated stream skipped the passes and codegen, and `KILN_STATS=1` prints them to
// stderr when the process exits.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace kiln {

// Every counter, once: name, what it counts. The struct, KILN_STATS and reset() expand it.
#define KILN_RUNTIME_COUNTERS(X)                                                              \
  X(plan_hits, "plan cache: graphs found compiled")                                           \
  X(plan_misses, "plan cache: graphs compiled")                                               \
  X(plan_evictions, "plan cache: executables dropped (least recently used, over capacity)")   \
  X(kernel_memory_hits, "kernels found alive in this process")                                \
  X(kernel_evictions, "kernels dropped from the in-memory LRU")                               \
  X(kernels_unloaded, "kernels whose code was unlinked (no holder left)")                     \
  X(kernel_disk_hits, "kernels loaded from the disk cache")                                   \
  X(kernel_disk_misses, "kernels not on disk")                                                \
  X(kernel_disk_rejected, "corrupt or stale disk entries, rebuilt")                           \
  X(kernel_disk_writes, "entries written to the disk cache")                                  \
  X(disk_evictions, "disk entries removed to keep the cache under its size cap")              \
  X(llvm_compiles, "modules run through LLVM's optimizer and code generator")                 \
  X(kernels_compiled, "kernels in those modules")                                             \
  X(compile_ns, "wall time in compilation (printed as compile_ms)")                           \
  X(object_loads, "object files linked into the JIT")                                         \
  X(executions, "graphs run")                                                                 \
  X(launches, "kernel launches and library steps")                                            \
  X(packed_operands, "GEMM operands that never change (weights), packed and kept")            \
  X(packed_operand_hits, "GEMM operands that never change, found packed")

struct RuntimeCounters {
#define KILN_COUNTER_FIELD(name, what) std::atomic<uint64_t> name{0};
  KILN_RUNTIME_COUNTERS(KILN_COUNTER_FIELD)
#undef KILN_COUNTER_FIELD

  /// One "name value" line per counter.
  std::string str() const;
  /// Sets every counter to zero (tests).
  void reset();
};

/// The process's counters.
RuntimeCounters& runtime_counters();

/// Bytes of device memory alive: every DeviceMemory of every device (tensors' buffers, plans'
/// intermediates and constants; on `cpu`, a host tensor read in place too), now and at the
/// most since the process started or reset_peak(). A training step's peak is the peak after
/// a reset_peak() before it. KILN_STATS and the profiler print both.
struct DeviceMemoryGauge {
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> peak{0};
  void allocated(int64_t bytes);
  void freed(int64_t bytes);
  /// The peak from now on starts at what is alive now.
  void reset_peak() { peak.store(live.load()); }
};
DeviceMemoryGauge& device_memory_gauge();

}  // namespace kiln
