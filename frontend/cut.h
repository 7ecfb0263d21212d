// frontend/cut.h - from pending values to one Graph (internal to frontend/).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "lazy_value.h"

namespace kiln::detail {

struct CutGraph {
  Graph graph;
  std::vector<LazyValue*> leaves;    // evaluated values read, in parameter order
  std::vector<uint32_t> leaf_uses;   // references to each leaf from the graph's own nodes
  std::vector<LazyValue*> produced;  // values returned, in output order
  // Capture: (launch slot, bound_scalar source index) of each bound scalar.
  std::vector<std::pair<int64_t, int64_t>> bound_slots;
};

/// What the leaves of a cut are and how parameters are named.
enum class LeafPolicy {
  Evaluate,  // a sync: leaves are evaluated values %in0...; values held elsewhere are outputs too
  Trace,     // kiln::trace: %arg0... then evaluated leaves %capture0...
  Dump,      // kiln::dump: as Evaluate, without the extra outputs
  Capture,   // kiln::capture: as Trace
};

/// Builds the graph that computes `targets` from their pending subgraph. With `trace_inputs`
/// given, those come first as parameters %arg0... (they may be unused).
CutGraph cut(std::span<LazyValue* const> targets, LeafPolicy policy, std::span<LazyValue* const> trace_inputs = {});

}  // namespace kiln::detail
