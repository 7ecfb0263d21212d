// benchmarks/timing.h - the wall-clock helpers the hand-rolled benchmarks share.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kiln::bench {

/// Seconds one call of `fn` takes.
inline double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The middle value (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace kiln::bench
