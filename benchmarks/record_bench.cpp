// benchmarks/record_bench.cpp - what it costs to record one op in the lazy frontend:
// argument checks, shape and type inference, node creation, the incremental hash, the
// pending-list link and, when the value dies, its release. Nothing executes here.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

namespace {

// One binary op on two tensors, recorded and dropped: the steady state of a hot loop.
void BM_RecordBinaryOp(benchmark::State& state) {
  const kiln::Tensor a = kiln::zeros({64}), b = kiln::zeros({64});
  for (auto _ : state) {
    kiln::Tensor y = a + b;
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordBinaryOp);

// A chain of 1000 dependent ops, as W8 records them (y = y * b + c), then dropped.
void BM_RecordChain1000(benchmark::State& state) {
  const kiln::Tensor x = kiln::from_vector<float>(std::vector<float>(64, 1.0f), {64});
  const kiln::Tensor b = kiln::full({64}, 1.0001), c = kiln::full({64}, 0.5);
  for (auto _ : state) {
    kiln::Tensor y = x;
    for (int i = 0; i < 500; ++i) y = y * b + c;
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_RecordChain1000);

// A unary op (its type rule checks the operand is floating point).
void BM_RecordUnaryOp(benchmark::State& state) {
  const kiln::Tensor a = kiln::zeros({64});
  for (auto _ : state) {
    kiln::Tensor y = a.exp();
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordUnaryOp);

// An op with a scalar operand: records the op and a rank-0 constant.
void BM_RecordScalarOp(benchmark::State& state) {
  const kiln::Tensor a = kiln::zeros({64});
  for (auto _ : state) {
    kiln::Tensor y = a * 1.0001f;
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordScalarOp);

// A reduction: attributes (axes, keepdim) are built and checked.
void BM_RecordReduction(benchmark::State& state) {
  const kiln::Tensor a = kiln::zeros({64, 64});
  for (auto _ : state) {
    kiln::Tensor y = a.sum({1}, true);
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordReduction);

}  // namespace

BENCHMARK_MAIN();
