// frontend/composite_ops.cpp - composite ops, decomposed into primitives so that fusion sees
// through them: mean, var, softmax, log_softmax, sort, topk, layer_norm, gelu, silu, linear.
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "kiln/frontend/autodiff.h"
#include "record.h"

namespace kiln {
namespace {

void require_float(std::string_view fn, const Tensor& x) {
  detail::require_defined(fn, x);
  if (!is_float(x.dtype()))
    detail::fail(fn, fmt::format("expects a floating-point tensor, got {} (convert with .to(kiln::DType::F32))",
                                 TensorType{x.dtype(), x.shape()}.str()));
}

int64_t count_over(const Tensor& x, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= x.shape()[static_cast<int>(a)];
  return n;
}

// The row's maximum only keeps exp in range: softmax and log_softmax do not change when
// every element of a row moves by the same amount, so no gradient flows through it, and
// recording one would only add an argmax and a row sum that cancel to zero (PyTorch's and
// JAX's rules leave it out too).
Tensor row_max_without_gradient(const Tensor& x, int64_t dim) {
  const NoGradGuard no_grad;
  return x.max({dim}, true);
}

}  // namespace

Tensor Tensor::mean(const Axes& axes, bool keepdim) const {
  require_float("mean", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  const int64_t n = count_over(*this, detail::normalize_axes("mean", axes, *this));
  return sum(axes, keepdim) / static_cast<double>(n);
}

Tensor Tensor::var(const Axes& axes, bool keepdim, int64_t correction) const {
  require_float("var", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  const int64_t n = count_over(*this, detail::normalize_axes("var", axes, *this));
  const Tensor d = *this - mean(axes, /*keepdim=*/true);
  return (d * d).sum(axes, keepdim) / static_cast<double>(n - correction);
}

Tensor Tensor::softmax(int64_t dim) const {
  require_float("softmax", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  const Tensor e = (*this - row_max_without_gradient(*this, dim)).exp();
  return e / e.sum({dim}, true);
}

Tensor Tensor::log_softmax(int64_t dim) const {
  require_float("log_softmax", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  const Tensor s = *this - row_max_without_gradient(*this, dim);
  return s - s.exp().sum({dim}, true).log();
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  detail::require_defined("sort", *this);
  if (rank() == 0) return {*this, kiln::zeros({}, DType::I64, device())};
  const int64_t d = detail::normalize_axis("sort", dim, *this);
  const Tensor from = argsort(d, descending);
  return {gather(d, from), from};
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest) const {
  detail::require_defined("topk", *this);
  const int64_t d = detail::normalize_axis("topk", dim, *this);
  if (k < 0 || k > size(d))
    detail::fail("topk", fmt::format("k = {} is not in [0, {}] for axis {} of {}", k, size(d), d,
                                     TensorType{dtype(), shape()}.str()));
  const auto [values, indices] = sort(d, largest);
  return {values.slice(d, 0, k), indices.slice(d, 0, k)};
}

Tensor Tensor::silu() const {
  require_float("silu", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  return *this * sigmoid();
}

Tensor Tensor::gelu(GeluApproximation approximate) const {
  require_float("gelu", *this);
  const detail::BakedScalars baked;  // kiln's own constants fold
  const Tensor& x = *this;
  if (approximate == GeluApproximation::Tanh) {
    const double k = std::sqrt(2 / std::numbers::pi);  // 0.7978845608...
    return 0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh());
  }
  return 0.5 * x * (1.0 + (x * (1 / std::numbers::sqrt2)).erf());
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdim) { return x.mean(axes, keepdim); }
Tensor var(const Tensor& x, const Axes& axes, bool keepdim, int64_t correction) { return x.var(axes, keepdim, correction); }
Tensor softmax(const Tensor& x, int64_t dim) { return x.softmax(dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return x.log_softmax(dim); }

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                                    std::optional<double> scale) {
  require_float("scaled_dot_product_attention", q);
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    detail::fail("scaled_dot_product_attention", "needs q, k and v of rank 2 or more");
  // The scale is the model's constant, not a value bound at each launch: it is the attention
  // step's attribute.
  const detail::BakedScalars baked;
  const double s = scale.value_or(1 / std::sqrt(static_cast<double>(q.shape()[q.rank() - 1])));
  Tensor scores = q.matmul(k.transpose(-2, -1)) * s;
  if (mask) scores = scores + *mask;
  return scores.softmax(-1).matmul(v);
}

Tensor layer_norm(const Tensor& x, double eps) {
  require_float("layer_norm", x);
  const detail::BakedScalars baked;  // kiln's own constants fold
  if (x.rank() == 0) detail::fail("layer_norm", "needs a tensor of rank 1 or more");
  const Tensor d = x - x.mean({-1}, true);
  return d * ((d * d).mean({-1}, true) + eps).rsqrt();
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  require_float("layer_norm", x);
  const detail::BakedScalars baked;  // kiln's own constants fold
  for (const Tensor* p : {&weight, &bias}) {
    detail::require_defined("layer_norm", *p);
    if (x.rank() == 0 || p->rank() != 1 || p->shape()[0] != x.shape()[x.rank() - 1])
      detail::fail("layer_norm", fmt::format("weight and bias must have the shape of the last axis of {}, got {}",
                                             TensorType{x.dtype(), x.shape()}.str(),
                                             TensorType{p->dtype(), p->shape()}.str()));
  }
  return layer_norm(x, eps) * weight + bias;
}

Tensor linear(const Tensor& x, const Tensor& weight) {
  detail::require_defined("linear", x);
  detail::require_defined("linear", weight);
  if (weight.rank() != 2)
    detail::fail("linear", fmt::format("weight must be [out_features, in_features], got {}",
                                       TensorType{weight.dtype(), weight.shape()}.str()));
  // Checked here, so that the error names linear and its operands, not the matmul inside.
  if (x.rank() < 2)
    detail::fail("linear", fmt::format("input must be [batch..., in_features] (rank 2 or more), got {}",
                                       TensorType{x.dtype(), x.shape()}.str()));
  if (x.shape()[x.rank() - 1] != weight.shape()[1])
    detail::fail("linear", fmt::format("input {} has {} features, weight {} expects {}",
                                       TensorType{x.dtype(), x.shape()}.str(), x.shape()[x.rank() - 1],
                                       TensorType{weight.dtype(), weight.shape()}.str(), weight.shape()[1]));
  return x.matmul(weight.transpose(0, 1));
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Tensor y = linear(x, weight);
  detail::require_defined("linear", bias);
  if (!broadcast_shapes(y.shape(), bias.shape()) || bias.rank() > 1)
    detail::fail("linear", fmt::format("bias {} does not match the output {} (want [out_features] or [])",
                                       TensorType{bias.dtype(), bias.shape()}.str(),
                                       TensorType{y.dtype(), y.shape()}.str()));
  return y + bias;
}

}  // namespace kiln
