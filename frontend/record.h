// frontend/record.h - recording one op: checks, node creation, the pending cap (internal).
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/op.h"

namespace kiln::detail {

/// Records `op` on `operands` for the user-facing function `fn`: checks devices and types
/// (throwing kiln::Error "fn: ..." at this call), creates the pending value, and evaluates it
/// at once if it would exceed the pending-stream cap.
Tensor record(std::string_view fn, OpKind op, std::span<const Tensor* const> operands,
              Attrs attrs = {}, const TensorType* declared = nullptr);
inline Tensor record(std::string_view fn, OpKind op, std::initializer_list<const Tensor*> operands,
                     Attrs attrs = {}, const TensorType* declared = nullptr) {
  return record(fn, op, std::span<const Tensor* const>(operands.begin(), operands.size()),
                std::move(attrs), declared);
}

/// Attributes for `op` with `name` set (asserts the schema has it).
AttrValue& attr_slot(Attrs& attrs, OpKind op, std::string_view name);

/// `axis` in [-rank, rank) made non-negative, or kiln::Error naming `fn` and the tensor.
int64_t normalize_axis(std::string_view fn, int64_t axis, const Tensor& t, int rank_extra = 0);
/// Sorted, unique, non-negative axes; empty means all axes.
std::vector<int64_t> normalize_axes(std::string_view fn, const Axes& axes, const Tensor& t);

/// A rank-0 value holding `n`, typed for an operation with `like` (weak scalar rules): a
/// `scalar` node, bound at launch (a learning rate changes without recompiling), or a
/// `constant` while a BakedScalars scope is open on this thread.
/// Errors name `fn`, the user-facing op ("add" for `t + 1`). With `bound_source` >= 0 (a
/// bound_scalar in a capture), always a fresh `scalar` node that the cut maps to that source.
Tensor scalar_for(std::string_view fn, const Number& n, const Tensor& like, int64_t bound_source = -1);

/// While one lives, scalar_for records constants: for kiln's own composites (mean's 1/n,
/// gelu's coefficients), whose values never change and which fold and simplify as constants.
class BakedScalars {
 public:
  BakedScalars();
  ~BakedScalars();
  BakedScalars(const BakedScalars&) = delete;
  BakedScalars& operator=(const BakedScalars&) = delete;

 private:
  bool was_;
};

/// "f32[3,4]": a tensor's type as errors write it.
std::string type_str(const Tensor& t);

[[noreturn]] void fail(std::string_view fn, std::string_view message);
void require_defined(std::string_view fn, const Tensor& t);

}  // namespace kiln::detail
