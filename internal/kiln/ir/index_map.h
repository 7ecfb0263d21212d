// kiln/ir/index_map.h - how a fused kernel reads its inputs: index maps over its domain.
//
// A kernel iterates over a domain (d0, d1, ...). Every value it reads from outside is read
// through the views and broadcasts between it and the kernel's operations, which amounts to
// an index map: one expression in the domain's dims per dim of the value, e.g. %b[d1] for a
// bias broadcast along rows, %x[d1, d0] through a transpose, %x[d0 floordiv 8, d0 mod 8]
// through a reshape. Code generators read through these maps; the printer shows them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln {

/// An integer expression over domain dims: a linear part (coefficients, constant) or a
/// floordiv / mod of a linear part by a constant, simplified when the dims' extents allow.
class IndexExpr {
 public:
  static IndexExpr constant(int64_t c);
  static IndexExpr dim(int d, int64_t extent);

  IndexExpr operator+(const IndexExpr& o) const;
  IndexExpr operator*(int64_t k) const;
  IndexExpr floordiv(int64_t n) const;
  IndexExpr mod(int64_t n) const;

  /// "d0 * 8 + d1", "d1", "0", "(d0 * 8 + d1) floordiv 4"; past `limit` characters the
  /// rest is elided ("..."): a chain of views can make an expression whose tree, written
  /// out, is exponentially longer than the shared nodes it is built from.
  std::string str(size_t limit = 4096) const;
  bool is_linear() const { return op_ == Op::Linear; }
  /// The range [lo, hi] of the expression given 0 <= d < extent for every dim. Computed from
  /// the direct terms only: shared nodes carry theirs (share()).
  std::pair<int64_t, int64_t> range() const;

  /// Structural equality (shared sub-expressions compare by identity first).
  bool operator==(const IndexExpr& o) const;

  /// Rebuilds the expression with a code generator's arithmetic: `b.constant(int64_t)`,
  /// `b.dim(int)`, `b.add(x, y)`, `b.mul(x, int64_t)`, `b.floordiv(x, int64_t)` and
  /// `b.mod(x, int64_t)` (floordiv and mod only ever see non-negative operands). A shared
  /// sub-expression is built once: the result is a DAG as large as the expression's nodes.
  template <class Builder>
  auto build(Builder& b) const -> decltype(b.constant(int64_t{0}));
  /// The same, remembering what each shared node became across calls (a code generator
  /// building many positions along one chain of views builds each node once).
  template <class Builder, class Cache>
  auto build(Builder& b, Cache& cache) const -> decltype(b.constant(int64_t{0}));

 private:
  enum class Op : uint8_t { Linear, FloorDiv, Mod };
  struct Term {
    int dim;         // a domain dim, or -1 for `atom`
    int64_t coef;
    int64_t extent;  // 0 <= d < extent
    std::shared_ptr<const IndexExpr> atom;  // a floordiv/mod inside a linear expression
    bool same_atom(const Term& o) const;
  };
  IndexExpr as_linear() const;
  /// A node other expressions refer to, with its range and hash fixed.
  static std::shared_ptr<const IndexExpr> share(IndexExpr e);
  uint64_t structural_hash() const;
  bool write(std::string& out, size_t limit) const;  // false once elided

  template <class Builder, class Memo>
  auto build_shared(Builder& b, const std::shared_ptr<const IndexExpr>& node, Memo& memo) const;
  template <class Builder, class Memo>
  auto build_with(Builder& b, Memo& memo) const -> decltype(b.constant(int64_t{0}));

  Op op_ = Op::Linear;
  std::vector<Term> terms_;  // Linear: sum of coef * d + constant_
  int64_t constant_ = 0;
  std::shared_ptr<const IndexExpr> inner_;  // FloorDiv, Mod: inner_ op divisor_
  int64_t divisor_ = 1;
  // Set by share() on nodes that others refer to.
  std::pair<int64_t, int64_t> shared_range_{0, 0};
  uint64_t shared_hash_ = 0;
};

/// What build() made of each shared node, across calls. It holds the nodes, so that an
/// address it remembers is never reused by another node.
template <class R>
class IndexBuildCache {
 public:
  const R* find(const std::shared_ptr<const IndexExpr>& node) const {
    auto it = built_.find(node.get());
    return it == built_.end() ? nullptr : &it->second.second;
  }
  void add(const std::shared_ptr<const IndexExpr>& node, R r) { built_.emplace(node.get(), std::pair{node, r}); }

 private:
  std::unordered_map<const IndexExpr*, std::pair<std::shared_ptr<const IndexExpr>, R>> built_;
};

template <class Builder>
auto IndexExpr::build(Builder& b) const -> decltype(b.constant(int64_t{0})) {
  IndexBuildCache<decltype(b.constant(int64_t{0}))> cache;
  return build_with(b, cache);
}

template <class Builder, class Cache>
auto IndexExpr::build(Builder& b, Cache& cache) const -> decltype(b.constant(int64_t{0})) {
  return build_with(b, cache);
}

template <class Builder, class Memo>
auto IndexExpr::build_shared(Builder& b, const std::shared_ptr<const IndexExpr>& node, Memo& memo) const {
  if (const auto* r = memo.find(node)) return *r;
  auto r = node->build_with(b, memo);
  memo.add(node, r);
  return r;
}

template <class Builder, class Memo>
auto IndexExpr::build_with(Builder& b, Memo& memo) const -> decltype(b.constant(int64_t{0})) {
  if (op_ != Op::Linear) {
    auto inner = build_shared(b, inner_, memo);
    return op_ == Op::FloorDiv ? b.floordiv(inner, divisor_) : b.mod(inner, divisor_);
  }
  auto acc = b.constant(constant_);
  for (const Term& t : terms_) {
    auto x = t.dim >= 0 ? b.dim(t.dim) : build_shared(b, t.atom, memo);
    acc = b.add(acc, b.mul(x, t.coef));
  }
  return acc;
}

using IndexMap = std::vector<IndexExpr>;  // one expression per dim of the value read

struct KernelIndexMaps {
  Shape domain;
  /// Per kernel input (Graph::kernel_inputs order): the distinct maps it is read through.
  std::vector<std::pair<ValueId, std::vector<IndexMap>>> inputs;
  /// Per kernel output (Graph::kernel_outputs order): where it is written.
  std::vector<std::pair<ValueId, IndexMap>> outputs;
  /// Inputs read (a gather's data) and outputs written (a scatter's result) at positions
  /// known only at run time: printed `%x[at run time]`.
  std::vector<ValueId> at_run_time;
};

/// The domain of kernel `k` and the maps of its inputs and outputs. The domain is the shape
/// its reductions reduce, else its matmul's result with the contracted dim last, else its
/// largest output.
KernelIndexMaps kernel_index_maps(const Graph& g, int32_t k);
KernelIndexMaps kernel_index_maps(const Graph& g, const KernelIndex& index, int32_t k);

/// Where operand `operand` of `consumer` is read when `consumer` is computed at position
/// `at` (one expression per dim of its result) in a kernel over `domain`: broadcasts,
/// views, a reduction's reduced axes (the domain's) and matmul's contracted dim (the
/// domain's last). Pad and concat positions may fall outside the operand: callers mask them.
/// A gather's data is read along its axis at an index only known at run time: its map holds
/// 0 there, the part of the position that is known.
IndexMap operand_index_map(const Graph& g, const Node& consumer, size_t operand, const IndexMap& at,
                           const Shape& domain);

/// "[d0, d1 * 4]"
std::string index_map_str(const IndexMap& m);

/// "over [64,32]: %x[d0, d1], %b[d1] -> %y[d0, d1]"
/// `names` gives each value's name without '%' (value_names of the graph).
std::string format_index_maps(const KernelIndexMaps& maps, const std::vector<std::string>& names);

}  // namespace kiln
