// Element types, promotion and broadcasting.
#include <gtest/gtest.h>

#include "kiln/ir/shape.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(dtype_size(DType::U16), 2u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
}

TEST(DType, PromotionFollowsNumPy) {
  using enum DType;
  struct Case { DType a, b, want; };
  const Case cases[] = {
      {Bool, Bool, Bool}, {Bool, I32, I32}, {Bool, F32, F32}, {I32, I32, I32}, {I32, I64, I64},
      {I32, F32, F64},    {I64, F32, F64},  {I32, F64, F64},  {F32, F32, F32}, {F32, F64, F64},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote(c.a, c.b), c.want) << dtype_name(c.a) << " + " << dtype_name(c.b);
    EXPECT_EQ(promote(c.b, c.a), c.want) << "promotion is symmetric";
  }
}

TEST(Shape, BroadcastCornerCases) {
  EXPECT_EQ(*broadcast_shapes({4, 1}, {3}), (Shape{4, 3}));          // size-1 and rank mismatch
  EXPECT_EQ(*broadcast_shapes({}, {2, 3}), (Shape{2, 3}));           // scalar
  EXPECT_EQ(*broadcast_shapes({0, 3}, {3}), (Shape{0, 3}));          // zero-size
  EXPECT_EQ(*broadcast_shapes({1}, {0}), (Shape{0}));                // 1 meets 0
  EXPECT_EQ(*broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_FALSE(broadcast_shapes({4096, 4096}, {4095, 1}).has_value());
  EXPECT_FALSE(broadcast_shapes({2}, {0}).has_value());
}

TEST(Shape, StridesAndNumel) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.strides()[0], 12);
  EXPECT_EQ(s.strides()[2], 1);
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ((Shape{5, 0}).numel(), 0);
  EXPECT_EQ((TensorType{DType::F32, {4096, 1}}).str(), "f32[4096,1]");
  EXPECT_EQ((TensorType{DType::I64, {}}).str(), "i64[]");
}

TEST(Shape, RankAboveMaximumIsAUserError) {
  const std::vector<int64_t> dims(9, 1);
  EXPECT_THROW(Shape(std::span<const int64_t>(dims)), Error);
}

}  // namespace
}  // namespace kiln
