// 32-bit positions (kir::index_instructions, kir::index_fits_32): which instructions are
// positions, and the interval proof that decides whether a GPU kernel computes them in 32 bits.
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/c_source.h"
#include "test_util.h"

namespace kiln {
namespace {

// A work-group device, as default_schedule sees one.
Capabilities gpu() {
  Capabilities c;
  c.family = DeviceFamily::WorkItems;
  c.local_memory = true;
  c.max_work_group = 256;
  c.fp64 = true;
  return c;
}

TEST(IndexRange, RowsOfTheWorkloadsFit) {
  const kir::Kernel k = test::only_kernel(
      "graph @rows(%x: f32[4096,4096]) -> f32[4096] {\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[4096]\n"
      "  return %s\n}");
  EXPECT_TRUE(kir::index_fits_32(k)) << k.str();
  EXPECT_EQ(kir::default_schedule(k, gpu()).work_items.index_bits, 32);
  EXPECT_EQ(kir::default_schedule(k, Capabilities{}).work_items.index_bits, 64);  // cpu: LLVM keeps i64
}

TEST(IndexRange, TooManyPointsNeed64Bits) {
  const kir::Kernel k = test::only_kernel(
      "graph @big(%x: f32[65536,40000]) -> f32[65536,40000] {\n"
      "  %y = neg %x : f32[65536,40000]\n"
      "  return %y\n}");
  EXPECT_FALSE(kir::index_fits_32(k));
}

TEST(IndexRange, AnOffsetBeyond32BitsInASmallDomainNeeds64Bits) {
  // Four points, but the last reads element 3e9 of its operand.
  const kir::Kernel k = test::only_kernel(
      "graph @col(%x: f32[4,1000000000]) -> f32[4,1] {\n"
      "  %c = slice %x {start = [0, 0], stop = [4, 1], step = [1, 1]} : f32[4,1]\n"
      "  %y = neg %c : f32[4,1]\n"
      "  return %y\n}");
  EXPECT_FALSE(kir::index_fits_32(k)) << k.str();
}

TEST(IndexRange, AnOffsetFromADimAlsoUsedAsDataIsChecked) {
  // d0 is data too (arange's values), so it stays i64, but the offset d0 * 10^9 made from it
  // reaches 3 * 10^9.
  const kir::Kernel k = test::only_kernel(
      "graph @mixed(%x: f32[4,1000000000]) -> f32[4] {\n"
      "  %a = arange {start = 0, step = 1} : f32[4]\n"
      "  %r = slice %x {start = [0, 0], stop = [4, 1], step = [1, 1]} : f32[4,1]\n"
      "  %c = reshape %r : f32[4]\n"
      "  %y = add %a, %c : f32[4]\n"
      "  return %y\n}");
  EXPECT_FALSE(kir::index_fits_32(k)) << k.str();
}

TEST(IndexRange, APositionUsedAsDataStaysI64) {
  // arange's values are the dim itself, stored as i64 data: not a position, and the OpenCL
  // kernel keeps it `long` while the store's offset is an `int`.
  const kir::Kernel k = test::only_kernel(
      "graph @ar() -> i64[1000] {\n"
      "  %a = arange {start = 0, step = 1} : i64[1000]\n"
      "  return %a\n}");
  const std::vector<bool> index = kir::index_instructions(k);
  ASSERT_EQ(k.stores.size(), 1u);
  EXPECT_FALSE(index[static_cast<size_t>(k.stores[0].value)]) << k.str();
  const kir::Schedule s = kir::default_schedule(k, gpu());
  ASSERT_EQ(s.work_items.index_bits, 32);
  const std::string src = kir::opencl_source(k, s, gpu());
  EXPECT_NE(src.find("const int it = (int)get_global_id(0);"), std::string::npos) << src;
  EXPECT_NE(src.find("const long v"), std::string::npos) << src;
}

}  // namespace
}  // namespace kiln
