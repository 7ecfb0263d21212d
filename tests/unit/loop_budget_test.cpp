// Capabilities::max_loop_iterations: lavapipe ends a work-item's loops after 65535
// iterations in all, silently. Rows too long for one work-item go to a work-group, and a
// kernel that could still exceed the budget is an error, never a wrong result.
#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/codegen/c_source.h"
#include "kiln/engine/compile.h"
#include "test_util.h"

namespace kiln {
namespace {

Capabilities lavapipe_like() {
  Capabilities c;
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 1024;
  c.max_work_groups = 65535;
  c.subgroup_size = 8;
  c.vector_bytes = 4;
  c.cores = 2;
  c.emulated_work_groups = true;
  c.max_loop_iterations = 65535;
  return c;
}

TEST(LoopBudget, LongRowsReduceInWorkGroups) {
  // 600 rows fill two emulated cores a row per work-item, but a 70001-element row is past
  // the budget: a work-group per row instead, each work-item walking 70001 / 256 elements.
  // (An odd row: lanes, which would walk a row in fewer trips, do not divide it.)
  const Graph g = test::parse_or_fail(
      "graph @r(%x: f32[600,70001]) -> f32[600] {\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[600]\n"
      "  return %s\n}\n");
  Capabilities caps = lavapipe_like();
  const Compilation c = compile_graph(caps, {}, g);
  ASSERT_EQ(c.plan.kernels.size(), 1u);
  EXPECT_NE(c.plan.schedules[0].work_items.reduction, kir::ReductionStrategy::Serial);
  EXPECT_LE(kir::c_loop_iterations(c.plan.kernels[0], c.plan.schedules[0], caps), caps.max_loop_iterations);
  // Without the budget the same rows stay a row per work-item.
  caps.max_loop_iterations = 0;
  const Compilation unbounded = compile_graph(caps, {}, g);
  EXPECT_EQ(unbounded.plan.schedules[0].work_items.reduction, kir::ReductionStrategy::Serial);
  EXPECT_GT(kir::c_loop_iterations(unbounded.plan.kernels[0], unbounded.plan.schedules[0], caps), 65535);
}

TEST(LoopBudget, AMatmulPastTheBudgetIsAnError) {
  const Graph g = test::parse_or_fail(
      "graph @m(%a: f32[8,200000], %b: f32[200000,8]) -> f32[8,8] {\n"
      "  %c = matmul %a, %b : f32[8,8]\n"
      "  return %c\n}\n");
  const Capabilities caps = lavapipe_like();
  const Compilation c = compile_graph(caps, {}, g);
  ASSERT_EQ(c.plan.steps.size(), 1u);
  ASSERT_LT(c.plan.steps[0].kernel, 0);
  EXPECT_GT(kir::c_gemm_loop_iterations(c.plan.steps[0].gemm), caps.max_loop_iterations);
  try {
    (void)kir::glsl_gemm_source(c.plan.steps[0].gemm, nullptr, true, caps);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a 8x200000x8 matmul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("after 65535"), std::string::npos) << e.what();
  }
}

// The frontend's attention over 2000 keys: one work-item per query row would walk 2000 x 129
// iterations, past lavapipe's budget, so that device runs the softmax and the two products
// it was written as; without the budget (a GPU) it is one attention step.
TEST(LoopBudget, AttentionPastTheBudgetStaysUnfused) {
  const Graph g = test::parse_or_fail(
      "graph @a(%q: f32[16,64], %kt: f32[64,2000], %v: f32[2000,64]) -> f32[16,64] {\n"
      "  %s = matmul %q, %kt : f32[16,2000]\n"
      "  %m = reduce_max %s {axes = [1], keepdim} : f32[16,1]\n"
      "  %d = sub %s, %m : f32[16,2000]\n"
      "  %e = exp %d : f32[16,2000]\n"
      "  %z = reduce_sum %e {axes = [1], keepdim} : f32[16,1]\n"
      "  %p = div %e, %z : f32[16,2000]\n"
      "  %y = matmul %p, %v : f32[16,64]\n"
      "  return %y\n}\n");
  auto attentions = [&](const Capabilities& caps) {
    const Compilation c = compile_graph(caps, {}, g);
    return std::count_if(c.plan.steps.begin(), c.plan.steps.end(),
                         [](const LaunchPlan::Step& s) { return s.attention.has_value(); });
  };
  Capabilities caps = lavapipe_like();
  EXPECT_EQ(attentions(caps), 0);
  caps.max_loop_iterations = 0;
  EXPECT_EQ(attentions(caps), 1);
}

}  // namespace
}  // namespace kiln
