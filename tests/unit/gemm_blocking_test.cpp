// How default_gemm_schedule blocks a product on a CPU for the cache it is told of
// (Capabilities::l2_bytes): a short, wide product whose A fits a core's L2 is one block of
// rows with the columns split among the cores, so that a B packed once is read once.
#include <gtest/gtest.h>

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

TEST(GemmBlocking, ConvolutionWindowsOfFourteenAreReadInPlaceOnlyInSixteenLaneTiles) {
  ConvGeometry c;
  c.dims = 2;
  c.batch = 4;
  c.channels = c.out_channels = 256;
  c.in = {14, 14};
  c.out = {14, 14};
  c.kernel = {3, 3};
  c.strides = {1, 1};
  c.dilations = {1, 1};
  c.low = {1, 1};
  Capabilities avx2 = avx512_cpu(1 << 20);
  avx2.vector_bytes = 32;
  const int64_t m = 256, n = 196, k = 2304;
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, m, n, k, avx512_cpu(1 << 20), 0, &c).windows_in_place, 1);
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, m, n, k, avx2, 0, &c).windows_in_place, 0);
  c.out = {7, 7};  // 7 of 16 lanes: gathered
  EXPECT_EQ(kir::default_gemm_schedule(DType::F32, m, 49, k, avx512_cpu(1 << 20), 0, &c).windows_in_place, 0);
}

}  // namespace
}  // namespace kiln
