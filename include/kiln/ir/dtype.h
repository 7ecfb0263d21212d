// kiln/ir/dtype.h - element types and NumPy's promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

/// Element type of a tensor. The order is the promotion lattice's order within a kind.
/// Room is left for f16 (and bf16): add a row here and in dtype.cpp.
enum class DType : uint8_t { Bool, I32, I64, F32, F64 };

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I32, DType::I64, DType::F32,
                                       DType::F64};

/// The text-form name: "bool", "i32", "i64", "f32", "f64".
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);

/// Bytes per element in memory.
size_t dtype_size(DType t);

inline bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }
inline bool is_integer(DType t) { return t == DType::I32 || t == DType::I64; }
inline bool is_bool(DType t) { return t == DType::Bool; }
/// Integer or floating point: the types that arithmetic accepts.
inline bool is_numeric(DType t) { return !is_bool(t); }

/// NumPy's result type for a binary operation on arrays of types `a` and `b`:
/// bool < i32 < i64 and f32 < f64; an integer meeting f32 gives f64 (NumPy keeps every
/// i32 value exact), an integer meeting f64 gives f64.
DType promote(DType a, DType b);

}  // namespace kiln
