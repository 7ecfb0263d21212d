// kiln/passes/memory_plan.h - which buffer every stored value lives in.
//
// After fusion, a graph stores only what crosses kernel boundaries: kernel outputs and the
// results of operations outside kernels. The memory plan walks the kernels in order and gives
// each stored value a buffer: the buffer of an input that dies in the same elementwise kernel
// (an in-place write), else a freed buffer of the same size, else a new one. Views alias
// their source's buffer; splat constants need none.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln {

struct MemoryPlan {
  static constexpr int32_t kNone = -1;
  /// Per value: the buffer holding it, or kNone (values inside kernels, splats, views: a
  /// view's data is its source's buffer).
  std::vector<int32_t> buffer_of;
  /// Per buffer: its size in bytes, and the parameter it belongs to (or -1 for one the plan
  /// allocates).
  std::vector<int64_t> buffer_bytes;
  std::vector<int32_t> buffer_param;
  /// (value, input) pairs where a kernel writes `value` over `input`, which dies there.
  std::vector<std::pair<ValueId, ValueId>> in_place;
  int64_t allocated_bytes = 0;  // bytes of the buffers the plan allocates
  int64_t naive_bytes = 0;      // bytes if every stored value had its own buffer

  /// One line per buffer and per in-place write, for `kiln opt --memory-plan`.
  std::string str(const Graph& g) const;
};

/// Plans `g`'s memory. `donated[i]` says that parameter i's buffer belongs to this execution
/// (the caller holds no other reference), so it may be overwritten once read for the last
/// time; the frontend derives it from its tensors' reference counts.
MemoryPlan plan_memory(const Graph& g, const std::vector<bool>& donated = {});

}  // namespace kiln
