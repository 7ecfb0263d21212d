// Memory planning: buffers are reused once their values die, and an elementwise kernel writes
// over an input that dies in it. These tests keep in-place reuse from silently stopping.
#include "kiln/passes/memory_plan.h"
#include "kiln/passes/pass_manager.h"
#include "test_util.h"

namespace kiln {
namespace {

Graph fused(const std::string& text) { return run_pipeline(test::parse_or_fail(text), pipeline_for_level(2)).take(); }

const char* kElementwise = R"(graph @ew(%x: f32[256], %b: f32[256]) -> f32[256] {
  %y = exp %x : f32[256]
  %z = add %y, %b : f32[256]
  return %z
})";

TEST(MemoryPlan, ElementwiseKernelWritesInPlaceOverADonatedInput) {
  const Graph g = fused(kElementwise);
  const MemoryPlan plan = plan_memory(g, {true, false});
  ASSERT_EQ(plan.in_place.size(), 1u) << plan.str(g);
  EXPECT_EQ(g.node(plan.in_place[0].first).name, "z");
  EXPECT_EQ(g.node(plan.in_place[0].second).name, "x");
  EXPECT_EQ(plan.allocated_bytes, 0) << "the output lives in x's buffer";
}

TEST(MemoryPlan, InputsTheCallerKeepsAreNeverOverwritten) {
  const Graph g = fused(kElementwise);
  const MemoryPlan plan = plan_memory(g);
  EXPECT_TRUE(plan.in_place.empty()) << plan.str(g);
  EXPECT_EQ(plan.allocated_bytes, 256 * 4);
}

TEST(MemoryPlan, ReturnedAndStillNeededValuesAreNotOverwritten) {
  // x is returned, so it must survive; e is needed by the second kernel after the first.
  const Graph g = fused(R"(graph @keep(%x: f32[64,8]) -> (f32[64,8], f32[64,8]) {
  %e = exp %x : f32[64,8]
  %m = reduce_max %e {axes = [0], keepdim} : f32[1,8]
  %y = sub %e, %m : f32[64,8]
  return %x, %y
})");
  const MemoryPlan plan = plan_memory(g, {true});
  for (const auto& [w, r] : plan.in_place) EXPECT_NE(g.node(r).name, "x") << plan.str(g);
}

TEST(MemoryPlan, NoInPlaceWriteOverAnInputReadAgain) {
  // x is also read transposed: writing y[i, j] over x[i, j] would corrupt a later x[j, i].
  const char* transposed = R"(graph @g(%x: f32[4,4]) -> (f32[4], f32[4,4]) {
  %t = permute %x {perm = [1, 0]} : f32[4,4]
  %z = reduce_sum %t {axes = [0]} : f32[4]
  %y = add %x, %t : f32[4,4]
  return %z, %y
})";
  for (const char* passes : {"fuse", "dce"}) {
    const Graph g = run_pipeline(test::parse_or_fail(transposed), parse_pipeline(passes).take()).take();
    EXPECT_TRUE(plan_memory(g, {true}).in_place.empty()) << passes << "\n" << plan_memory(g, {true}).str(g);
  }
  // s[4] is written in a kernel over [4,4] that re-reads a[j] for every row.
  const Graph broadcast = run_pipeline(test::parse_or_fail(R"(graph @g(%a: f32[4], %c: f32[4], %d: f32[4,4]) -> (f32[4], f32[4,4]) {
  %s = add %a, %c : f32[4]
  %t = mul %s, %d : f32[4,4]
  return %s, %t
})"), parse_pipeline("fuse").take()).take();
  EXPECT_TRUE(plan_memory(broadcast, {true, true, true}).in_place.empty()) << plan_memory(broadcast, {true, true, true}).str(broadcast);
}

TEST(MemoryPlan, ReturnedAndMatmulReadSourcesHaveBuffers) {
  const Graph g = fused(R"(graph @g(%w: f32[4,4]) -> (f32[4,4], f32[4,4]) {
  %r = rand {seed = 1} : f32[4,4]
  %m = matmul %r, %w : f32[4,4]
  return %m, %r
})");
  const MemoryPlan plan = plan_memory(g);
  for (size_t v = 0; v < g.size(); ++v) {
    if (g.node(static_cast<ValueId>(v)).name == "r") {
      EXPECT_NE(plan.buffer_of[v], MemoryPlan::kNone) << plan.str(g);
    }
  }
}

TEST(MemoryPlan, DeadIntermediatesGiveTheirBuffersToLaterValues) {
  // Normalizing by column sums, then row sums, alternately: a reduction over the other axis
  // cannot join, so the chain is several kernels whose [64,32] intermediates are stored.
  // Each dies in the kernel after next, and later ones take its buffer.
  const Graph g = fused(R"(graph @chain(%x: f32[64,32]) -> f32[64,32] {
  %a = exp %x : f32[64,32]
  %sa = reduce_sum %a {axes = [0], keepdim} : f32[1,32]
  %b = div %a, %sa : f32[64,32]
  %sb = reduce_sum %b {axes = [1], keepdim} : f32[64,1]
  %c = div %b, %sb : f32[64,32]
  %sc = reduce_sum %c {axes = [0], keepdim} : f32[1,32]
  %d = div %c, %sc : f32[64,32]
  %sd = reduce_sum %d {axes = [1], keepdim} : f32[64,1]
  %e = div %d, %sd : f32[64,32]
  %se = reduce_sum %e {axes = [0], keepdim} : f32[1,32]
  %f = div %e, %se : f32[64,32]
  return %f
})");
  const MemoryPlan plan = plan_memory(g);
  EXPECT_GE(graph_stats(g).kernels, 5) << print_graph(g);
  EXPECT_LT(plan.allocated_bytes, plan.naive_bytes) << plan.str(g);
  int reused = 0;
  for (size_t b = 0; b < plan.buffer_bytes.size(); ++b) {
    int values = 0;
    for (int32_t owner : plan.buffer_of) values += owner == static_cast<int32_t>(b);
    reused += values > 1;
  }
  EXPECT_GT(reused, 0) << plan.str(g);
}

}  // namespace
}  // namespace kiln
