// frontend/grad.h - the tape behind reverse-mode gradients (internal to frontend/).
//
// While gradients are enabled, recording an op whose result is a float and which reads a
// value that requires a gradient also records a GradNode: which rule (ops.def's gradient
// column), the attributes, the operand types, the operand values that the rule reads, and
// edges to the operands' own nodes. A leaf (a tensor made to require gradients) has a node
// with no rule, where backward() accumulates. Nodes never hold their result, so a node and
// its result's value cannot keep each other alive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/attrs.h"
#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/op.h"

namespace kiln::detail {

struct LazyValue;

/// What a gradient rule is given: the forward op and the gradient of its result.
struct GradInput {
  OpKind op;
  const Attrs& attrs;
  std::span<const Tensor> saved;              // per operand: its value if the rule reads it
  std::span<const TensorType> operand_types;  // per operand
  const TensorType& result_type;
  Device device;
  const Tensor& grad;  // d(output) / d(result), of result_type
  uint32_t wanted;     // bit i: operand i needs its gradient

  bool wants(size_t i) const { return i < 32 && (wanted >> i & 1u) != 0; }
};

/// One gradient per operand, of the operand's type (undefined: none flows there).
using GradFn = std::vector<Tensor> (*)(const GradInput&);

/// An op's reverse-mode rule, named by ops.def's gradient column.
struct GradRule {
  uint32_t saves;       // bit i: the backward reads operand i's value (kSavesAll: every one)
  GradFn backward;      // null: no gradient flows through the op (grad_none)
};
inline constexpr uint32_t kSavesAll = ~0u;

#define KILN_OP(Id, name, arity, category, traits, rule, attrs, grad) extern const GradRule grad;
#include "kiln/ir/ops.def"
#undef KILN_OP

/// The rule ops.def names for `op`.
const GradRule& grad_rule(OpKind op);

struct GradNode {
  // An op's node; a leaf has rule == nullptr and accumulates into `grad`.
  const GradRule* rule = nullptr;
  OpKind op = OpKind::Input;
  Attrs attrs;
  std::vector<TensorType> operand_types;
  std::vector<Tensor> saved;                     // per operand (undefined where not read)
  std::vector<std::shared_ptr<GradNode>> next;   // per operand (null: no gradient flows)
  TensorType result_type;
  Device device;
  uint64_t sequence = 0;  // creation order: a node is always newer than its operands'

  Tensor grad;  // a leaf's accumulated gradient
  bool released = false;  // a backward went through and dropped `saved`

  bool is_leaf() const { return rule == nullptr; }
  /// Drops the saved values (after a backward that does not retain the graph).
  void release_saved();
  ~GradNode();
};

/// After `result` was recorded as `op` on `operands`: gives it a node when gradients are on,
/// its type is a float and some operand requires a gradient.
void record_grad(LazyValue* result, OpKind op, const Attrs& attrs, std::span<const Tensor* const> operands);

/// The backward a custom kernel's user gave (CustomOp::set_backward), or null.
const CustomBackward* custom_backward(const CustomKernel& kernel);
void set_custom_backward(const CustomKernel& kernel, CustomBackward backward);

/// `g` summed over the axes that broadcasting added or stretched to give `type`, and cast
/// to its dtype: the gradient of an operand that broadcast into a larger result.
Tensor sum_to(const Tensor& g, const TensorType& type);

}  // namespace kiln::detail
