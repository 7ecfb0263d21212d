// How default_gemm_schedule blocks a product on a CPU for the cache it is told of
// (Capabilities::l2_bytes): a short, wide product whose A fits a core's L2 is one block of
// rows with the columns split among the cores, so that a B packed once is read once; and
// which form a convolution's product takes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "kiln/codegen/schedule.h"
#include "kiln/ir/conv.h"

namespace kiln {
namespace {

Capabilities avx512_cpu(int64_t l2_bytes) {
  Capabilities caps;
  caps.family = DeviceFamily::Cpu;
  caps.vector_bytes = 64;
  caps.cores = 2;
  caps.l2_bytes = l2_bytes;
  return caps;
}

int64_t row_blocks(const kir::GemmSchedule& s, int64_t m) { return (m + s.mc - 1) / s.mc; }

TEST(GemmBlocking, ATransformersActivationsStayInAOneMiBL2) {
  // ViT-B/16's MLP product: 197 tokens x 768 by 768 x 3072 (A: 197 x 768 floats, 600 KiB).
  const kir::GemmSchedule big = kir::default_gemm_schedule(DType::F32, 197, 3072, 768, avx512_cpu(1 << 20));
  EXPECT_EQ(row_blocks(big, 197), 1) << big.str();
  EXPECT_EQ(big.kc, 768) << big.str();
  EXPECT_LT(big.nc, 3072) << "the columns are the cores' tasks: " << big.str();
  // Not known, or half that L2: A's block is 512 KiB, two panels of 384 steps.
  for (int64_t l2 : {0, 512 << 10}) {
    const kir::GemmSchedule small = kir::default_gemm_schedule(DType::F32, 197, 3072, 768, avx512_cpu(l2));
    EXPECT_EQ(row_blocks(small, 197), 1) << "L2 " << l2 << ": " << small.str();
    EXPECT_EQ(small.kc, 384) << "L2 " << l2 << ": " << small.str();
  }
}

TEST(GemmBlocking, TheDepthIsCutInEqualPanelsToKeepAInL2) {
  // The MLP's second product: depth 3072; panels of 1024 would take 800 KiB of A.
  const kir::GemmSchedule s = kir::default_gemm_schedule(DType::F32, 197, 768, 3072, avx512_cpu(1 << 20));
  EXPECT_EQ(row_blocks(s, 197), 1) << s.str();
  EXPECT_EQ(s.kc, 768) << s.str();
  EXPECT_LE(200 * s.kc * 4, (1 << 20) * 3 / 4) << s.str();
  // Never below 256 steps: a taller A keeps its blocks of rows.
  const kir::GemmSchedule tall = kir::default_gemm_schedule(DType::F32, 1024, 768, 3072, avx512_cpu(1 << 20));
  EXPECT_GT(row_blocks(tall, 1024), 1) << tall.str();
  EXPECT_GE(tall.kc, 256) << tall.str();
}

TEST(GemmBlocking, EmptyProductsAreBlockedWithoutDividingByZero) {
  // A product of no rows sized A's block by dividing by its padded rows (the random-graph
  // test's empty matmuls; UBSan: division by zero).
  for (int64_t l2 : {0, 1 << 20}) {
    const kir::GemmSchedule s = kir::default_gemm_schedule(DType::F32, 0, 3072, 768, avx512_cpu(l2));
    EXPECT_GE(s.kc, 1) << s.str();
    EXPECT_GE(s.mc, s.mr) << s.str();
  }
}

ConvGeometry conv3x3(int64_t channels, int64_t width) {
  ConvGeometry c;
  c.dims = 2;
  c.batch = 4;
  c.channels = c.out_channels = channels;
  c.in = {width, width};
  c.out = {width, width};
  c.kernel = {3, 3};
  c.strides = {1, 1};
  c.dilations = {1, 1};
  c.low = {1, 1};
  return c;
}

Capabilities avx2_cpu() {
  Capabilities caps = avx512_cpu(1 << 20);
  caps.vector_bytes = 32;
  return caps;
}

// Where output channels do not fill the lanes (12 of 16), the positions are: a line is read
// in place where it fills its tiles of positions.
TEST(GemmBlocking, ConvolutionWindowsOfFourteenAreReadInPlaceOnlyInSixteenLaneTiles) {
  ConvGeometry c = conv3x3(12, 14);
  const int64_t m = 12, n = 196, k = 108;
  const kir::GemmSchedule wide = kir::default_gemm_schedule(DType::F32, m, n, k, avx512_cpu(1 << 20), 0, &c);
  EXPECT_EQ(wide.windows_in_place, 1);
  EXPECT_EQ(wide.channel_lanes, 0);
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, m, n, k, avx2_cpu(), 0, &c).windows_in_place, 0);
  c.out = {7, 7};  // 7 of 16 lanes: gathered
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, m, 49, k, avx512_cpu(1 << 20), 0, &c).windows_in_place, 0);
}

// Output channels that fill the vector lanes go there, whatever the lines' width: tiles of
// as many positions as the registers hold (a vector at most), evened out over a line (56 =
// 4 x 14, 7 = 7; on AVX2, 14 = 3 x 5 beside 16 registers, 28 = 4 x 7 in 8 lanes), all
// positions per task and the channels split among the cores, or the lines where the
// channels are fewer panels than cores.
TEST(GemmBlocking, OutputChannelsThatFillTheLanesAreTheLanes) {
  struct Case {
    Capabilities caps;
    int64_t channels, width;
    int mr, nr;
  };
  for (const Case& t : {Case{avx512_cpu(1 << 20), 64, 56, 14, 32}, Case{avx512_cpu(1 << 20), 512, 7, 7, 32},
                        Case{avx512_cpu(1 << 20), 256, 14, 14, 32}, Case{avx512_cpu(1 << 20), 16, 56, 14, 16},
                        Case{avx2_cpu(), 256, 14, 5, 16}, Case{avx2_cpu(), 24, 28, 7, 8}}) {
    const ConvGeometry c = conv3x3(t.channels, t.width);
    const int64_t m = t.channels, n = t.width * t.width, k = 9 * t.channels;
    const kir::GemmSchedule s = kir::default_gemm_schedule(DType::F32, m, n, k, t.caps, 0, &c);
    SCOPED_TRACE(fmt::format("{} channels over {}x{}, {}-byte vectors: {}", m, t.width, t.width, t.caps.vector_bytes,
                             s.str()));
    EXPECT_EQ(s.channel_lanes, 1);
    EXPECT_EQ(s.windows_in_place, 1);
    EXPECT_EQ(s.mr, t.mr);
    EXPECT_EQ(s.nr, t.nr);
    EXPECT_LE(s.kc, 1024);
    const int64_t depth_panels = (k + s.kc - 1) / s.kc;
    EXPECT_LT(depth_panels * s.kc - k, depth_panels) << "equal panels of the depth";
    const int64_t channel_blocks = (m + s.nc - 1) / s.nc, position_blocks = (n + s.mc - 1) / s.mc;
    if ((m + s.nr - 1) / s.nr >= 2) {
      EXPECT_EQ(position_blocks, 1);
      EXPECT_EQ(channel_blocks % 2, 0);
    } else {
      EXPECT_EQ(position_blocks, 2);
      EXPECT_EQ(s.mc % t.width, 0) << "whole lines";
    }
  }
  // Nor where asked not to, nor for a strided 1x1 window.
  const ConvGeometry c = conv3x3(64, 56);
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, 64, 3136, 576, avx512_cpu(1 << 20), 0, &c, false).channel_lanes, 0);
  ConvGeometry downsample = conv3x3(64, 56);
  downsample.kernel = {1, 1};
  downsample.strides = {2, 2};
  downsample.low = {0, 0};
  downsample.out = {28, 28};
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, 128, 784, 64, avx512_cpu(1 << 20), 0, &downsample).channel_lanes, 0);
}

// A shallow product writes more of C than it reads of B: its tasks' blocks of C stay in
// half the L2 (512 KiB), where its epilogue reads them back, in a multiple of the cores.
TEST(GemmBlocking, AShallowProductsBlocksOfCStayInL2) {
  const kir::GemmSchedule s = kir::default_gemm_schedule(DType::F32, 96, 12544, 16, avx512_cpu(1 << 20));
  EXPECT_EQ(s.mc, 96) << s.str();
  EXPECT_LE(s.mc * s.nc * 4, 512 << 10) << s.str();
  EXPECT_EQ((12544 + s.nc - 1) / s.nc % 2, 0) << s.str();
}

// A plain product runs transposed where its columns leave lanes of the default tiles idle
// and its rows fill them: a 1x1 convolution over 14x14 or 7x7, not over 56x56, nor a
// transformer's 768 features, nor 12 rows, nor a depth too short to pay the transposed store.
TEST(GemmBlocking, PlainProductsWhoseColumnsFitTheLanesBadlyPutTheirRowsThere) {
  const Capabilities avx512 = avx512_cpu(1 << 20);
  EXPECT_TRUE(kir::rows_in_lanes_pay(DType::F32, 1024, 196, 256, avx512));
  EXPECT_TRUE(kir::rows_in_lanes_pay(DType::F32, 2048, 49, 512, avx512));
  EXPECT_FALSE(kir::rows_in_lanes_pay(DType::F32, 256, 3136, 64, avx512));
  EXPECT_FALSE(kir::rows_in_lanes_pay(DType::F32, 128, 768, 768, avx512));
  EXPECT_FALSE(kir::rows_in_lanes_pay(DType::F32, 12, 196, 256, avx512));
  EXPECT_FALSE(kir::rows_in_lanes_pay(DType::F32, 1024, 196, 32, avx512));
  Capabilities gpu = avx512;
  gpu.family = DeviceFamily::WorkItems;
  EXPECT_FALSE(kir::rows_in_lanes_pay(DType::F32, 1024, 196, 256, gpu));
  const kir::GemmSchedule s = kir::default_gemm_schedule(DType::F32, 1024, 196, 256, avx512, 0, nullptr, true);
  EXPECT_EQ(s.channel_lanes, 1);
  EXPECT_EQ(s.windows_in_place, 0);
  EXPECT_EQ(s.mr, 14) << "196 positions as 14 tiles of 14";
  EXPECT_EQ(s.mc, 196) << "all positions per task";
  EXPECT_EQ((1024 + s.nc - 1) / s.nc, 2) << "the channels split among the cores";
}

}  // namespace
}  // namespace kiln
