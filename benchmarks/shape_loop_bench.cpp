// benchmarks/shape_loop_bench.cpp - a decoder-style step at every sequence length (issue 42).
//
//   build/bin/kiln_shape_loop_bench [--max-t 64] [--device cpu]
//
// y = softmax(q k^T / sqrt(d)) h with h = layer_norm(x), q = h Wq, k = h Wk, for x of
// [T, 768] at T = 1, 2, ..., max-t: the loop a serving process runs as its sequences grow.
// The first pass over T compiles what each new shape needs; the second runs every shape
// from the plan cache, which is the time of the fully specialized plans. Prints both passes'
// times and the kernels compiled, plans missed and kernels loaded from the disk cache in
// each. Run it with an empty KILN_CACHE_DIR to count compiles rather than disk hits.
// benchmarks/shape_loop_peers.py runs the same loop in torch.compile (dynamic) and jax.jit.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <kiln/kiln.h>
#include <kiln/runtime/stats.h>

namespace {

constexpr int64_t kWidth = 768;

struct Counts {
  uint64_t compiled, misses, disk_hits;
  static Counts now() {
    const kiln::RuntimeCounters& c = kiln::runtime_counters();
    return {c.kernels_compiled.load(), c.plan_misses.load(), c.kernel_disk_hits.load()};
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t max_t = 64;
  kiln::Device device;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-t" && i + 1 < argc) max_t = std::stoll(argv[++i]);
    else if (a == "--device" && i + 1 < argc) device = kiln::Device::parse(argv[++i]);
    else {
      std::fprintf(stderr, "usage: kiln_shape_loop_bench [--max-t N] [--device D]\n");
      return 2;
    }
  }
  using kiln::Tensor;
  const double scale = 1.0 / std::sqrt(static_cast<double>(kWidth));
  const Tensor wq_e = (kiln::randn({kWidth, kWidth}, 1) * scale).eval().to(device).eval();
  const Tensor wk_e = (kiln::randn({kWidth, kWidth}, 2) * scale).eval().to(device).eval();
  const Tensor gamma = kiln::ones({kWidth}).to(device).eval(), beta = kiln::zeros({kWidth}).to(device).eval();
  auto step = [&](const Tensor& x) {
    const Tensor h = kiln::layer_norm(x, gamma, beta, 1e-5);
    const Tensor q = h.matmul(wq_e), k = h.matmul(wk_e);
    const Tensor p = (q.matmul(k.transpose(0, 1)) * scale).softmax(-1);
    return p.matmul(h);
  };
  std::vector<Tensor> inputs, outputs;
  for (int64_t t = 1; t <= max_t; ++t)
    inputs.push_back(kiln::randn({t, kWidth}, 100 + static_cast<uint64_t>(t)).eval().to(device).eval());
  kiln::synchronize(device);
  double checksum = 0;
  for (int pass = 1; pass <= 2; ++pass) {
    const Counts before = Counts::now();
    const auto t0 = std::chrono::steady_clock::now();
    outputs.clear();
    for (const Tensor& x : inputs) {
      outputs.push_back(step(x).eval());
      kiln::synchronize(device);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const Counts after = Counts::now();
    std::printf("kiln %s, T = 1..%lld, pass %d: %.1f ms; %llu kernels compiled, %llu plans missed, %llu kernels from "
                "the disk cache\n",
                device.str().c_str(), static_cast<long long>(max_t), pass, ms,
                static_cast<unsigned long long>(after.compiled - before.compiled),
                static_cast<unsigned long long>(after.misses - before.misses),
                static_cast<unsigned long long>(after.disk_hits - before.disk_hits));
  }
  for (const Tensor& y : outputs) checksum += static_cast<double>(y.sum().item<float>());
  std::printf("checksum %.6g\n", checksum);
  return 0;
}
