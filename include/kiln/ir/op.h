// kiln/ir/op.h - operation kinds and the queries derived from ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kiln/ir/attrs.h"
#include "kiln/ir/shape.h"
#include "kiln/support/error.h"

namespace kiln {

enum class OpKind : uint8_t {
#define KILN_OP(Id, name, arity, category, traits, rule, attrs, grad) Id,
#include "kiln/ir/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(Id, name, arity, category, traits, rule, attrs, grad) +1
#include "kiln/ir/ops.def"
#undef KILN_OP
    ;

enum class OpCategory : uint8_t { Source, Elementwise, Reduce, Movement, Matmul };

/// Algebraic properties that rewrites may rely on (bits of OpInfo::traits).
namespace trait {
inline constexpr uint32_t None = 0;
inline constexpr uint32_t Commutative = 1u << 0;  // f(a, b) == f(b, a)
inline constexpr uint32_t Associative = 1u << 1;  // f(f(a, b), c) == f(a, f(b, c)) for ints
inline constexpr uint32_t Idempotent = 1u << 2;   // unary f(f(x)) == f(x); binary f(x, x) == x
inline constexpr uint32_t Involution = 1u << 3;   // f(f(x)) == x
inline constexpr uint32_t FloatOnly = 1u << 4;    // operands must be floating point
inline constexpr uint32_t View = 1u << 5;         // an index map over its operand: moves no data
inline constexpr uint32_t Declared = 1u << 6;     // result type written out, not derived
inline constexpr uint32_t Expensive = 1u << 7;    // transcendental: worth computing once per element
inline constexpr uint32_t VectorMath = 1u << 8;   // f32 has kiln's own vectorizable approximation
inline constexpr uint32_t ArgReduce = 1u << 9;    // a reduction to a position (argmax, argmin)
inline constexpr uint32_t Predicate = 1u << 10;   // a unary test of its operand, giving bool
inline constexpr uint32_t InOrder = 1u << 11;     // its kernel walks its points one after another,
                                                  // each reading what earlier ones stored
                                                  // (Kernel::in_order)
inline constexpr uint32_t WholeResult = 1u << 12; // its result is complete only once its
                                                  // kernel (or kernels) ran to the end: no
                                                  // user shares its kernel, and that kernel
                                                  // computes no reduction or matmul
}  // namespace trait

/// What a type rule sees: the operand types, the attributes and, for ops whose result
/// type is not derivable from the operands (input, constant, reshape, cast...), the type
/// that the IR text or the builder declared.
struct TypeRuleInput {
  OpKind op;
  std::span<const TensorType> operands;
  const Attrs& attrs;
  const TensorType* declared;
};

/// Computes the result type, or says why the operation is ill-typed. The message names the
/// op and the offending types, e.g. `'sub' operands f32[4,4] and f32[3] cannot broadcast`.
using TypeRule = Expected<TensorType> (*)(const TypeRuleInput&);

/// One row of ops.def.
struct OpInfo {
  OpKind kind;
  std::string_view name;
  int arity;  // -1: variadic
  OpCategory category;
  uint32_t traits;
  TypeRule type_rule;
  std::span<const AttrSpec> attrs;

  bool has(uint32_t t) const { return (traits & t) != 0; }
  /// A movement op that is an index map over its operand (every one but concat).
  bool is_view() const { return has(trait::View); }
  /// True when the result type cannot be computed from operands and attributes alone.
  bool result_type_declared() const { return has(trait::Declared); }
};

const OpInfo& op_info(OpKind op);
inline std::string_view op_name(OpKind op) { return op_info(op).name; }
std::optional<OpKind> lookup_op(std::string_view name);
std::span<const OpInfo> all_ops();

/// Position of attribute `name` in `op`'s schema, or -1.
int attr_index(OpKind op, std::string_view name);

/// Infers the result type of `op` (or checks the declared one) with its type rule.
Expected<TensorType> infer_type(OpKind op, std::span<const TensorType> operands,
                                const Attrs& attrs, const TensorType* declared = nullptr);

}  // namespace kiln
