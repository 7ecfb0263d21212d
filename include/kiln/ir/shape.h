// kiln/ir/shape.h - static shapes and tensor types.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

#include "kiln/ir/dtype.h"
#include "kiln/support/error.h"

namespace kiln {

/// A shape of rank 0 to kMaxRank, stored inline so that shapes cost no allocation. A dim is a
/// size, or a symbolic dim (kiln/ir/dim.h) in a graph whose sizes are bound later.
class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  /// Product of the dims; 1 for rank 0. A symbolic dim when a dim is one (dim_mul).
  int64_t numel() const;
  /// Whether a dim is symbolic.
  bool symbolic() const;
  void push_back(int64_t d);

  /// Row-major (C order) strides in elements (symbolic where the dims after are).
  std::array<int64_t, kMaxRank> strides() const;

  /// "[4096,1]"; "[]" for a scalar.
  std::string str() const;

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// The element count of `s`, or nullopt when a dim is negative or symbolic or the count
/// overflows int64.
std::optional<int64_t> checked_numel(const Shape& s);

/// NumPy broadcasting: shapes are aligned at the right; each pair of dims must be equal or
/// one of them 1. Returns nullopt when they cannot broadcast (symbolic dims: when a pair is
/// not provably equal and neither is the number 1).
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

/// The type of an SSA value: element type and shape.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  /// "f32[4096,1]".
  std::string str() const;
  /// Bytes of one dense tensor of this type. Throws kiln::Error naming the type when the
  /// count overflows int64 (the verifier and the frontend reject such types first).
  int64_t bytes() const;
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

/// Bytes of a dense tensor of `t`, or nullopt when a dim is negative or the count or the
/// bytes overflow int64: every size check of a type goes through this.
std::optional<int64_t> checked_bytes(const TensorType& t);

/// Whether `s` can be a shape: checked_numel's rule, where a symbolic dim counts as a size
/// whose product with the others has coefficients an int64 holds.
bool valid_shape(const Shape& s);

}  // namespace kiln
