// benchmarks/peer_inputs.h - the inputs of ../shared/peers, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

/// Element `i` of the peers' input `seed` in [lo, hi): the splitmix64 finalizer of
/// (seed << 32) + i as a 24-bit uniform (k + 0.5) / 2^24 (../shared/peers/cpp/common.hpp,
/// gen). hi - lo is always a power of two, so the double arithmetic is exact.
inline float peer_input(uint64_t seed, long i, double lo, double hi) {
  uint64_t z = (seed << 32) + 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  const double u = (static_cast<double>(z >> 40) + 0.5) * (1.0 / 16777216.0);
  return static_cast<float>(lo + (hi - lo) * u);
}

/// The first `n` elements of the peers' input `seed` in [lo, hi).
inline std::vector<float> peer_vector(long n, uint64_t seed, double lo, double hi) {
  std::vector<float> out(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) out[static_cast<size_t>(i)] = peer_input(seed, i, lo, hi);
  return out;
}
