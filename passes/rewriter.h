// passes/rewriter.h - rebuilding a graph node by node (internal to passes/).
//
// Passes never edit a graph in place: they walk the source in order and build a new one,
// mapping every old value to the new value that replaces it.
#pragma once

#include <optional>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

class Rewriter {
 public:
  /// Starts the new graph with the source's name, file and parameters, and (unless
  /// `keep_kernels` is false) its kernel regions, which copied nodes stay in.
  explicit Rewriter(const Graph& src, bool keep_kernels = true);

  const Graph& src() const { return src_; }
  Graph& out() { return out_; }
  /// The new value standing for old value `v`.
  ValueId map(ValueId v) const { return map_[v]; }
  void set(ValueId old_value, ValueId new_value) { map_[old_value] = new_value; }
  /// Copies old node `v` with its operands mapped; returns (and records) the new value.
  ValueId copy(ValueId v);
  /// Adds a node to the new graph (operands already new values).
  ValueId add(Node n) { return out_.add_unchecked(std::move(n)); }
  /// The new graph with the source's outputs mapped.
  Graph finish();

 private:
  const Graph& src_;
  Graph out_;
  std::vector<ValueId> map_;
};

/// Copies `n` with new operands (attributes, type, name, location and kernel kept).
Node with_operands(const Node& n, std::vector<ValueId> operands);

/// The value every element of `n` holds, when `n` is a `constant` splat (a `value`, or `data`
/// whose elements are all equal).
std::optional<double> splat_value(const Node& n);

}  // namespace kiln::passes
