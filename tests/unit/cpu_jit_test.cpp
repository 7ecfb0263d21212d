// The cpu JIT compiles on several threads at once (the autotuner's `--jobs`): LLVM runs
// outside the JIT's lock, each thread's kernels are right, and threads that race on one
// kernel end up sharing the one that was linked first. The schedule's `pipeline` picks the
// LLVM passes a kernel is compiled with.
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "kiln/backends/cpu.h"
#include "kiln/engine/compile.h"
#include "kiln/runtime/stats.h"
#include "test_util.h"

namespace kiln {
namespace {

// A row-wise kernel whose constant `c` makes it a kernel no cache holds yet.
std::string graph_text(const std::string& c) {
  return fmt::format(
      "graph @g(%x: f32[9,300]) -> f32[9,300] {{\n"
      "  %c = constant {{value = {}}} : f32[]\n"
      "  %y = mul %x, %c : f32[9,300]\n"
      "  %m = reduce_max %y {{axes = [1], keepdim}} : f32[9,1]\n"
      "  %d = sub %y, %m : f32[9,300]\n"
      "  %e = exp %d : f32[9,300]\n"
      "  return %e\n}}\n",
      c);
}

TEST(CpuJit, ThreadsCompileAtOnceAndShareTheKernelTheyRaceOn) {
  Backend& backend = cpu_backend();
  constexpr int kKernels = 4, kThreads = 2 * kKernels;
  std::vector<Graph> graphs;
  std::vector<LaunchPlan> plans;
  for (int i = 0; i < kKernels; ++i) {
    // The process id in the constant: a kernel of an earlier run is not on disk.
    graphs.push_back(test::parse_or_fail(graph_text(fmt::format("1.{}{}", ::getpid(), i))));
    plans.push_back(compile_graph(backend.capabilities(), backend.extra_passes(), graphs.back()).plan);
    ASSERT_EQ(plans.back().kernels.size(), 1u);
  }
  const uint64_t compiles_before = runtime_counters().llvm_compiles;
  std::vector<std::shared_ptr<const CompiledKernel>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const LaunchPlan& p = plans[t % kKernels];
      got[t] = backend.compile(p.kernels[0], p.schedules[0]);
    });
  for (std::thread& t : threads) t.join();
  const uint64_t compiles = runtime_counters().llvm_compiles - compiles_before;
  EXPECT_GE(compiles, static_cast<uint64_t>(kKernels));
  EXPECT_LE(compiles, static_cast<uint64_t>(kThreads));  // a race compiles twice, links once
  for (int t = 0; t < kKernels; ++t) {
    ASSERT_NE(got[t], nullptr);
    EXPECT_EQ(got[t].get(), got[t + kKernels].get()) << "kernel " << t;
  }
  // The kernels the threads made are the ones these graphs now run with.
  std::vector<float> x(9 * 300);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 16.0f;
  const std::vector<HostTensor> in{HostTensor::from_vector<float>(x, {9, 300})};
  for (const Graph& g : graphs) {
    const uint64_t before = runtime_counters().llvm_compiles;
    const HostTensor want = interpret(g, in).at(0), have = test::run_cpu(g, in).at(0);
    EXPECT_EQ(runtime_counters().llvm_compiles, before);
    const std::vector<float> w = want.to_vector<float>(), h = have.to_vector<float>();
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(h[i], w[i], 2e-6 * std::max(1.0f, std::fabs(w[i]))) << i;
  }
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CpuJit, TheSchedulesPipelinePicksTheLlvmPasses) {
  Backend& backend = cpu_backend();
  const Graph g = test::parse_or_fail(graph_text(fmt::format("2.{}", ::getpid())));
  const LaunchPlan p = compile_graph(backend.capabilities(), backend.extra_passes(), g).plan;
  ASSERT_EQ(p.kernels.size(), 1u);
  const kir::Kernel& k = p.kernels[0];
  const kir::Schedule& lean = p.schedules[0];
  ASSERT_EQ(lean.cpu.pipeline, kir::CpuPipeline::Lean);  // the default
  kir::Schedule o2 = lean;
  o2.cpu.pipeline = kir::CpuPipeline::O2;
  EXPECT_NE(lean.str(), o2.str());  // part of every cache key
  EXPECT_NE(lean.str().find("pipeline = lean"), std::string::npos) << lean.str();
  const std::string lean_ir = cpu_kernel_llvm_ir(k, lean), o2_ir = cpu_kernel_llvm_ir(k, o2);
  EXPECT_NE(lean_ir, o2_ir);
  // The lean pipeline still inlines the kernel's body and its helpers into the entry point.
  EXPECT_EQ(count(lean_ir, "\ndefine "), 1u) << lean_ir;
  EXPECT_EQ(count(cpu_kernel_llvm_ir(k, lean, /*optimized=*/false), "\ndefine "), 2u);
  const auto lean_code = backend.compile(k, lean), o2_code = backend.compile(k, o2);
  EXPECT_NE(lean_code.get(), o2_code.get());
}

// `vector_unroll` is how many vector steps the lean pipeline's loop takes per trip: LLVM
// unrolls it as the schedule says, and a cheap elementwise kernel asks for 4 by default.
TEST(CpuJit, VectorUnrollIsTheVectorStepsPerTripOfTheLaneLoop) {
  Backend& backend = cpu_backend();
  const Graph g = test::parse_or_fail(
      "graph @g(%x: f32[64,1000], %y: f32[64,1000]) -> f32[64,1000] {\n"
      "  %z = add %x, %y : f32[64,1000]\n  return %z\n}\n");
  const LaunchPlan p = compile_graph(backend.capabilities(), backend.extra_passes(), g).plan;
  ASSERT_EQ(p.kernels.size(), 1u);
  const kir::Schedule& four = p.schedules[0];
  EXPECT_EQ(four.cpu.vector_unroll, 4);
  EXPECT_EQ(four.cpu.pipeline, kir::CpuPipeline::Lean);
  if (four.vector_width == 1) GTEST_SKIP() << "no vector registers on this host";
  kir::Schedule one = four;
  one.cpu.vector_unroll = 1;
  const size_t adds_four = count(cpu_kernel_llvm_ir(p.kernels[0], four), "fadd <");
  const size_t adds_one = count(cpu_kernel_llvm_ir(p.kernels[0], one), "fadd <");
  EXPECT_EQ(adds_one, 1u);
  EXPECT_GE(adds_four, 4u);
  // Both compute the sum.
  std::vector<float> x(64 * 1000), y(64 * 1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 97) * 0.25f;
    y[i] = static_cast<float>(i % 13) - 6.0f;
  }
  const std::vector<HostTensor> in{HostTensor::from_vector<float>(x, {64, 1000}),
                                   HostTensor::from_vector<float>(y, {64, 1000})};
  const std::vector<float> got = test::run_cpu(g, in).at(0).to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], x[i] + y[i]) << i;
}

}  // namespace
}  // namespace kiln
