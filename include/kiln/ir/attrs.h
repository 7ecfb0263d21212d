// kiln/ir/attrs.h - scalars and operation attributes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln {

struct CustomKernel;  // kiln/ir/custom_kernel.h

/// A number that keeps whether it was written as an integer or a float, so that an i64
/// constant keeps all 64 bits and a float keeps its exact double value.
class Scalar {
 public:
  Scalar() = default;
  static Scalar from_int(int64_t v) { return Scalar(v); }
  static Scalar from_float(double v) { return Scalar(v); }

  bool is_int() const { return is_int_; }
  int64_t as_int() const { return is_int_ ? i_ : static_cast<int64_t>(f_); }
  double as_double() const { return is_int_ ? static_cast<double>(i_) : f_; }

  /// This value as stored in an element of `t`: rounded to float for f32, 0/1 for bool,
  /// wrapped to 32 bits for i32. Floats keep their kind, integers theirs.
  Scalar cast_to(DType t) const;

  friend bool operator==(const Scalar& a, const Scalar& b);

 private:
  explicit Scalar(int64_t v) : is_int_(true), i_(v) {}
  explicit Scalar(double v) : is_int_(false), f_(v) {}
  bool is_int_ = true;
  int64_t i_ = 0;
  double f_ = 0;
};

/// `s` as written in IR text for an element of type `t`: shortest round-trip decimal for
/// floats (always with a '.' or exponent; `inf`, `-inf`, `nan`), `true`/`false` for bool.
std::string format_scalar(const Scalar& s, DType t);

/// How an attribute's value is written and stored.
enum class AttrKind : uint8_t {
  Flag,     // `keepdim`: present or absent
  Int,      // `axis = 1`
  Ints,     // `axes = [0, 1]`
  Dims,     // `stop = [n, 768]`: like Ints, each entry a number or a symbolic dim (dim.h)
  Scalar,   // `value = 1.5`, typed by the op's result dtype
  Scalars,  // `data = [1.0, 2.0]`, typed by the op's result dtype
  Custom,   // the kernel of `custom @name(...)`, written as part of the op (never in braces)
};

/// One entry of an op's attribute schema.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
};

/// The value of one attribute; which members are meaningful depends on its kind.
struct AttrValue {
  bool present = false;
  int64_t i = 0;
  std::vector<int64_t> ints;
  Scalar scalar;
  std::shared_ptr<const std::vector<Scalar>> scalars;  // shared: literals can be large
  std::shared_ptr<const CustomKernel> custom;           // equal when their digests are

  friend bool operator==(const AttrValue& a, const AttrValue& b);
};

/// The attributes of one node, positionally matching its op's schema.
class Attrs {
 public:
  Attrs() = default;
  explicit Attrs(std::span<const AttrSpec> schema) : values_(schema.size()) {}

  size_t size() const { return values_.size(); }
  AttrValue& operator[](size_t i) { return values_[i]; }
  const AttrValue& operator[](size_t i) const { return values_[i]; }
  friend bool operator==(const Attrs& a, const Attrs& b) { return a.values_ == b.values_; }

 private:
  std::vector<AttrValue> values_;
};

}  // namespace kiln
