// kiln/ir/hash.h - structural hashing of graphs (order-independent), 128-bit text hashes.
//
// The caches key by kiln/ir/canonical.h instead, which is cheaper and order-dependent.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/graph.h"
#include "kiln/support/hash.h"

namespace kiln {

/// Mixes every present attribute of `attrs`, values included.
inline uint64_t hash_attrs(uint64_t h, const Attrs& attrs) {
  for (size_t i = 0; i < attrs.size(); ++i) {
    const AttrValue& a = attrs[i];
    if (!a.present) continue;
    h = hash_mix(h, i + 1);
    h = hash_mix(h, static_cast<uint64_t>(a.i));
    for (int64_t v : a.ints) h = hash_mix(h, static_cast<uint64_t>(v));
    h = hash_mix(h, a.scalar.is_int() ? static_cast<uint64_t>(a.scalar.as_int())
                                      : std::bit_cast<uint64_t>(a.scalar.as_double()));
    if (a.scalars) {
      h = hash_mix(h, a.scalars->size());
      for (const Scalar& s : *a.scalars)
        h = hash_mix(h, s.is_int() ? static_cast<uint64_t>(s.as_int()) : std::bit_cast<uint64_t>(s.as_double()));
    }
  }
  return h;
}

/// A 128-bit hash.
struct Hash128 {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  std::string hex() const;
};

/// A hash of what `g` computes, independent of SSA names, of the order of independent
/// nodes, of the operand order of commutative ops, and of nodes no output uses. Parameter
/// positions and types, op kinds, attributes and result types all count; a `scalar` node
/// (bound at launch) counts by slot and type, not by value.
Hash128 structural_hash(const Graph& g);

/// A 128-bit hash of bytes (cache keys of canonical texts).
Hash128 hash_text(std::string_view text);

}  // namespace kiln
