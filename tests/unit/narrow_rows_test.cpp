// Reductions whose rows are narrower than a vector (default_schedule, codegen/schedule.cpp):
// a plane of one to four vectors walks as one row (Schedule::merge_rows, kir::merge_rows),
// and a row whose lanes end past its last whole vector walks them in one more vector step
// with the lanes past its end masked off (Schedule's cpu.masked_tail), not lane by lane.
// Depthwise convolutions of 7x7 to 28x28 planes, as MobileNet and EfficientNet have them,
// are such reductions.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/autotune/kernel_bench.h"
#include "kiln/backends/cpu.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kiln/codegen/variants.h"
#include "kiln/support/error.h"
#include "test_util.h"

namespace kiln {
namespace {

std::string depthwise(int64_t channels, int64_t height, int64_t width, int64_t taps) {
  const int64_t pad = (taps - 1) / 2;
  return fmt::format(
      "graph @dw(%x: f32[1,{0},{1},{2}], %w: f32[{0},1,{3},{3}]) -> f32[1,{0},{1},{2}] {{\n"
      "  %y = conv %x, %w {{strides = [1, 1], dilations = [1, 1], low = [{4}, {4}], high = [{4}, {4}], "
      "groups = {0}}} : f32[1,{0},{1},{2}]\n"
      "  return %y\n}}\n",
      channels, height, width, taps, pad);
}

Capabilities cpu_with(int64_t vector_bytes) {
  Capabilities c;
  c.vector_bytes = static_cast<int>(vector_bytes);
  c.cores = 2;
  return c;
}

Capabilities work_items() {
  Capabilities c;
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 1024;
  c.cores = 132;
  c.vector_bytes = 4;
  return c;
}

kir::Schedule with(const kir::Kernel& k, const kir::Schedule& base, const std::string& variant,
                   const Capabilities& caps) {
  const std::optional<kir::Schedule> s = kir::apply_variant(k, base, *kir::Variant::parse(variant), caps);
  EXPECT_TRUE(s.has_value()) << variant;
  return s.value_or(base);
}

/// The schedules `a` and `b` give the only kernel of `text` on this host's cpu (base: its
/// default), after checking that both write the same bytes. Nullopt without vector registers.
std::optional<std::pair<kir::Schedule, kir::Schedule>> same_bytes(const std::string& text, const std::string& a,
                                                                  const std::string& b) {
  Backend& cpu = cpu_backend();
  const kir::Kernel k = test::only_kernel(text);
  const Capabilities& caps = cpu.capabilities();
  const kir::Schedule base = kir::default_schedule(k, caps);
  if (base.vector_width == 1) return std::nullopt;
  const kir::Schedule sa = with(k, base, a, caps), sb = with(k, base, b, caps);
  autotune::KernelBench bench(cpu, k);
  EXPECT_EQ(bench.outputs(*cpu.compile(k, sa), sa), bench.outputs(*cpu.compile(k, sb), sb)) << text;
  return std::pair{sa, sb};
}

TEST(NarrowRows, ASevenBySevenPlaneWalksAsOneRowOfFourVectors) {
  const kir::Kernel k = test::only_kernel(depthwise(576, 7, 7, 5));
  ASSERT_EQ(k.domain_str(), "[576, 7, reduce 5, reduce 5, 7]");  // a batch of one is no dim
  const kir::Schedule s = kir::default_schedule(k, cpu_with(64));
  EXPECT_EQ(s.cpu.merge_rows, 1);
  EXPECT_EQ(s.tile, 49);
  EXPECT_EQ(s.vector_width, 16);
  EXPECT_EQ(s.iterations, 576);
  EXPECT_EQ(s.elements_per_iteration, 49 * 25);
  // Both are in the cache key.
  EXPECT_NE(s.str().find("tile = 49, "), std::string::npos) << s.str();
  EXPECT_NE(s.str().find("cpu {merge_rows = 1,"), std::string::npos) << s.str();
  // With 8 lanes the plane would be 7 vectors, whose positions spill: rows of one vector,
  // its last lane masked off.
  const kir::Schedule avx2 = kir::default_schedule(k, cpu_with(32));
  EXPECT_EQ(avx2.cpu.merge_rows, 0);
  EXPECT_EQ(avx2.vector_width, 8);
  EXPECT_EQ(avx2.cpu.masked_tail, 1);
  // A work-item per point either way.
  EXPECT_EQ(kir::default_schedule(k, work_items()).cpu.merge_rows, 0);
  // Planes past four vectors keep their rows.
  EXPECT_EQ(kir::default_schedule(test::only_kernel(depthwise(64, 10, 10, 3)), cpu_with(64)).cpu.merge_rows, 0);
}

TEST(NarrowRows, AMergedPlanesWindowRowsAreUnrolled) {
  // A merged plane's step is the whole plane: with the window's rows unrolled, every lane's
  // position and bound is a constant (lit: codegen/cpu_merge_rows.kir).
  const Capabilities avx512 = cpu_with(64);
  const kir::Kernel plane = test::only_kernel(depthwise(576, 7, 7, 5));
  EXPECT_EQ(kir::window_rows(plane), 5);
  const kir::Schedule s = kir::default_schedule(plane, avx512);
  ASSERT_EQ(s.cpu.merge_rows, 1);
  EXPECT_EQ(s.cpu.unroll_window, 1);
  EXPECT_NE(s.str().find("unroll_window = 1,"), std::string::npos) << s.str();  // in the cache key
  // Rows walked one by one keep their loops: a row's own index stays a variable.
  const kir::Kernel rows = test::only_kernel(depthwise(240, 14, 14, 5));
  EXPECT_EQ(kir::default_schedule(rows, avx512).cpu.unroll_window, 0);
  EXPECT_EQ(kir::default_schedule(plane, cpu_with(32)).cpu.unroll_window, 0);  // 8 lanes: not merged
  // A knob where the window has 2 to kMaxUnrolledWindowRows rows; a 9x9 window has too many.
  auto has_knob = [&](const kir::Kernel& k) {
    const kir::Schedule base = kir::default_schedule(k, avx512);
    for (const kir::Knob& knob : kir::schedule_knobs(k, base, avx512))
      if (knob.name == "unroll_window") return knob.values == std::vector<int64_t>{0, 1};
    return false;
  };
  EXPECT_TRUE(has_knob(plane));
  EXPECT_TRUE(has_knob(rows));
  const kir::Kernel nine = test::only_kernel(depthwise(16, 7, 7, 9));
  EXPECT_EQ(kir::window_rows(nine), 9);
  EXPECT_FALSE(has_knob(nine));
  EXPECT_EQ(kir::default_schedule(nine, avx512).cpu.unroll_window, 0);
  // One reduced dim (the reduced axes of a sum fold into one): no window rows.
  const kir::Kernel sum = test::only_kernel(
      "graph @s(%x: f32[64,7,7]) -> f32[7] {\n  %s = reduce_sum %x {axes = [0, 1]} : f32[7]\n  return %s\n}");
  EXPECT_EQ(kir::window_rows(sum), 1);
  EXPECT_FALSE(has_knob(sum));
}

TEST(NarrowRows, WindowRowsInsideTheInputWalkWithTheirBoundsKnown) {
  // A window's row bounds (0 <= h + kh - 2 < 14) hold or fail for a whole iteration: an
  // iteration whose window rows all lie inside the input walks with them known.
  const Capabilities avx512 = cpu_with(64);
  const kir::Kernel rows = test::only_kernel(depthwise(240, 14, 14, 5));
  const auto bounds = kir::window_row_bounds(rows, kir::affine_analysis(rows), rows.domain.rank() - 1);
  EXPECT_EQ(bounds.size(), 2u);  // above and below; the columns' bounds are the lanes'
  for (const kir::LaneBound& b : bounds) EXPECT_EQ(b.lane, 0);
  // Each is its least over the window's rows, affine in the kept dims alone: the window lies
  // inside the input for output rows 2 to 11, 10 of the 14.
  ASSERT_EQ(rows.domain_str(), "[240, 14, reduce 5, reduce 5, 14]");
  int inside = 0;
  for (int64_t h = 0; h < 14; ++h) {
    bool all = true;
    for (const kir::LaneBound& b : bounds) {
      EXPECT_EQ(b.rest.stride[2], 0);
      EXPECT_EQ(b.rest.stride[3], 0);
      all = all && b.rest.base + b.rest.stride[1] * h >= 0;
    }
    inside += all;
  }
  EXPECT_EQ(inside, 10);
  const kir::Schedule s = kir::default_schedule(rows, avx512);
  EXPECT_EQ(s.cpu.split_rows, 1);
  EXPECT_NE(s.str().find("split_rows = 1,"), std::string::npos) << s.str();  // in the cache key
  bool knob = false;
  for (const kir::Knob& k : kir::schedule_knobs(rows, s, avx512))
    if (k.name == "split_rows") knob = k.values == std::vector<int64_t>{0, 1};
  EXPECT_TRUE(knob);
  // A merged plane walks its rows in its lanes; an elementwise kernel has no window.
  const kir::Kernel plane = test::only_kernel(depthwise(576, 7, 7, 5));
  ASSERT_EQ(kir::default_schedule(plane, avx512).cpu.merge_rows, 1);
  EXPECT_EQ(kir::default_schedule(plane, avx512).cpu.split_rows, 0);
  const kir::Kernel add = test::only_kernel(
      "graph @add(%x: f32[64,14], %y: f32[64,14]) -> f32[64,14] {\n  %z = add %x, %y : f32[64,14]\n  return %z\n}");
  EXPECT_EQ(kir::default_schedule(add, avx512).cpu.split_rows, 0);
}

TEST(NarrowRows, SplitAndUnsplitWindowRowsWriteTheSameBytes) {
  // Rows of 14 (5x5 and 3x3), strided, dilated and one-sided windows, a plane taller than
  // its window and one shorter (every row at an edge), each with and without the split.
  auto conv = [](int64_t c, int64_t h, int64_t w, int64_t taps, int64_t stride, int64_t dilation, int64_t low,
                 int64_t high) {
    const int64_t oh = (h + low + high - dilation * (taps - 1) - 1) / stride + 1;
    const int64_t ow = (w + low + high - dilation * (taps - 1) - 1) / stride + 1;
    return fmt::format(
        "graph @dw(%x: f32[1,{0},{1},{2}], %w: f32[{0},1,{3},{3}]) -> f32[1,{0},{7},{8}] {{\n"
        "  %y = conv %x, %w {{strides = [{4}, {4}], dilations = [{5}, {5}], low = [{6}, {6}], high = [{9}, {9}], "
        "groups = {0}}} : f32[1,{0},{7},{8}]\n  return %y\n}}\n",
        c, h, w, taps, stride, dilation, low, oh, ow, high);
  };
  for (const std::string& text : {depthwise(24, 14, 14, 5), depthwise(16, 28, 28, 3), conv(8, 29, 30, 3, 2, 1, 1, 1),
                                  conv(8, 20, 21, 3, 1, 2, 2, 2), conv(8, 17, 17, 5, 1, 1, 4, 0),
                                  conv(8, 3, 19, 5, 1, 1, 2, 2)}) {
    const auto both = same_bytes(text, "split_rows=0", "split_rows=1");
    if (!both) GTEST_SKIP() << "no vector registers on this host";
    EXPECT_EQ(both->first.cpu.split_rows, 0) << text;
    EXPECT_EQ(both->second.cpu.split_rows, 1) << text;
  }
}

TEST(NarrowRows, UnrolledAndLoopedWindowsWriteTheSameBytes) {
  // Merged planes (7x7, 6x7 and 8x8 with 3x3 and 5x5 windows, a strided one) and rows walked
  // one by one (14x14), each with and without its window's rows unrolled.
  const std::string strided =
      "graph @dw(%x: f32[1,32,13,13], %w: f32[32,1,3,3]) -> f32[1,32,7,7] {\n"
      "  %y = conv %x, %w {strides = [2, 2], dilations = [1, 1], low = [1, 1], high = [1, 1], groups = 32} : "
      "f32[1,32,7,7]\n  return %y\n}";
  for (const std::string& text : {depthwise(40, 7, 7, 5), depthwise(16, 6, 7, 3), depthwise(24, 8, 8, 3),
                                  depthwise(24, 14, 14, 5), depthwise(8, 7, 7, 7), strided}) {
    const auto both = same_bytes(text, "unroll_window=0", "unroll_window=1");
    if (!both) GTEST_SKIP() << "no vector registers on this host";
    EXPECT_EQ(both->first.cpu.unroll_window, 0) << text;
    EXPECT_EQ(both->second.cpu.unroll_window, 1) << text;
  }
}

TEST(NarrowRows, AStrideTwoWindowKeepsItsRows) {
  // 14x14 to 7x7 through 5x5 windows, stride 2: merged, the plane's positions would be
  // read at 28 * (p floordiv 7) + 2 * (p mod 7), a gather (127 us against 60 on AVX-512).
  const kir::Kernel k = test::only_kernel(
      "graph @dw(%x: f32[1,288,14,14], %w: f32[288,1,5,5]) -> f32[1,288,7,7] {\n"
      "  %y = conv %x, %w {strides = [2, 2], dilations = [1, 1], low = [2, 2], high = [2, 2], groups = 288} : "
      "f32[1,288,7,7]\n  return %y\n}\n");
  ASSERT_EQ(k.domain_str(), "[288, 7, reduce 5, reduce 5, 7]");
  EXPECT_FALSE(kir::merge_keeps_positions_affine(k, /*compares=*/false));
  EXPECT_EQ(kir::default_schedule(k, cpu_with(64)).cpu.merge_rows, 0);
  // Stride 1: the reads stay contiguous; only the window's bounds become mod arithmetic.
  const kir::Kernel one = test::only_kernel(depthwise(576, 7, 7, 5));
  EXPECT_TRUE(kir::merge_keeps_positions_affine(one, /*compares=*/false));
  EXPECT_FALSE(kir::merge_keeps_positions_affine(one));
}

TEST(NarrowRows, MergedKernelWalksTheSamePointsOverOneDimLess) {
  const kir::Kernel k = test::only_kernel(depthwise(8, 6, 7, 3));
  ASSERT_EQ(kir::merged_row_dim(k), 1);
  const kir::Kernel m = kir::merge_rows(k);
  EXPECT_EQ(m.domain_str(), "[8, reduce 3, reduce 3, 42]");
  // The rows follow each other in the output and in the input: (p floordiv 7) * 7 + p mod 7
  // cancels, and every access steps by one element along the merged dim.
  const std::vector<std::optional<kir::Affine>> affine = kir::affine_analysis(m);
  for (const kir::Store& st : m.stores) {
    ASSERT_TRUE(affine[static_cast<size_t>(st.offset)].has_value());
    EXPECT_EQ(affine[static_cast<size_t>(st.offset)]->stride.back(), 1);
  }
  for (size_t i = 0; i < m.insts.size(); ++i)
    if (m.insts[i].code == kir::Code::Load && m.buffers[static_cast<size_t>(m.insts[i].buffer)].type.shape.rank() == 4 &&
        m.buffers[static_cast<size_t>(m.insts[i].buffer)].type.shape[1] == 8 &&
        m.buffers[static_cast<size_t>(m.insts[i].buffer)].type.shape[2] == 6) {
      const auto& a = affine[static_cast<size_t>(m.insts[i].args[0])];
      ASSERT_TRUE(a.has_value()) << m.str();
      EXPECT_EQ(a->stride.back(), 1) << kir::affine_str(*a);
    }
  // A reduction along the last dim has no kept row to merge into it.
  const kir::Kernel rows = test::only_kernel(
      "graph @rows(%x: f32[8,7]) -> f32[8] {\n  %s = reduce_sum %x {axes = [1]} : f32[8]\n  return %s\n}");
  EXPECT_EQ(kir::merged_row_dim(rows), -1);
  EXPECT_THROW(kir::merge_rows(rows), Error);
}

TEST(NarrowRows, MergedAndUnmergedWalksWriteTheSameBytes) {
  const std::string scale =
      "graph @se(%x: f32[1,40,7,7], %s: f32[1,40,1,1]) -> f32[1,40,7,7] {\n"
      "  %g = sigmoid %s : f32[1,40,1,1]\n  %y = mul %x, %g : f32[1,40,7,7]\n  return %y\n}";
  for (const std::string& text : {depthwise(40, 7, 7, 5), depthwise(16, 6, 7, 3), depthwise(24, 8, 8, 3), scale}) {
    const auto both = same_bytes(text, "merge_rows=0", "merge_rows=1");
    if (!both) GTEST_SKIP() << "no vector registers on this host";
    const auto& [rows, plane] = *both;
    ASSERT_EQ(rows.cpu.merge_rows, 0);
    ASSERT_EQ(plane.cpu.merge_rows, 1);
    const kir::Kernel k = test::only_kernel(text);
    EXPECT_EQ(rows.tile, k.domain[k.domain.rank() - 1]);
    const int into = kir::merged_row_dim(k);
    EXPECT_EQ(plane.tile, k.domain[into] * k.domain[k.domain.rank() - 1]);
    EXPECT_EQ(rows.iterations, plane.iterations * k.domain[into]);
  }
}

TEST(NarrowRows, MaskedAndLaneByLaneTailsWriteTheSameBytes) {
  const std::string columns =
      "graph @cols(%x: f32[9,40]) -> f32[40] {\n  %s = reduce_sum %x {axes = [0]} : f32[40]\n  return %s\n}";
  const std::string rows_of_3 =
      "graph @m(%x: i32[5,6,3]) -> i32[5,3] {\n  %s = reduce_max %x {axes = [1]} : i32[5,3]\n  return %s\n}";
  for (const std::string& text : {depthwise(40, 14, 14, 5), depthwise(24, 7, 7, 3), depthwise(8, 9, 11, 3), columns, rows_of_3}) {
    const auto both = same_bytes(text, "masked_tail=1", "masked_tail=0");
    if (!both) GTEST_SKIP() << "no vector registers on this host";
    EXPECT_EQ(both->first.cpu.masked_tail, 1);
    EXPECT_EQ(both->second.cpu.masked_tail, 0);
  }
}

TEST(NarrowRows, ARowThatLeavesLanesEndsInOneMaskedVectorStep) {
  const Capabilities avx512 = cpu_with(64);
  // Rows of 14, 28 and 56 in 16 lanes: 1, 2 and 4 vector steps, the last one masked; 112 is
  // 7 whole vectors.
  for (const int64_t width : {14, 28, 56}) {
    const kir::Schedule s = kir::default_schedule(test::only_kernel(depthwise(72, width, width, 3)), avx512);
    EXPECT_EQ(s.vector_width, 16) << width;
    EXPECT_EQ(s.cpu.masked_tail, 1) << width;
  }
  const kir::Schedule whole = kir::default_schedule(test::only_kernel(depthwise(32, 112, 112, 3)), avx512);
  EXPECT_EQ(whole.vector_width, 16);
  EXPECT_EQ(whole.cpu.masked_tail, 0);
  // A column sum over 40 lanes: two whole vectors and 8 lanes masked.
  const kir::Kernel columns = test::only_kernel(
      "graph @cols(%x: f32[9,40]) -> f32[40] {\n  %s = reduce_sum %x {axes = [0]} : f32[40]\n  return %s\n}");
  EXPECT_EQ(kir::default_schedule(columns, avx512).cpu.masked_tail, 1);
  // Elementwise tiles have no chain to wait on (vector_unroll gives them several steps).
  const kir::Kernel add = test::only_kernel(
      "graph @add(%x: f32[64,14], %y: f32[64,14]) -> f32[64,14] {\n  %z = add %x, %y : f32[64,14]\n  return %z\n}");
  EXPECT_EQ(kir::default_schedule(add, avx512).vector_width, 16);
  EXPECT_EQ(kir::default_schedule(add, avx512).cpu.masked_tail, 0);
  // Work-item devices choose their lanes otherwise (default_lanes_test.cpp).
  EXPECT_EQ(kir::default_schedule(test::only_kernel(depthwise(240, 14, 14, 5)), work_items()).vector_width, 1);
}

TEST(NarrowRows, ElementwiseRowsThatLeaveLanesOverWalkAsPlanesWhereTheRowsFollowEachOther) {
  const Capabilities avx512 = cpu_with(64);
  auto schedule = [&](const std::string& body, const std::string& extra) {
    return kir::default_schedule(
        test::only_kernel("graph @g(%x: f32[1,64,7,7]" + extra + ") -> f32[1,64,7,7] {\n" + body + "}"), avx512);
  };
  // A squeeze-and-excitation scale: rows of 7 are 7 steps of one lane each; the plane of 49
  // is 3 vector steps and one lane.
  const kir::Schedule scale =
      schedule("  %g = sigmoid %s : f32[1,64,1,1]\n  %y = mul %x, %g : f32[1,64,7,7]\n  return %y\n", ", %s: f32[1,64,1,1]");
  EXPECT_EQ(scale.cpu.merge_rows, 1);
  EXPECT_EQ(scale.tile, 49);
  EXPECT_EQ(scale.iterations, 64);
  // A row broadcast down the plane would be read at p mod 7: a gather. The rows stay.
  EXPECT_EQ(schedule("  %y = add %x, %r : f32[1,64,7,7]\n  return %y\n", ", %r: f32[1,1,1,7]").cpu.merge_rows, 0);
  // So does a transposed read.
  EXPECT_EQ(schedule("  %t = permute %x {perm = [0, 1, 3, 2]} : f32[1,64,7,7]\n  %y = add %x, %t : f32[1,64,7,7]\n"
                     "  return %y\n",
                     "")
                .cpu.merge_rows,
            0);
  // Rows that are whole vectors walk as they are.
  const kir::Kernel wide = test::only_kernel(
      "graph @g(%x: f32[8,32,64]) -> f32[8,32,64] {\n  %y = relu %x : f32[8,32,64]\n  return %y\n}");
  EXPECT_EQ(kir::default_schedule(wide, avx512).cpu.merge_rows, 0);
}

TEST(NarrowRows, TheAutotunerMayUndoEitherChoice) {
  const Capabilities avx512 = cpu_with(64);
  const kir::Kernel k = test::only_kernel(depthwise(240, 14, 14, 5));
  const kir::Schedule base = kir::default_schedule(k, avx512);
  ASSERT_EQ(base.vector_width, 16);
  ASSERT_EQ(base.cpu.masked_tail, 1);
  bool merge = false, masked = false, four = false;
  for (const kir::Knob& knob : kir::schedule_knobs(k, base, avx512)) {
    if (knob.name == "merge_rows") merge = knob.values == std::vector<int64_t>{0, 1};
    if (knob.name == "masked_tail") masked = knob.values == std::vector<int64_t>{0, 1};
    if (knob.name == "vector_width") four = std::find(knob.values.begin(), knob.values.end(), 4) != knob.values.end();
  }
  EXPECT_TRUE(merge);
  EXPECT_TRUE(masked);
  EXPECT_TRUE(four);  // narrower vectors than the registers'
  EXPECT_EQ(with(k, base, "masked_tail=0", avx512).cpu.masked_tail, 0);
  const kir::Schedule merged = with(k, base, "merge_rows=1", avx512);
  EXPECT_EQ(merged.tile, 196);
  EXPECT_EQ(merged.iterations, 240);
}

}  // namespace
}  // namespace kiln
