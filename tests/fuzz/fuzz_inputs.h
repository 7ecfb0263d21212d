// tests/fuzz/fuzz_inputs.h - what the fuzz targets share: which graphs the interpreter runs
// within a run's time, the inputs it runs them on, and the -O0 against -O2 run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/ir/interpreter.h"

namespace kiln::fuzz {

// Elements the interpreter may touch for one input: bounded so that each run stays fast.
inline constexpr int64_t kMaxElements = 1 << 16;

inline bool small_enough(const Graph& g) {
  int64_t total = 0;
  for (const Node& n : g.nodes()) {
    const auto numel = checked_numel(n.type.shape);
    if (!numel || *numel > kMaxElements) return false;
    total += *numel;
    if (total > 8 * kMaxElements) return false;
  }
  return true;
}

// Deterministic inputs: a simple pattern per element, special values included.
inline std::vector<HostTensor> inputs_for(const Graph& g) {
  std::vector<HostTensor> in;
  for (ValueId v : g.inputs()) {
    HostTensor t(g.type(v));
    for (int64_t k = 0; k < t.numel(); ++k) {
      if (is_float(t.dtype())) t.set_double(k, k % 7 == 3 ? -0.0 : static_cast<double>(k % 11) * 0.37 - 1.5);
      else t.set_int(k, k % 9 - 4);
    }
    in.push_back(std::move(t));
  }
  return in;
}

// `g` and its `optimized` form interpreted on the same inputs.
struct BothRuns {
  std::vector<HostTensor> inputs, want, got;
  std::string optimized_failure;  // what the optimized graph threw where `g` ran, or ""
};
/// nullopt when `g` itself fails at run time (an out-of-range gather index): nothing to compare.
inline std::optional<BothRuns> interpret_both(const Graph& g, const Graph& optimized) {
  BothRuns r;
  r.inputs = inputs_for(g);
  try {
    r.want = interpret(g, r.inputs);
  } catch (const Error&) {
    return std::nullopt;
  }
  try {
    r.got = interpret(optimized, r.inputs);
  } catch (const Error& e) {
    r.optimized_failure = e.what();
  }
  return r;
}

}  // namespace kiln::fuzz
