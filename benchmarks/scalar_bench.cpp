// benchmarks/scalar_bench.cpp - a training step whose learning rate changes every step.
//
// SGD with weight decay on 4096 floats, `w = w - lr * (g + wd * w)`, one sync per step.
// `fixed`: the same learning rate every step; `changing`: a new one every step. Scalars are
// bound at launch, so both run the same compiled code: the two per-step costs should match
// (the target: within 1.5x). Before scalars were kernel arguments, every new value
// compiled a new kernel (9.7 ms per step instead of 0.1 ms).
#include <benchmark/benchmark.h>

#include "kiln/kiln.h"

namespace {

void sgd_steps(benchmark::State& state, bool changing) {
  kiln::Tensor w = kiln::rand({4096}, 1);
  const kiln::Tensor g = kiln::rand({4096}, 2).eval();
  w.eval();
  static int step = 0;  // across repetitions too: a changing rate never repeats a value
  for (auto _ : state) {
    // A value never seen before at every step (distinct floats for the first 10^6 steps).
    const float lr = changing ? 1e-3f + static_cast<float>(step) * 1e-9f : 1e-3f;
    w = (w - (g + w * 1e-4f) * lr).eval();
    ++step;
  }
  benchmark::DoNotOptimize(w.to_vector<float>()[0]);
}

void BM_SgdStepFixedLr(benchmark::State& state) { sgd_steps(state, false); }
void BM_SgdStepChangingLr(benchmark::State& state) { sgd_steps(state, true); }
BENCHMARK(BM_SgdStepFixedLr)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SgdStepChangingLr)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
