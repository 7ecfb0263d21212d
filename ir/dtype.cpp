// ir/dtype.cpp - element type names, sizes and NumPy promotion.
#include "kiln/ir/dtype.h"

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 0;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  if (is_integer(a) && is_integer(b)) return DType::I64;
  if (is_float(a) && is_float(b)) return DType::F64;
  // One integer, one float: NumPy picks a float that holds every value of the integer
  // type exactly, which for i32 and i64 is f64.
  return DType::F64;
}

}  // namespace kiln
