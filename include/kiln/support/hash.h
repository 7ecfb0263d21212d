// kiln/support/hash.h - the 64-bit hash combiner used for hash tables of IR nodes.
#pragma once

#include <bit>
#include <cstdint>

#include "kiln/ir/attrs.h"

namespace kiln {

/// Mixes `v` into `h` (boost's hash_combine constant, then a multiply to spread the bits).
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  return (h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdULL;
}

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

}  // namespace kiln
