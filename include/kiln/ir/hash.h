// kiln/ir/hash.h - structural hashing of graphs, the key of the plan cache.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln {

/// A 128-bit hash.
struct Hash128 {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  std::string hex() const;
};

struct HashOptions {
  /// Rank-0 floating-point constants (a learning rate, a step size) hash by type and slot
  /// only (slots are numbered in node order), as runtime parameters bound at launch, so that
  /// a loop whose scalars change every step keeps one plan.
  bool scalars_as_parameters = false;
};

/// A hash of what `g` computes, independent of SSA names, of the order of independent
/// nodes, of the operand order of commutative ops, and of nodes no output uses. Parameter
/// positions and types, op kinds, attributes and result types all count.
Hash128 structural_hash(const Graph& g, const HashOptions& options = {});

/// A 128-bit hash of bytes (cache keys of canonical texts).
Hash128 hash_text(std::string_view text);

}  // namespace kiln
