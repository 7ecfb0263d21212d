// engine/profile_peak.cpp - see profile_peak.h.
#include "profile_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "kiln/backends/backend.h"
#include "kiln/ir/hash.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/ir/text.h"
#include "kiln/runtime/disk_cache.h"

namespace kiln::engine {
namespace {

// The fastest of `runs` runs of `text` after one warm-up, each waited for: a peak is what the
// device reaches at best, and a shared machine only ever slows a run down.
double fastest_seconds(Engine& e, std::string_view text, int runs) {
  const Graph g = parse_graph(text, "<profile peak>").take();
  std::vector<BufferRef> inputs;
  for (ValueId v : g.inputs()) inputs.push_back(e.upload(HostTensor(g.type(v))));
  e.run(g, inputs);
  e.finish();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    e.run(g, inputs);
    e.finish();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return *std::min_element(times.begin(), times.end());
}

}  // namespace

profile::Peak device_peak(Engine& e, Backend& backend, const std::string& fingerprint) {
  const std::string canonical = "profile peak v3|" + fingerprint;
  const std::string key = hash_text(canonical).hex();
  DiskCache cache(DiskCache::default_root(), "profile");
  profile::Peak p;
  if (const std::optional<std::string> stored = cache.load(key, canonical))
    if (std::sscanf(stored->c_str(), "%lf %lf", &p.copy_gbs, &p.fma_gflops) == 2 && p.copy_gbs > 0 && p.fma_gflops > 0)
      return p;
  constexpr int64_t kCopied = int64_t{16} << 20, kSide = 512;
  const double copy = fastest_seconds(e,
                                     fmt::format("graph @peak_copy(%x: f32[{0}]) -> f32[{0}] {{\n"
                                                 "  %y = neg %x : f32[{0}]\n  return %y\n}}\n",
                                                 kCopied),
                                     5);
  p.copy_gbs = 2.0 * kCopied * 4 / copy / 1e9;
  p.fma_gflops = backend.fma_peak_gflops();
  if (p.fma_gflops <= 0) {
    const double gemm = fastest_seconds(
        e,
        fmt::format("graph @peak_gemm(%a: f32[{0},{0}], %b: f32[{0},{0}]) -> f32[{0},{0}] {{\n"
                    "  %c = matmul %a, %b : f32[{0},{0}]\n  return %c\n}}\n",
                    kSide),
        3);
    p.fma_gflops = 2.0 * kSide * kSide * kSide / gemm / 1e9;
  }
  cache.store(key, canonical, fmt::format("{} {}", p.copy_gbs, p.fma_gflops));
  return p;
}

}  // namespace kiln::engine
