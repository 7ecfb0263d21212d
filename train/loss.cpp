// train/loss.cpp - losses and initializers, written with tensor ops (their gradients are the
// primitives' rules).
#include "kiln/train/loss.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kiln/support/error.h"

namespace kiln::train {
namespace {

std::string type_of(const Tensor& t) { return TensorType{t.dtype(), t.shape()}.str(); }

Tensor reduce(const Tensor& per_item, Reduction reduction, const Tensor& count) {
  switch (reduction) {
    case Reduction::None: return per_item;
    case Reduction::Sum: return per_item.sum();
    case Reduction::Mean: return count.defined() ? per_item.sum() / count : per_item.mean();
  }
  return per_item;
}

// PyTorch's fans: dims 0 and 1, times the receptive field of the rest.
std::pair<double, double> fans(std::string_view fn, const Shape& shape) {
  if (shape.rank() < 2)
    throw Error(fmt::format("{}: needs a shape of rank 2 or more (out, in, ...) to compute fans, got {}", fn,
                            shape.str()));
  double field = 1;
  for (int d = 2; d < shape.rank(); ++d) field *= static_cast<double>(shape[d]);
  return {static_cast<double>(shape[1]) * field, static_cast<double>(shape[0]) * field};
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction, int64_t ignore_index) {
  if (!logits.defined() || !targets.defined()) throw Error("cross_entropy: a tensor is undefined");
  if (!is_float(logits.dtype()) || logits.rank() < 1)
    throw Error(fmt::format("cross_entropy: logits must be floats [.., classes], got {}", type_of(logits)));
  if (targets.dtype() != DType::I32 && targets.dtype() != DType::I64)
    throw Error(fmt::format("cross_entropy: targets must be class indices (i32 or i64), got {}", type_of(targets)));
  const Shape& ls = logits.shape();
  if (targets.rank() != ls.rank() - 1 || !std::equal(targets.shape().begin(), targets.shape().end(), ls.begin()))
    throw Error(fmt::format("cross_entropy: targets {} must have the shape of logits {} without its class axis",
                            type_of(targets), type_of(logits)));
  const int64_t classes = ls[ls.rank() - 1];
  const Tensor t = targets.to(DType::I64);
  const Tensor picked = logits.log_softmax(-1).gather(-1, t.unsqueeze(-1)).squeeze(-1);
  const Tensor ignored = t == ignore_index;
  const Tensor outside = (t < 0) | (t >= classes);
  const Tensor zero = zeros({}, logits.dtype(), logits.device());
  const Tensor nan = full({}, std::numeric_limits<double>::quiet_NaN(), logits.dtype(), logits.device());
  const Tensor per_item = where(ignored, zero, where(outside, nan, -picked));
  Tensor count;
  if (reduction == Reduction::Mean) count = (~ignored).to(logits.dtype()).sum();
  return reduce(per_item, reduction, count);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (!input.defined() || !target.defined()) throw Error("mse_loss: a tensor is undefined");
  const Tensor d = input - target;
  if (d.shape() != input.shape())
    throw Error(fmt::format("mse_loss: target {} must broadcast to input {}", type_of(target), type_of(input)));
  return reduce(d * d, reduction, {});
}

Tensor uniform(Shape shape, double low, double high, uint64_t seed, DType dtype, Device device) {
  if (!(low <= high)) throw Error(fmt::format("uniform: low {} is above high {}", low, high));
  return rand(std::move(shape), seed, dtype, device) * (high - low) + low;
}

Tensor normal(Shape shape, double mean, double std, uint64_t seed, DType dtype, Device device) {
  if (!(std >= 0)) throw Error(fmt::format("normal: std {} is negative", std));
  return randn(std::move(shape), seed, dtype, device) * std + mean;
}

Tensor xavier_uniform(Shape shape, uint64_t seed, double gain, DType dtype, Device device) {
  const auto [fan_in, fan_out] = fans("xavier_uniform", shape);
  const double b = gain * std::sqrt(6.0 / (fan_in + fan_out));
  return uniform(std::move(shape), -b, b, seed, dtype, device);
}

Tensor kaiming_uniform(Shape shape, uint64_t seed, double a, DType dtype, Device device) {
  const double fan_in = fans("kaiming_uniform", shape).first;
  const double b = std::sqrt(6.0 / ((1 + a * a) * fan_in));
  return uniform(std::move(shape), -b, b, seed, dtype, device);
}

Tensor kaiming_normal(Shape shape, uint64_t seed, DType dtype, Device device) {
  const double fan_in = fans("kaiming_normal", shape).first;
  return normal(std::move(shape), 0, std::sqrt(2.0 / fan_in), seed, dtype, device);
}

}  // namespace kiln::train
