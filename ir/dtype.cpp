// ir/dtype.cpp - element type names, sizes, compute types and NumPy promotion.
#include "kiln/ir/dtype.h"

#include <algorithm>
#include <limits>

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
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
    case DType::Bool:
    case DType::I8:
    case DType::U8: return 1;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32: return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64: return 8;
  }
  return 0;
}

DType compute_dtype(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return DType::F32;
    case DType::I8:
    case DType::I16:
    case DType::U8:
    case DType::U16: return DType::I32;
    case DType::U32:
    case DType::U64: return DType::I64;
    default: return t;
  }
}

int64_t int_min(DType t) {
  switch (t) {
    case DType::I8: return std::numeric_limits<int8_t>::min();
    case DType::I16: return std::numeric_limits<int16_t>::min();
    case DType::I32: return std::numeric_limits<int32_t>::min();
    case DType::I64: return std::numeric_limits<int64_t>::min();
    default: return 0;
  }
}

int64_t int_max(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::I8: return std::numeric_limits<int8_t>::max();
    case DType::I16: return std::numeric_limits<int16_t>::max();
    case DType::I32: return std::numeric_limits<int32_t>::max();
    case DType::U8: return std::numeric_limits<uint8_t>::max();
    case DType::U16: return std::numeric_limits<uint16_t>::max();
    case DType::U32: return std::numeric_limits<uint32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

namespace {

// Bits of magnitude an integer type holds (a float holds it exactly with that many
// significand bits), and a float's significand bits.
int magnitude_bits(DType t) {
  switch (t) {
    case DType::I8: return 7;
    case DType::U8: return 8;
    case DType::I16: return 15;
    case DType::U16: return 16;
    case DType::I32: return 31;
    case DType::U32: return 32;
    case DType::I64: return 63;
    default: return 64;  // u64
  }
}

int significand_bits(DType t) {
  switch (t) {
    case DType::BF16: return 8;
    case DType::F16: return 11;
    case DType::F32: return 24;
    default: return 53;
  }
}

DType wider_signed(int bytes) {
  return bytes <= 1 ? DType::I8 : bytes <= 2 ? DType::I16 : bytes <= 4 ? DType::I32 : DType::I64;
}

DType promote_floats(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::F64 || b == DType::F64) return DType::F64;
  return DType::F32;  // f16 with bf16, or either with f32
}

}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  if (is_float(a) && is_float(b)) return promote_floats(a, b);
  if (is_integer(a) && is_integer(b)) {
    const size_t sa = dtype_size(a), sb = dtype_size(b);
    if (is_unsigned(a) == is_unsigned(b)) return sa >= sb ? a : b;
    const DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
    if (u == DType::U64) return DType::F64;  // no integer type holds both
    return wider_signed(static_cast<int>(std::max(dtype_size(s), 2 * dtype_size(u))));
  }
  // One integer, one float: the float, widened until it holds every integer value.
  const DType i = is_integer(a) ? a : b, f = is_integer(a) ? b : a;
  for (DType c : {f, DType::F32, DType::F64})
    if (promote_floats(f, c) == c && significand_bits(c) >= magnitude_bits(i)) return c;
  return DType::F64;
}

}  // namespace kiln
