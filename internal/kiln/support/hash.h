// kiln/support/hash.h - the 64-bit hash combiner used for hash tables of IR nodes.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

/// Mixes `v` into `h` (boost's hash_combine constant, then a multiply to spread the bits).
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  return (h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdULL;
}

}  // namespace kiln
