// onnx/ops_nn.cpp - products and normalizations, decomposed as the frontend's own are.
#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

std::vector<Tensor> MatMul(NodeContext& c) { return {c.input(0).matmul(c.input(1))}; }

// alpha * A' B' + beta * C, with A' and B' optionally transposed.
std::vector<Tensor> Gemm(NodeContext& c) {
  Tensor a = c.input(0), b = c.input(1);
  if (a.rank() != 2 || b.rank() != 2) c.invalid(fmt::format("A and B must be 2-D, got {} and {}", a.shape().str(), b.shape().str()));
  if (c.attr_int("transA", 0) != 0) a = a.transpose(0, 1);
  if (c.attr_int("transB", 0) != 0) b = b.transpose(0, 1);
  Tensor y = a.matmul(b);
  if (const double alpha = c.attr_float("alpha", 1.0); alpha != 1.0) y = y * c.scalar_like(alpha, y);
  if (c.has_input(2)) {
    Tensor bias = c.input(2);
    if (const double beta = c.attr_float("beta", 1.0); beta != 1.0) bias = bias * c.scalar_like(beta, bias);
    y = y + bias;
  }
  return {y};
}

// A [C] parameter seen along axis 1 of an [N, C, ...] input.
Tensor per_channel(const Tensor& p, int64_t rank) {
  std::vector<int64_t> s(static_cast<size_t>(rank), 1);
  s[1] = p.numel();
  return p.reshape(s);
}

std::vector<Tensor> BatchNormalization(NodeContext& c) {
  if (c.attr_int("training_mode", 0) != 0) c.unsupported("training_mode = 1 is not supported (inference only)");
  if (c.attr_int("spatial", 1) != 1) c.unsupported("spatial = 0 (statistics per element) is not supported");
  for (int k = 1; k < c.node().output_size(); ++k)
    if (!c.node().output(k).empty()) c.unsupported("the running statistics outputs (training) are not supported");
  Tensor x = c.input(0);
  if (x.rank() < 2) c.invalid("its input must be [N, C, ...]");
  const int64_t r = x.rank();
  Tensor scale = per_channel(c.input(1), r), bias = per_channel(c.input(2), r);
  Tensor mean = per_channel(c.input(3), r), var = per_channel(c.input(4), r);
  Tensor eps = c.scalar_like(c.attr_float("epsilon", 1e-5), var);
  return {(x - mean) * (var + eps).rsqrt() * scale + bias};
}

// Normalizes over `axes` of x: (x - mean) / sqrt(var + eps), var biased.
std::pair<Tensor, Tensor> normalize(NodeContext& c, const Tensor& x, const Axes& axes, double eps) {
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor inv_std = ((centered * centered).mean(axes, true) + c.scalar_like(eps, x)).rsqrt();
  return {centered * inv_std, inv_std};
}

std::vector<Tensor> LayerNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  if (!is_float(x.dtype())) c.invalid("its input must be float or double");
  if (c.has_attr("stash_type") && c.attr_int("stash_type") != 1)
    c.unsupported("stash_type other than 1 (float) is not supported");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), x.rank(), "axis");
  Axes axes;
  for (int64_t d = axis; d < x.rank(); ++d) axes.push_back(d);
  auto [y, inv_std] = normalize(c, x, axes, c.attr_float("epsilon", 1e-5));
  y = y * c.input(1);
  if (c.has_input(2)) y = y + c.input(2);
  return {y, x.mean(axes, true), inv_std};
}

std::vector<Tensor> InstanceNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3) c.invalid("its input must be [N, C, spatial...]");
  Axes axes;
  for (int64_t d = 2; d < x.rank(); ++d) axes.push_back(d);
  auto [y, inv_std] = normalize(c, x, axes, c.attr_float("epsilon", 1e-5));
  return {y * per_channel(c.input(1), x.rank()) + per_channel(c.input(2), x.rank())};
}

std::vector<Tensor> MeanVarianceNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  const Axes axes = c.attr_ints("axes", std::vector<int64_t>{0, 2, 3});
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor std = (centered * centered).mean(axes, true).sqrt();
  return {centered / (std + c.scalar_like(1e-9, x))};
}

constexpr std::string_view kGemm[] = {"alpha", "beta", "transA", "transB", "broadcast"};
constexpr std::string_view kBatchNorm[] = {"epsilon", "momentum", "training_mode", "is_test", "spatial"};
constexpr std::string_view kLayerNorm[] = {"axis", "epsilon", "stash_type"};
constexpr std::string_view kEpsilon[] = {"epsilon"};
constexpr std::string_view kAxes[] = {"axes"};

}  // namespace

const ConverterRow kNnRows[] = {
    {"MatMul", 1, MatMul, {}},
    {"Gemm", 6, Gemm, kGemm},
    {"BatchNormalization", 6, BatchNormalization, kBatchNorm},
    {"LayerNormalization", 17, LayerNormalization, kLayerNorm},
    {"InstanceNormalization", 6, InstanceNormalization, kEpsilon},
    {"MeanVarianceNormalization", 9, MeanVarianceNormalization, kAxes},
};
const std::span<const ConverterRow> nn_rows = kNnRows;

}  // namespace kiln::onnx::detail
