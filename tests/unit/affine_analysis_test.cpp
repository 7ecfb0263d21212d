// kir::affine_analysis: what it calls affine is that function at every point of the domain,
// and the positions lowering writes for a reshape of a stored value (floordiv and mod of a
// flat position, recombined) are found affine.
#include <random>

#include "kiln/codegen/kernel_ir.h"
#include "test_util.h"

namespace kiln {
namespace {

using kir::Code;
using kir::Ref;

struct PositionBuilder {
  kir::Kernel k;

  explicit PositionBuilder(Shape domain) {
    k.name = "positions";
    k.reduced.assign(static_cast<size_t>(domain.rank()), false);
    k.domain = std::move(domain);
  }
  Ref push(kir::Inst in) {
    in.type = DType::I64;
    k.insts.push_back(std::move(in));
    return static_cast<Ref>(k.insts.size() - 1);
  }
  Ref dim(int d) { return push({Code::Dim, OpKind::Add, DType::I64, {}, -1, d, {}}); }
  Ref constant(int64_t c) { return push({Code::Const, OpKind::Add, DType::I64, {}, -1, 0, Scalar::from_int(c)}); }
  Ref op(OpKind o, Ref a, Ref b) { return push({Code::Op, o, DType::I64, {a, b}, -1, 0, {}}); }
  Ref div(Ref a, int64_t m) { return push({Code::IndexDiv, OpKind::Add, DType::I64, {a}, -1, m, {}}); }
  Ref mod(Ref a, int64_t m) { return push({Code::IndexMod, OpKind::Add, DType::I64, {a}, -1, m, {}}); }
};

// Every instruction's value at every point of the domain, points in row-major order.
std::vector<std::vector<int64_t>> values_at_every_point(const kir::Kernel& k) {
  std::vector<std::vector<int64_t>> out;
  const int rank = k.domain.rank();
  std::vector<int64_t> point(static_cast<size_t>(rank), 0);
  for (int64_t flat = 0; flat < k.domain.numel(); ++flat) {
    for (int d = rank - 1, rest = static_cast<int>(flat); d >= 0; --d) {
      point[static_cast<size_t>(d)] = rest % k.domain[d];
      rest /= static_cast<int>(k.domain[d]);
    }
    std::vector<int64_t> v(k.insts.size());
    for (size_t i = 0; i < k.insts.size(); ++i) {
      const kir::Inst& in = k.insts[i];
      auto arg = [&](size_t a) { return v[static_cast<size_t>(in.args[a])]; };
      switch (in.code) {
        case Code::Dim: v[i] = point[static_cast<size_t>(in.imm)]; break;
        case Code::Const: v[i] = in.literal.as_int(); break;
        case Code::IndexDiv: v[i] = arg(0) / in.imm; break;  // args are >= 0 by construction
        case Code::IndexMod: v[i] = arg(0) % in.imm; break;
        default:
          v[i] = in.op == OpKind::Add ? arg(0) + arg(1) : in.op == OpKind::Sub ? arg(0) - arg(1) : arg(0) * arg(1);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

int64_t affine_at(const kir::Affine& a, const kir::Kernel& k, int64_t flat) {
  int64_t v = a.base;
  for (int d = k.domain.rank() - 1; d >= 0; --d) {
    v += a.stride[static_cast<size_t>(d)] * (flat % k.domain[d]);
    flat /= k.domain[d];
  }
  return v;
}

void expect_claims_hold(const kir::Kernel& k, const std::string& what) {
  const auto affine = kir::affine_analysis(k);
  const auto values = values_at_every_point(k);
  for (size_t i = 0; i < k.insts.size(); ++i) {
    if (!affine[i]) continue;
    for (size_t p = 0; p < values.size(); ++p)
      ASSERT_EQ(affine_at(*affine[i], k, static_cast<int64_t>(p)), values[p][i])
          << what << ": %" << i << " claimed " << kir::affine_str(*affine[i]) << ", point " << p << "\n"
          << k.str();
  }
}

// Lowering's read of a stored row-major tensor of shape `stored` through a reshape to the
// domain's shape: the flat position, split into the stored dims and recombined with their
// strides (the outermost index without its mod, as lowering writes it).
Ref reshape_offset(PositionBuilder& b, const Shape& stored) {
  const Shape& domain = b.k.domain;
  Ref flat = b.constant(0);
  for (int d = 0; d < domain.rank(); ++d)
    flat = b.op(OpKind::Add, b.op(OpKind::Mul, flat, b.constant(domain[d])), b.dim(d));
  const auto strides = stored.strides();
  Ref offset = b.constant(0);
  int64_t inner = stored.numel();
  for (int d = 0; d < stored.rank(); ++d) {
    inner /= stored[d];
    Ref index = b.div(flat, inner);
    if (d > 0) index = b.mod(index, stored[d]);
    offset = b.op(OpKind::Add, offset, b.op(OpKind::Mul, index, b.constant(strides[static_cast<size_t>(d)])));
  }
  return offset;
}

TEST(AffineAnalysis, AReshapeOfAStoredTensorIsItsFlatPosition) {
  // The weight gradient's operand: x[4,128,3072] read as [3072,512] (d0 the feature, d1 the
  // row), as the GEMM of a training step reads it.
  PositionBuilder b(Shape{512, 3072});
  const Ref offset = reshape_offset(b, Shape{4, 128, 3072});
  const auto affine = kir::affine_analysis(b.k);
  ASSERT_TRUE(affine[static_cast<size_t>(offset)]) << b.k.str();
  EXPECT_EQ(kir::affine_str(*affine[static_cast<size_t>(offset)]), "3072*d0 + 1*d1");
  expect_claims_hold(b.k, "reshape");
}

TEST(AffineAnalysis, ReshapesBetweenRandomShapesOfOneSize) {
  const std::vector<std::vector<int64_t>> factorizations = {
      {24}, {2, 12}, {12, 2}, {4, 6}, {6, 4}, {2, 3, 4}, {4, 3, 2}, {3, 8}, {1, 24, 1}, {2, 2, 6}};
  for (const auto& from : factorizations)
    for (const auto& to : factorizations) {
      PositionBuilder b{Shape(std::span<const int64_t>(to))};
      const Ref offset = reshape_offset(b, Shape(std::span<const int64_t>(from)));
      const auto affine = kir::affine_analysis(b.k);
      ASSERT_TRUE(affine[static_cast<size_t>(offset)]) << Shape(std::span<const int64_t>(from)).str() << " as " << Shape(std::span<const int64_t>(to)).str() << "\n" << b.k.str();
      expect_claims_hold(b.k, b.k.str());
    }
}

TEST(AffineAnalysis, AReshapeOfATransposeIsNotAffine) {
  // x[6,4] transposed to [4,6], then flattened: reading it walks x by columns, jumping.
  PositionBuilder b(Shape{24});
  const Ref flat = b.dim(0);
  const Ref row = b.div(flat, 6), col = b.mod(flat, 6);  // of the transpose
  const Ref offset = b.op(OpKind::Add, b.op(OpKind::Mul, col, b.constant(4)), row);
  EXPECT_FALSE(kir::affine_analysis(b.k)[static_cast<size_t>(offset)]) << b.k.str();
  expect_claims_hold(b.k, "transpose");
}

// Random positions from dims, constants, sums, differences, products by constants and
// divisions and remainders of non-negative values: every claim holds at every point.
TEST(AffineAnalysis, RandomPositionsClaimOnlyWhatHolds) {
  std::mt19937 rng(11);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int claimed_with_division = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> extents(static_cast<size_t>(1 + pick(3)));
    for (int64_t& e : extents) e = 1 + pick(9);
    PositionBuilder b{Shape(std::span<const int64_t>(extents))};
    std::vector<Ref> pool;
    for (int d = 0; d < b.k.domain.rank(); ++d) pool.push_back(b.dim(d));
    for (int step = 0; step < 12; ++step) {
      const auto values = values_at_every_point(b.k);
      auto non_negative = [&](Ref r) {
        return std::all_of(values.begin(), values.end(), [&](const auto& v) { return v[static_cast<size_t>(r)] >= 0; });
      };
      const Ref x = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
      const Ref y = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
      const int64_t c = 1 + pick(12);
      switch (pick(5)) {
        case 0: pool.push_back(b.op(OpKind::Add, x, y)); break;
        case 1: pool.push_back(b.op(OpKind::Sub, x, y)); break;
        case 2: pool.push_back(b.op(OpKind::Mul, x, b.constant(c))); break;
        case 3:
          if (non_negative(x)) pool.push_back(b.div(x, c));
          break;
        default:
          if (non_negative(x)) pool.push_back(b.mod(x, c));
      }
    }
    expect_claims_hold(b.k, "trial " + std::to_string(trial));
    const auto affine = kir::affine_analysis(b.k);
    for (size_t i = 0; i < b.k.insts.size(); ++i)
      if (affine[i] && (b.k.insts[i].code == Code::IndexDiv || b.k.insts[i].code == Code::IndexMod)) ++claimed_with_division;
  }
  EXPECT_GT(claimed_with_division, 50);  // the ranges decided something
}

}  // namespace
}  // namespace kiln
