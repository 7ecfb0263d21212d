// The fusion planner: the kernel counts promised for the peer workloads (docs/passes.md),
// the case that must not fuse, and the policy knobs.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/passes/pass_manager.h"
#include "test_util.h"

namespace kiln {
namespace {

Graph load(const std::string& name) {
  const auto path = std::filesystem::path(KILN_SOURCE_DIR) / "examples/workloads" / name;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_graph(ss.str(), path.string()).take();
}

Graph optimize(const Graph& g, const PassOptions& options = {}) {
  return run_pipeline(g, pipeline_for_level(2), options).take();
}

int64_t kernels_after_o2(const std::string& name) { return graph_stats(optimize(load(name))).kernels; }

TEST(Fusion, PeerWorkloadKernelCounts) {
  EXPECT_EQ(kernels_after_o2("w1_ew_chain.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w2_bias_gelu_residual.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w3_softmax.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w4_layer_norm.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w5a_sum_all.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w5b_col_sum.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w6_matmul_bias_relu.kir"), 1);
  EXPECT_EQ(kernels_after_o2("w7_mlp.kir"), 4);  // 3 matmuls with bias/relu epilogues + softmax
  EXPECT_EQ(kernels_after_o2("w8_chain_200.kir"), 1);
}

TEST(Fusion, FusedWorkloadsMoveTheMinimalBytes) {
  // Each input read once, each output written once (peers README, "minimal bytes").
  const int64_t mib = 1 << 20;
  EXPECT_EQ(graph_stats(optimize(load("w1_ew_chain.kir"))).bytes_moved, 128 * mib);
  EXPECT_EQ(graph_stats(optimize(load("w2_bias_gelu_residual.kir"))).bytes_moved, 192 * mib + 16 * 1024);
  EXPECT_EQ(graph_stats(optimize(load("w3_softmax.kir"))).bytes_moved, 128 * mib);
  EXPECT_EQ(graph_stats(optimize(load("w4_layer_norm.kir"))).bytes_moved, 128 * mib + 32 * 1024);
}

TEST(Fusion, CrossAxisReductionsDoNotFuseAndSayWhy) {
  const Graph g = optimize(load("no_fusion_cross_axis.kir"));
  EXPECT_EQ(graph_stats(g).kernels, 2);
  ASSERT_EQ(g.kernels().size(), 2u);
  EXPECT_NE(g.kernels()[0].note.find("cannot join a kernel that reduces axes [0]"), std::string::npos)
      << g.kernels()[0].note;
}

// A depthwise convolution over a channels-last value permuted back (ConvNeXt's first block,
// after its stem's layer norm): its overlapping windows would read every element through
// the permute, a gather per lane at each of 49 taps. The permute is stored once instead, by
// a kernel that what computes the value joins (a copy, for a parameter), and the
// convolution reads it in order.
TEST(Fusion, OverlappingWindowsOfAPermutedValueReadItStoredInThatOrder) {
  auto kernels = [](const std::string& text) { return optimize(parse_graph(text, "test").take()); };
  const Graph computed = kernels(R"(graph @computed(%x: f32[1,14,14,32], %w: f32[32,1,7,7]) -> f32[1,32,14,14] {
  %e = exp %x : f32[1,14,14,32]
  %p = permute %e {perm = [0, 3, 1, 2]} : f32[1,32,14,14]
  %y = conv %p, %w {strides = [1, 1], low = [3, 3], high = [3, 3], groups = 32} : f32[1,32,14,14]
  return %y
})");
  ASSERT_EQ(computed.kernels().size(), 2u) << print_graph(computed);
  const KernelRegion& stored = computed.kernels()[0];
  EXPECT_EQ(computed.kernel_index().members[0].size(), 2u) << "the exp and the permute: " << print_graph(computed);
  EXPECT_NE(stored.note.find("overlapping windows read each of its elements up to 7 times"), std::string::npos)
      << stored.note;
  // A parameter permuted so is copied once; not where the permute keeps the last axis.
  auto of_parameter = [&](const char* input, const char* perm) {
    return kernels(fmt::format(R"(graph @parameter(%x: f32[{}], %w: f32[32,1,7,7]) -> f32[1,32,14,14] {{
  %p = permute %x {{perm = [{}]}} : f32[1,32,14,14]
  %y = conv %p, %w {{strides = [1, 1], low = [3, 3], high = [3, 3], groups = 32}} : f32[1,32,14,14]
  return %y
}})", input, perm));
  };
  const Graph parameter = of_parameter("1,14,14,32", "0, 3, 1, 2");
  EXPECT_EQ(parameter.kernels().size(), 2u) << print_graph(parameter);
  const Graph kept = of_parameter("1,14,32,14", "0, 2, 1, 3");
  EXPECT_EQ(kept.kernels().size(), 1u) << print_graph(kept);
}

TEST(Fusion, FusedGraphsRoundTripAndKeepValues) {
  for (const char* name : {"w3_softmax.kir", "w7_mlp.kir", "no_fusion_cross_axis.kir"}) {
    const Graph fused = optimize(load(name));
    const std::string text = print_graph(fused);
    const Graph again = parse_graph(text, "fused").take();
    EXPECT_EQ(print_graph(again), text) << name;
  }
  // Small enough to interpret: the fused softmax computes what the original does.
  const char* small = "graph @s(%x: f32[3,5]) -> f32[3,5] {\n"
                      "  %m = reduce_max %x {axes = [1], keepdim} : f32[3,1]\n"
                      "  %s = sub %x, %m : f32[3,5]\n  %e = exp %s : f32[3,5]\n"
                      "  %z = reduce_sum %e {axes = [1], keepdim} : f32[3,1]\n"
                      "  %y = div %e, %z : f32[3,5]\n  return %y\n}";
  const Graph g = test::parse_or_fail(small);
  std::vector<float> values(15);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.37f - 2;
  const HostTensor x = HostTensor::from_vector(values, {3, 5});
  EXPECT_EQ(interpret(g, {&x, 1})[0].to_vector<float>(), interpret(optimize(g), {&x, 1})[0].to_vector<float>());
}

TEST(Fusion, PolicyKnobs) {
  // Without reduction fusion, softmax is max | sub+exp | sum | div.
  PassOptions no_reduce;
  no_reduce.fusion.reductions = false;
  EXPECT_EQ(graph_stats(optimize(load("w3_softmax.kir"), no_reduce)).kernels, 4);
  // Without matmul epilogues, W6 is the matmul and its epilogue.
  PassOptions no_epilogue;
  no_epilogue.fusion.matmul_epilogue = false;
  EXPECT_EQ(graph_stats(optimize(load("w6_matmul_bias_relu.kir"), no_epilogue)).kernels, 2);
  // A cheap value two kernels need: recomputed in each, or stored once.
  const Graph shared = test::parse_or_fail(
      "graph @shared(%x: f32[8,4], %b: f32[4]) -> (f32[8], f32[4]) {\n"
      "  %u = add %x, %b : f32[8,4]\n"
      "  %rows = reduce_sum %u {axes = [1]} : f32[8]\n"
      "  %cols = reduce_sum %u {axes = [0]} : f32[4]\n"
      "  return %rows, %cols\n}");
  PassOptions store;
  store.fusion.multi_consumer = MultiConsumer::Materialize;
  const Graph stored = optimize(shared, store);
  EXPECT_EQ(graph_stats(stored).kernels, 3);
  EXPECT_NE(print_graph(stored).find("is stored once for"), std::string::npos) << print_graph(stored);
  EXPECT_EQ(graph_stats(optimize(shared)).kernels, 2) << print_graph(optimize(shared));
}

TEST(SplitReductions, BlocksUpToTheDeviceBound) {
  // W5a, a 16M-float sum: 64 blocks by default (CPUs), as many as a GPU asks for, and the
  // largest power of two under a bound that is not one.
  const Graph sum = load("w5a_sum_all.kir");
  auto split = [&](int64_t max_blocks) {
    PassOptions o;
    o.max_split_blocks = max_blocks;
    return print_graph(find_pass("split-reductions")->run(sum, o));
  };
  EXPECT_NE(split(PassOptions{}.max_split_blocks).find("f32[64,262144]"), std::string::npos) << split(64);
  EXPECT_NE(split(528).find("f32[512,32768]"), std::string::npos) << split(528);
  EXPECT_NE(split(4).find("f32[4,4194304]"), std::string::npos) << split(4);
  EXPECT_EQ(split(1).find("reshape"), std::string::npos) << split(1);  // one block: nothing to split
}

// The block count is the autotuner's knob split_blocks: every power of two up to twice the
// bound whose blocks stay long enough, or 1 (not cut); a chooser's legal pick is what the
// pass cuts, and an illegal one gives the default.
TEST(SplitReductions, AChooserPicksALegalBlockCountOrGetsTheDefault) {
  const Graph sum = load("w5a_sum_all.kir");
  const Node& reduce = sum.node(sum.outputs()[0]);
  const std::optional<ReductionSplit> site = reduction_split(sum, reduce, 64);
  ASSERT_TRUE(site);
  EXPECT_EQ(site->blocks, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128}));
  EXPECT_EQ(site->default_blocks, 64);
  EXPECT_EQ(site->str(), "reduce_sum f32[16777216] axes [0]");
  const std::string alone = print_graph(reduction_graph(*site));
  EXPECT_NE(alone.find("%x: f32[16777216]"), std::string::npos) << alone;
  EXPECT_NE(alone.find("reduce_sum %x {axes = [0]} : f32[]"), std::string::npos) << alone;
  auto split = [&](int64_t pick) {
    PassOptions o;
    o.split_blocks = [&](const ReductionSplit& s) {
      EXPECT_EQ(s.blocks, site->blocks);
      return pick;
    };
    return print_graph(find_pass("split-reductions")->run(sum, o));
  };
  EXPECT_NE(split(8).find("f32[8,2097152]"), std::string::npos) << split(8);
  EXPECT_NE(split(128).find("f32[128,131072]"), std::string::npos) << split(128);
  EXPECT_EQ(split(1).find("reshape"), std::string::npos) << split(1);
  EXPECT_NE(split(3).find("f32[64,262144]"), std::string::npos) << split(3);
  EXPECT_NE(split(256).find("f32[64,262144]"), std::string::npos) << split(256);
  // Reductions it leaves alone have no site.
  const Graph rows = test::parse_or_fail(
      "graph @g(%x: f32[64,1000]) -> f32[64] {\n  %y = reduce_sum %x {axes = [1]} : f32[64]\n  return %y\n}");
  EXPECT_FALSE(reduction_split(rows, rows.node(rows.outputs()[0]), 64));
}

}  // namespace
}  // namespace kiln
