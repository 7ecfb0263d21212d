// Index maps of fused kernels: how each input is read from the kernel's domain.
#include "kiln/ir/index_map.h"
#include "kiln/passes/pass_manager.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(IndexExpr, SimplifiesWithExtents) {
  const IndexExpr d0 = IndexExpr::dim(0, 8), d1 = IndexExpr::dim(1, 4);
  const IndexExpr linear = d0 * 4 + d1;  // a row-major flattening of [8,4]
  EXPECT_EQ(linear.str(), "d0 * 4 + d1");
  EXPECT_EQ(linear.floordiv(4).str(), "d0");  // d1 < 4 drops out of the quotient
  EXPECT_EQ(linear.mod(4).str(), "d1");
  EXPECT_EQ(linear.floordiv(32).str(), "0");  // the whole range is below 32
  EXPECT_EQ(linear.mod(32).str(), "d0 * 4 + d1");
  EXPECT_EQ(linear.floordiv(8).str(), "(d0 * 4 + d1) floordiv 8");  // not simplifiable
  EXPECT_EQ(linear.mod(8).str(), "(d0 * 4 + d1) mod 8");
  EXPECT_EQ((d0 * 2 + IndexExpr::constant(1)).str(), "d0 * 2 + 1");
  EXPECT_EQ((d0 + IndexExpr::constant(-1)).str(), "d0 - 1");
  EXPECT_EQ((d0 + d0 * -1).str(), "0");
  EXPECT_EQ(d0.floordiv(1).str(), "d0");
  EXPECT_EQ(d0.mod(1).str(), "0");
}

std::string maps_of(const std::string& text, int32_t kernel = 0) {
  const Graph g = run_pipeline(test::parse_or_fail(text), parse_pipeline("fuse").take()).take();
  std::vector<std::string> names;
  for (const Node& n : g.nodes()) names.push_back(n.name);
  return format_index_maps(kernel_index_maps(g, kernel), names);
}

TEST(KernelIndexMaps, BroadcastsTransposesReshapesAndMatmul) {
  EXPECT_EQ(maps_of("graph @f(%x: f32[4,8], %b: f32[8]) -> f32[4,8] {\n %y = add %x, %b : f32[4,8]\n return %y\n}"),
            "over [4,8]: %x[d0, d1], %b[d1] -> %y[d0, d1]");
  EXPECT_EQ(maps_of("graph @f(%x: f32[8,4], %y: f32[4,8]) -> f32[4,8] {\n %t = permute %x {perm = [1, 0]} : f32[4,8]\n"
                    " %s = add %t, %y : f32[4,8]\n return %s\n}"),
            "over [4,8]: %x[d1, d0], %y[d0, d1] -> %s[d0, d1]");
  EXPECT_EQ(maps_of("graph @f(%x: f32[32]) -> f32[8,4] {\n %u = reshape %x : f32[8,4]\n %e = exp %u : f32[8,4]\n"
                    " return %e\n}"),
            "over [8,4]: %x[d0 * 4 + d1] -> %e[d0, d1]");
  EXPECT_EQ(maps_of("graph @f(%x: f32[32]) -> f32[16] {\n %s = slice %x {start = [1], stop = [32], step = [2]} : f32[16]\n"
                    " %e = exp %s : f32[16]\n return %e\n}"),
            "over [16]: %x[d0 * 2 + 1] -> %e[d0]");
  // A row-wise reduction chain iterates over the reduced shape; the row results are [d0, 0].
  EXPECT_EQ(maps_of("graph @f(%x: f32[4,8]) -> f32[4,8] {\n %m = reduce_max %x {axes = [1], keepdim} : f32[4,1]\n"
                    " %s = sub %x, %m : f32[4,8]\n return %s\n}"),
            "over [4,8]: %x[d0, d1] -> %s[d0, d1]");
  // A matmul kernel: the result's dims, then the contracted one.
  EXPECT_EQ(maps_of("graph @f(%a: f32[2,3,4], %b: f32[4,5], %c: f32[5]) -> f32[2,3,5] {\n"
                    " %p = matmul %a, %b : f32[2,3,5]\n %q = add %p, %c : f32[2,3,5]\n return %q\n}"),
            "over [2,3,5,4]: %a[d0, d1, d3], %b[d3, d2], %c[d2] -> %q[d0, d1, d2]");
}

}  // namespace
}  // namespace kiln
