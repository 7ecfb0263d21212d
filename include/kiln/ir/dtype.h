// kiln/ir/dtype.h - element types, NumPy's promotion rules and the compute-type rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

/// Element type of a tensor. The values are stable (they are part of cache keys): a new type
/// is added at the end.
///
/// The five "compute" types (bool, i32, i64, f32, f64) are the ones a kernel computes in. The
/// others are storage types: a kernel loads them into their compute type (compute_dtype),
/// computes there and wraps or rounds every result back into the storage type, so its values
/// are the interpreter's bit for bit. See docs/ir.md, 3.1.
enum class DType : uint8_t { Bool, I32, I64, F32, F64, F16, BF16, I8, I16, U8, U16, U32, U64 };

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                       DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                       DType::BF16, DType::F32, DType::F64};

/// The text-form name: "bool", "i8" ... "u64", "f16", "bf16", "f32", "f64".
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);

/// Bytes per element in memory.
size_t dtype_size(DType t);

inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
inline bool is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
inline bool is_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || is_unsigned(t);
}
inline bool is_bool(DType t) { return t == DType::Bool; }
/// Integer or floating point: the types that arithmetic accepts.
inline bool is_numeric(DType t) { return !is_bool(t); }

/// The type a kernel holds a value of `t` in: f16 and bf16 compute in f32; i8, i16, u8 and
/// u16 in i32; u32 in i64; u64 keeps its bits in i64 (its order is computed on keys,
/// scalar::u64_order_key; its remainders, right shifts and float conversions are built from
/// int64 ops by lowering; an integer pow of u64 is refused: type_rules.cpp). The compute
/// types map to themselves.
DType compute_dtype(DType t);
inline bool is_compute_dtype(DType t) { return compute_dtype(t) == t; }

/// The range of an integer type, as int64 (u64's top is clamped to INT64_MAX: u64 values
/// are held as their bits).
int64_t int_min(DType t);
int64_t int_max(DType t);

/// NumPy's result type for a binary operation on arrays of types `a` and `b`:
/// within signed or unsigned integers, or within floats, the wider; a signed meeting an
/// unsigned integer, the smallest signed type holding both (u64 with a signed type gives
/// f64); an integer meeting a float, the smallest float at least as wide that holds every
/// value of the integer exactly (i32 + f32 gives f64); f16 meeting bf16 gives f32.
DType promote(DType a, DType b);

}  // namespace kiln
