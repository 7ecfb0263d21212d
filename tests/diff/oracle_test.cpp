// The differential oracle itself (tools/testing/differential.h): what it accepts as "the
// same value" decides whether `kiln fuzz` reports noise or misses bugs.
#include <gtest/gtest.h>

#include "kiln/engine/engine.h"
#include "kiln/ir/text.h"
#include "differential.h"

namespace kiln {
namespace {

std::vector<HostTensor> one(std::vector<float> v) {
  const auto n = static_cast<int64_t>(v.size());
  return {HostTensor::from_vector(v, Shape{n})};
}

// An approximated output is judged at the scale of the values it is computed from: a sum of
// terms of magnitude 1 that cancels to 0 may come out as a rounding of those terms.
TEST(Oracle, CancellationIsJudgedByItsTerms) {
  const auto want = one({0.0f, 0.0f});
  const auto got = one({-5.960464477539063e-08f, 0.0f});
  EXPECT_EQ(test::compare_outputs(want, got, {test::Precision::Approximate}, {1.0}, 2e-4), "");
  // Terms as small as the result: the same difference is a failure.
  EXPECT_NE(test::compare_outputs(want, got, {test::Precision::Approximate}, {0.0}, 2e-4), "");
  // An exact output never gets a tolerance.
  EXPECT_NE(test::compare_outputs(want, got, {test::Precision::Exact}, {1.0}, 2e-4), "");
}

// A sum of 1024 f32 terms (W6's matmul) is off by more units of its terms' magnitude than a
// sum of 16: the share of the magnitude allowed grows with the longest sum of the graph.
TEST(Oracle, DeepSumsGetAToleranceInProportion) {
  const auto want = one({0.0142841637134552f});
  const auto got = one({0.014270186424255371f});  // cpu W6, element 127766
  EXPECT_NE(test::compare_outputs(want, got, {test::Precision::Approximate}, {30.0}, 2e-4, 16), "");
  EXPECT_EQ(test::compare_outputs(want, got, {test::Precision::Approximate}, {30.0}, 2e-4, 1024), "");
  const Graph g = parse_graph(R"(graph @g(%a: f32[4,1024], %b: f32[1024,8]) -> f32[4] {
  %c = matmul %a, %b : f32[4,8]
  %s = reduce_sum %c {axes = [1]} : f32[4]
  return %s
})").take();
  EXPECT_EQ(test::longest_sum(g), 1024);
}

TEST(Oracle, MagnitudeCoversEveryValueAnOutputIsComputedFrom) {
  const Graph g = parse_graph(R"(graph @g(%x: f32[2]) -> (f32[], f32[2]) {
  %big = mul %x, %x : f32[2]
  %s = reduce_sum %big {axes = [0]} : f32[]
  %small = neg %x : f32[2]
  return %s, %small
})").take();
  const auto m = test::magnitudes(g, one({-3.0f, 2.0f}));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], 13.0);  // the sum itself is the largest here
  EXPECT_EQ(m[1], 3.0);   // %x, not %big: that is not an operand of %small
}

// kiln fuzz seed 1100723 (minimized): a matmul whose exact result is 0 came out of the cpu
// device's GEMM as -2^-24 and was reported as a failure.
TEST(Oracle, FuzzSeed1100723IsNotAFailure) {
  const Graph g = parse_graph(R"(graph @random1100723(%p0: f32[2,3], %p1: f32[1]) -> f32[2,1] {
  %0 = pad %p0 {low = [0, 0], high = [0, 2]} : f32[2,5]
  %1 = min %0, %p1 : f32[2,5]
  %2 = arange {start = -1.0, step = 0.5} : f32[5]
  %3 = reshape %2 : f32[5,1]
  %4 = matmul %1, %3 : f32[2,1]
  return %4
})").take();
  for (const Device& d : registered_devices()) EXPECT_EQ(test::check_on_device(d, g, 1100723), "") << d.str();
}

}  // namespace
}  // namespace kiln
