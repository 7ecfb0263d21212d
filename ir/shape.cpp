// ir/shape.cpp - shapes, broadcasting and tensor type names.
#include "kiln/ir/shape.h"

#include <algorithm>

#include "kiln/ir/dim.h"
#include "kiln/support/error.h"

namespace kiln {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw Error("rank " + std::to_string(dims.size()) + " exceeds kiln's maximum rank of " +
                std::to_string(kMaxRank));
  std::copy(dims.begin(), dims.end(), dims_.begin());
  rank_ = static_cast<int>(dims.size());
}

bool Shape::symbolic() const {
  return std::any_of(begin(), end(), is_symbolic_dim);
}

int64_t Shape::numel() const {
  int64_t n = 1;
  if (symbolic()) {
    for (int64_t d : dims()) {
      const std::optional<int64_t> p = dim_mul(n, d);
      if (!p) throw Error("shape " + str() + " has more elements than an int64 counts");
      n = *p;
    }
    return n;
  }
  for (int64_t d : dims())
    if (__builtin_mul_overflow(n, d, &n)) {
      if (std::find(begin(), end(), 0) != end()) return 0;
      throw Error("shape " + str() + " has more elements than an int64 counts");
    }
  return n;
}

void Shape::push_back(int64_t d) {
  if (rank_ == kMaxRank)
    throw Error("rank exceeds kiln's maximum rank of " + std::to_string(kMaxRank));
  dims_[static_cast<size_t>(rank_++)] = d;
}

std::array<int64_t, Shape::kMaxRank> Shape::strides() const {
  std::array<int64_t, kMaxRank> s{};
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    s[static_cast<size_t>(i)] = stride;
    const int64_t d = dims_[static_cast<size_t>(i)];
    stride = is_symbolic_dim(d) || is_symbolic_dim(stride) ? dim_mul(stride, d).value_or(0) : stride * d;
  }
  return s;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ',';
    s += dim_str(dims_[static_cast<size_t>(i)]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
}

std::optional<int64_t> checked_numel(const Shape& s) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : s.dims()) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
    else if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return zero ? 0 : n;
}

std::optional<int64_t> checked_bytes(const TensorType& t) {
  const std::optional<int64_t> n = checked_numel(t.shape);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(dtype_size(t.dtype)), &bytes)) return std::nullopt;
  return bytes;
}

bool valid_shape(const Shape& s) {
  if (!s.symbolic()) return checked_numel(s).has_value();
  int64_t n = 1;
  for (int64_t d : s.dims()) {
    if (d < 0 && !is_symbolic_dim(d)) return false;
    const std::optional<int64_t> p = dim_mul(n, d);
    if (!p) return false;
    n = *p;
  }
  return true;
}

int64_t TensorType::bytes() const {
  if (const std::optional<int64_t> b = checked_bytes(*this)) return *b;
  if (shape.symbolic())
    throw Error("type " + str() + " has symbolic dims: its bytes are known once they are bound to sizes");
  throw Error("type " + str() + " has more bytes than an int64 counts");
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  // The common cases first: recording `y * 2` must stay cheap.
  if (b.rank() == 0 || a == b) return a;
  if (a.rank() == 0) return b;
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape.str(); }

}  // namespace kiln
