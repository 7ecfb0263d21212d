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

// A multiple of the divisor leaves mod and moves out of floordiv, whatever the rest's range.
TEST(IndexExpr, SplitsMultiplesOfTheDivisor) {
  const IndexExpr d0 = IndexExpr::dim(0, 4), d1 = IndexExpr::dim(1, 4);
  const IndexExpr linear = d0 * 4 + d1;
  EXPECT_EQ(linear.mod(2).str(), "d1 mod 2");
  EXPECT_EQ(linear.floordiv(2).str(), "d0 * 2 + (d1 floordiv 2)");
  EXPECT_EQ((d1 + IndexExpr::constant(5)).floordiv(4).str(), "((d1 + 1) floordiv 4) + 1");
  EXPECT_EQ((d1 + IndexExpr::constant(5)).mod(4).str(), "(d1 + 1) mod 4");
  EXPECT_EQ(IndexExpr::constant(-5).floordiv(4).str(), "-2");  // floor, not truncation
  EXPECT_EQ(IndexExpr::constant(-5).mod(4).str(), "3");
  // A rest that can be negative is not divided on its own.
  EXPECT_EQ((d0 * 4 + d1 * -1).floordiv(2).str(), "(d0 * 4 - d1) floordiv 2");
}

// Views compose into expressions that share sub-expressions; written out as a tree they
// grow exponentially. Building, comparing and printing stay proportional to the nodes.
TEST(IndexExpr, DeepCompositionsStayLinear) {
  struct Counter {  // counts what build() creates
    int64_t made = 0;
    int64_t constant(int64_t) { return ++made; }
    int64_t dim(int) { return ++made; }
    int64_t add(int64_t, int64_t) { return ++made; }
    int64_t mul(int64_t, int64_t) { return ++made; }
    int64_t floordiv(int64_t, int64_t) { return ++made; }
    int64_t mod(int64_t, int64_t) { return ++made; }
  };
  // [4,4] -> transpose -> reshape [2,8] -> transpose -> reshape [4,4], 200 times over.
  IndexExpr r = IndexExpr::dim(0, 4), c = IndexExpr::dim(1, 4);
  for (int it = 0; it < 200; ++it) {
    const IndexExpr flat = c * 4 + r;  // transposed [4,4], row-major
    const IndexExpr r8 = flat.floordiv(8).mod(2), c8 = flat.mod(8);
    const IndexExpr flat2 = c8 * 2 + r8;  // transposed [2,8]
    r = flat2.floordiv(4).mod(4);
    c = flat2.mod(4);
  }
  Counter counter;
  r.build(counter);
  EXPECT_LT(counter.made, 200 * 40);
  EXPECT_LT(r.str(64).size(), 64u + 16);  // the token that crossed the limit, then "..."
  EXPECT_TRUE(r.str(64).ends_with("..."));
  const IndexExpr same = r;
  EXPECT_TRUE(same == r);
  EXPECT_FALSE(r == c);
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
