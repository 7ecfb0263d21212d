// onnx/ops_loss.cpp - NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// The class a target names is picked with a one-hot mask (target == arange(C)) and a sum
// over the class axis: exact (one term and zeros), and made of ops that fuse, until kiln has
// a native gather.
#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

Tensor nll(NodeContext& c, const Tensor& input, const Tensor& target_in, const Tensor* weight) {
  if (input.rank() < 2) c.invalid(fmt::format("its input must be [N, C, ...], got {}", input.shape().str()));
  if (!is_integer(target_in.dtype())) c.invalid("its target must hold integers");
  const int64_t classes = input.size(1), rank = input.rank();
  if (target_in.rank() != rank - 1) c.invalid(fmt::format("its target {} does not match the input {}", target_in.shape().str(), input.shape().str()));
  const Tensor target = target_in.dtype() == DType::I64 ? target_in : target_in.to(DType::I64);
  const Tensor hot = target.unsqueeze(1).eq(positions_along(c, classes, 1, rank));
  const Tensor zero = c.scalar_like(0, input);
  const Tensor picked = where(hot, input, zero).sum({1});
  Tensor w = weight ? where(hot, along_axis(*weight, 1, rank), zero).sum({1})
                    : kiln::ones(target.shape(), input.dtype(), c.device());
  if (c.has_attr("ignore_index")) {
    const Tensor ignored = target.eq(c.scalar(static_cast<double>(c.attr_int("ignore_index")), DType::I64));
    w = where(ignored, zero, w);
  }
  const Tensor loss = (picked * w).neg();
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  if (reduction == "mean") return loss.sum() / w.sum();
  c.invalid(fmt::format("reduction '{}' is none of none, sum and mean", reduction));
}

std::vector<Tensor> NegativeLogLikelihoodLoss(NodeContext& c) {
  Tensor weight;
  if (c.has_input(2)) weight = c.input(2);
  return {nll(c, c.input(0), c.input(1), c.has_input(2) ? &weight : nullptr)};
}

std::vector<Tensor> SoftmaxCrossEntropyLoss(NodeContext& c) {
  const Tensor log_prob = c.input(0).log_softmax(1);
  Tensor weight;
  if (c.has_input(2)) weight = c.input(2);
  return {nll(c, log_prob, c.input(1), c.has_input(2) ? &weight : nullptr), log_prob};
}

constexpr std::string_view kLoss[] = {"reduction", "ignore_index"};

}  // namespace

const ConverterRow kLossRows[] = {
    {"NegativeLogLikelihoodLoss", 12, 22, NegativeLogLikelihoodLoss, kLoss},
    {"SoftmaxCrossEntropyLoss", 12, 13, SoftmaxCrossEntropyLoss, kLoss},
};
const std::span<const ConverterRow> loss_rows = kLossRows;

}  // namespace kiln::onnx::detail
