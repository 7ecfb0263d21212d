// kiln/frontend/autodiff.h - reverse-mode gradients of lazily recorded tensor code.
//
//   kiln::Tensor w = kiln::randn({784, 10}, 1).mul(0.01f).requires_grad_();
//   kiln::Tensor loss = kiln::train::cross_entropy(x.matmul(w), labels);
//   loss.backward();                  // records the backward; runs nothing
//   kiln::Tensor g = w.grad();        // lazy like any tensor: fused with what reads it
//
// The backward is recorded into the same pending stream as the forward, op by op, with the
// rule that ops.def names for each op, so the forward's tail, the backward and an optimizer's
// update run as one fused, cached plan. See docs/autodiff.md.
#pragma once

#include <functional>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/op.h"

namespace kiln {

/// The gradients of `output` with respect to each of `inputs` (PyTorch's
/// torch.autograd.grad): lazy tensors of the inputs' types. `output` must have one element
/// unless `grad_output` (its shape and dtype) is given. Leaves' grad() is left alone. An
/// input that `output` does not depend on gets zeros, or is an error unless `allow_unused`.
/// The nodes gone through drop their saved values unless `retain_graph`.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output = {},
                         bool allow_unused = false, bool retain_graph = false);

/// While one lives, ops on this thread record no gradient nodes (PyTorch's torch.no_grad):
/// for evaluation and for optimizers' updates.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool was_;
};

/// True unless a NoGradGuard is open on this thread.
bool grad_enabled();

/// Whether gradients flow through `op`: false where ops.def's gradient column says
/// grad_none (sources; ops whose result is never a float).
bool differentiable(OpKind op);

/// A custom kernel's backward: the gradients of its operands (one per operand, undefined
/// where none flows) from the operands and the gradient of its result, written with tensor
/// ops (kiln/frontend/custom_op.h, CustomOp::set_backward).
using CustomBackward =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& operands, const Tensor& grad_result)>;

}  // namespace kiln
