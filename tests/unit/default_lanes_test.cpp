// Lanes per work-item by default (default_schedule's `vector_width` on work-item devices),
// as the tuner measured them on PoCL, lavapipe and an H100 (codegen/schedule.cpp).
#include "kiln/codegen/c_source.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/variants.h"
#include "test_util.h"

namespace kiln {
namespace {

// A GPU as its OpenCL driver describes it (an H100's figures), whose language has vector
// loads; `vector_loads` false makes it the same GPU under Vulkan.
Capabilities gpu(bool vector_loads) {
  Capabilities c;
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 1024;
  c.cores = 132;
  c.vector_bytes = 4;
  c.vector_loads = vector_loads;
  return c;
}

// PoCL on an AVX-512 CPU: work-groups as loops on two cores, vectorized across work-items
// where that loop is innermost; with `vector_values`, OpenCL C's float16 (a 64-byte register).
Capabilities pocl_caps(bool vector_values) {
  Capabilities c = gpu(true);
  c.emulated_work_groups = true;
  c.vectorizes_work_item_loop = true;
  c.cores = 2;
  if (vector_values) {
    c.vector_values = true;
    c.vector_bytes = 64;
  }
  return c;
}

int lanes(const std::string& text, const Capabilities& caps) {
  return kir::default_schedule(test::only_kernel(text), caps).vector_width;
}

const std::string kElementwise =
    "graph @ew(%x: f32[4096,4096], %y: f32[4096,4096]) -> f32[4096,4096] {\n"
    "  %t = tanh %x : f32[4096,4096]\n"
    "  %s = add %t, %y : f32[4096,4096]\n"
    "  return %s\n}";
const std::string kRows =
    "graph @rows(%x: f32[4096,4096]) -> f32[4096] {\n"
    "  %s = reduce_sum %x {axes = [1]} : f32[4096]\n"
    "  return %s\n}";
const std::string kColumns =
    "graph @columns(%x: f32[4096,4096]) -> f32[4096] {\n"
    "  %s = reduce_sum %x {axes = [0]} : f32[4096]\n"
    "  return %s\n}";
const std::string kSmall =
    "graph @small(%x: f32[256,512], %y: f32[256,512]) -> f32[256,512] {\n"
    "  %s = add %x, %y : f32[256,512]\n"
    "  return %s\n}";

TEST(DefaultLanes, AGpuWithVectorLoadsTakesFourInLargeElementwiseKernels) {
  EXPECT_EQ(lanes(kElementwise, gpu(true)), 4);
}

TEST(DefaultLanes, AGpuWithoutVectorLoadsKeepsOne) {
  EXPECT_EQ(lanes(kElementwise, gpu(false)), 1);
  EXPECT_EQ(lanes(kRows, gpu(false)), 1);
}

TEST(DefaultLanes, RowsColumnsAndSmallKernelsOnAGpuKeepOne) {
  EXPECT_EQ(lanes(kRows, gpu(true)), 1);
  EXPECT_EQ(lanes(kColumns, gpu(true)), 1);
  EXPECT_EQ(lanes(kSmall, gpu(true)), 1);
}

TEST(DefaultLanes, LanesDivideTheLastDim) {
  EXPECT_EQ(lanes("graph @odd(%x: f32[4096,4099]) -> f32[4096,4099] {\n"
                  "  %t = tanh %x : f32[4096,4099]\n"
                  "  return %t\n}",
                  gpu(true)),
            1);
  EXPECT_EQ(lanes("graph @two(%x: f32[4096,4098]) -> f32[4096,4098] {\n"
                  "  %t = tanh %x : f32[4096,4098]\n"
                  "  return %t\n}",
                  gpu(true)),
            2);
}

TEST(DefaultLanes, EmulatedWorkGroupsTakeFourAlongRowsAndEightOverColumnsOnPocl) {
  const Capabilities pocl = pocl_caps(false);
  EXPECT_EQ(lanes(kRows, pocl), 4);
  EXPECT_EQ(lanes(kColumns, pocl), 8);
  EXPECT_EQ(lanes(kElementwise, pocl), 1);
}

TEST(DefaultLanes, PoclWithVectorValuesTakesANativeRegisterWhereTheLanesAreVectors) {
  const Capabilities pocl = pocl_caps(true);
  EXPECT_EQ(lanes(kRows, pocl), 16);
  EXPECT_EQ(lanes(kColumns, pocl), 16);
  EXPECT_EQ(lanes(kElementwise, pocl), 16);
  // A register holds 8 f64.
  EXPECT_EQ(lanes("graph @wide(%x: f64[512,512]) -> f64[512,512] {\n"
                  "  %t = tanh %x : f64[512,512]\n"
                  "  return %t\n}",
                  pocl),
            8);
  // A transposed read along the lanes has no vector form: scalar lanes, PoCL's old defaults.
  const std::string transposed =
      "graph @t(%x: f32[512,512]) -> f32[512,512] {\n"
      "  %p = permute %x {perm = [1, 0]} : f32[512,512]\n"
      "  %t = tanh %p : f32[512,512]\n"
      "  return %t\n}";
  EXPECT_FALSE(kir::c_lanes_as_vectors(test::only_kernel(transposed), 16));
  EXPECT_EQ(lanes(transposed, pocl), 1);
  // Nor does an integer sum along a row (its accumulators would be vectors of i64).
  const std::string int_rows =
      "graph @ir(%x: i32[64,256]) -> i64[64] {\n"
      "  %s = reduce_sum %x {axes = [1]} : i64[64]\n"
      "  return %s\n}";
  EXPECT_FALSE(kir::c_lanes_as_vectors(test::only_kernel(int_rows), 16));
  EXPECT_EQ(lanes(int_rows, pocl), 4);
}

TEST(DefaultLanes, PoclWalksARowOfVectorLanesWithFourChainsOfAccumulators) {
  const Capabilities pocl = pocl_caps(true);
  auto schedule = [&](const std::string& text, const Capabilities& caps) {
    return kir::default_schedule(test::only_kernel(text), caps);
  };
  const kir::Schedule rows = schedule(kRows, pocl);
  ASSERT_EQ(rows.work_items.reduction, kir::ReductionStrategy::Serial);
  EXPECT_EQ(rows.accumulators, 4);
  // Scalar lanes (an integer row sum) and kept lanes (column sums) keep one chain, and so
  // does a GPU.
  EXPECT_EQ(schedule("graph @ir(%x: i32[4096,256]) -> i64[4096] {\n"
                     "  %s = reduce_sum %x {axes = [1]} : i64[4096]\n"
                     "  return %s\n}",
                     pocl)
                .accumulators,
            1);
  EXPECT_EQ(schedule(kColumns, pocl).accumulators, 1);
  EXPECT_EQ(schedule(kRows, gpu(true)).accumulators, 1);
}

TEST(DefaultLanes, PoclWalksAWorkGroupsRowInBlocksAndOtherDevicesInterleave) {
  const std::string sum_all =
      "graph @all(%x: f32[16,262144]) -> f32[16] {\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[16]\n"
      "  return %s\n}";
  const Capabilities pocl = pocl_caps(false);
  const kir::Schedule blocks = kir::default_schedule(test::only_kernel(sum_all), pocl);
  ASSERT_EQ(blocks.work_items.reduction, kir::ReductionStrategy::WorkGroupTree);
  EXPECT_EQ(blocks.work_items.row_blocks, 1);
  // lavapipe runs work-items side by side in SIMD lanes: they interleave, as on a GPU.
  Capabilities lavapipe = gpu(false);
  lavapipe.emulated_work_groups = true;
  lavapipe.cores = 2;
  EXPECT_EQ(kir::default_schedule(test::only_kernel(sum_all), lavapipe).work_items.row_blocks, 0);
  EXPECT_EQ(kir::default_schedule(test::only_kernel(sum_all), gpu(true)).work_items.row_blocks, 0);
}

TEST(DefaultLanes, TheTunersStrategyKnobTakesThatStrategysOwnRowWalk) {
  const Capabilities pocl = pocl_caps(true);
  auto variant = [&](const kir::Kernel& k, const kir::Schedule& base, const char* text) {
    std::optional<kir::Schedule> s = kir::apply_variant(k, base, *kir::Variant::parse(text), pocl);
    EXPECT_TRUE(s.has_value()) << text;
    return s.value_or(base);
  };
  // A row per work-item by default: a work-group tree takes PoCL's blocks, not the chains.
  const kir::Kernel rows = test::only_kernel(kRows);
  const kir::Schedule serial = kir::default_schedule(rows, pocl);
  ASSERT_EQ(serial.work_items.reduction, kir::ReductionStrategy::Serial);
  const kir::Schedule tree = variant(rows, serial, "reduction=1");
  EXPECT_EQ(tree.work_items.row_blocks, 1);
  EXPECT_EQ(tree.accumulators, 1);
  EXPECT_EQ(variant(rows, serial, "reduction=1 row_blocks=0").work_items.row_blocks, 0);
  // Settings the strategy ignores change nothing: the tuner measures the base once.
  EXPECT_EQ(variant(rows, serial, "row_blocks=1"), serial);
  EXPECT_EQ(variant(rows, tree, "accumulators=4"), tree);
  // Back from a tree to a row per work-item: PoCL's four chains, or the knob's.
  EXPECT_EQ(variant(rows, tree, "reduction=0").accumulators, 4);
  EXPECT_EQ(variant(rows, tree, "accumulators=2 reduction=0").accumulators, 2);
  // Chains that do not divide the row are halved until they do, as the emitter takes them.
  const kir::Kernel short_rows = test::only_kernel(
      "graph @short(%x: f32[4096,80]) -> f32[4096] {\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[4096]\n"
      "  return %s\n}");
  const kir::Schedule short_serial = kir::default_schedule(short_rows, pocl);
  ASSERT_EQ(short_serial.vector_width, 16);
  EXPECT_EQ(short_serial.accumulators, 1);
  EXPECT_EQ(variant(short_rows, short_serial, "accumulators=4"), short_serial);
}

}  // namespace
}  // namespace kiln
