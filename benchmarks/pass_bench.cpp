// benchmarks/pass_bench.cpp - what the optimizer costs on a plan-cache miss: the -O2 pipeline
// (folding, simplification, CSE, DCE, fusion) and the memory plan on the peer workloads.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include <kiln/ir/text.h>
#include <kiln/passes/memory_plan.h>
#include <kiln/passes/pass_manager.h>

namespace {

kiln::Graph load(const char* name) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/examples/workloads/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return kiln::parse_graph(ss.str(), name).take();
}

void BM_PipelineO2(benchmark::State& state, const char* name) {
  const kiln::Graph g = load(name);
  const auto passes = kiln::pipeline_for_level(2);
  kiln::PipelineOptions no_verify;
  no_verify.verify_each = false;
  for (auto _ : state) {
    kiln::Graph out = kiln::run_pipeline(g, passes, {}, no_verify).take();
    benchmark::DoNotOptimize(out.size());
  }
  state.counters["nodes"] = static_cast<double>(g.size());
}
BENCHMARK_CAPTURE(BM_PipelineO2, w3_softmax, "w3_softmax.kir");
BENCHMARK_CAPTURE(BM_PipelineO2, w7_mlp, "w7_mlp.kir");
BENCHMARK_CAPTURE(BM_PipelineO2, w8_chain_200, "w8_chain_200.kir");

void BM_MemoryPlan(benchmark::State& state) {
  const kiln::Graph g = kiln::run_pipeline(load("w7_mlp.kir"), kiln::pipeline_for_level(2)).take();
  for (auto _ : state) benchmark::DoNotOptimize(kiln::plan_memory(g).allocated_bytes);
}
BENCHMARK(BM_MemoryPlan);

}  // namespace

BENCHMARK_MAIN();
