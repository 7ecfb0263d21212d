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

struct RuntimeCounters {
  // Plan cache: graph structural hash -> executable.
  std::atomic<uint64_t> plan_hits{0};
  std::atomic<uint64_t> plan_misses{0};
  // Kernel cache: kernel hash -> machine code, in memory and on disk.
  std::atomic<uint64_t> kernel_memory_hits{0};
  std::atomic<uint64_t> kernel_disk_hits{0};
  std::atomic<uint64_t> kernel_disk_misses{0};
  std::atomic<uint64_t> kernel_disk_rejected{0};  // corrupt or stale entries, rebuilt
  std::atomic<uint64_t> kernel_disk_writes{0};
  // Work done on a miss.
  std::atomic<uint64_t> llvm_compiles{0};      // modules run through LLVM's optimizer and codegen
  std::atomic<uint64_t> kernels_compiled{0};   // kernels in those modules
  std::atomic<uint64_t> compile_ns{0};         // wall time in LLVM (optimization + codegen)
  std::atomic<uint64_t> object_loads{0};       // object files linked into the JIT
  // Execution.
  std::atomic<uint64_t> executions{0};
  std::atomic<uint64_t> launches{0};

  /// One "name value" line per counter.
  std::string str() const;
  /// Sets every counter to zero (tests).
  void reset();
};

/// The process's counters.
RuntimeCounters& runtime_counters();

}  // namespace kiln
