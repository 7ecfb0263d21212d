// ir/attrs.cpp - scalars and attribute values.
#include "kiln/ir/attrs.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/scalar_semantics.h"

namespace kiln {

Scalar Scalar::cast_to(DType t) const {
  if (is_float(t)) return from_float(scalar::store_float(t, as_double()));
  if (is_int_) return from_int(scalar::store_int(t, i_));
  return from_int(scalar::float_to_int(t, f_));
}

bool operator==(const Scalar& a, const Scalar& b) {
  if (a.is_int_ != b.is_int_) return false;
  if (a.is_int_) return a.i_ == b.i_;
  return std::memcmp(&a.f_, &b.f_, sizeof(double)) == 0;  // bitwise: NaN == NaN, 0 != -0
}

bool operator==(const AttrValue& a, const AttrValue& b) {
  if (a.present != b.present || a.i != b.i || a.ints != b.ints || !(a.scalar == b.scalar))
    return false;
  if ((a.custom == nullptr) != (b.custom == nullptr) || (a.custom && a.custom->digest != b.custom->digest))
    return false;
  if (a.scalars == b.scalars) return true;
  return a.scalars && b.scalars && *a.scalars == *b.scalars;
}

std::string format_scalar(const Scalar& s, DType t) {
  if (is_bool(t)) return s.as_int() ? "true" : "false";
  if (!is_float(t)) return std::to_string(s.as_int());
  const double v = s.as_double();
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest text that reads back to the same value in the element type.
  std::string out = t == DType::F32 ? fmt::format("{}", static_cast<float>(v)) : fmt::format("{}", v);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace kiln
