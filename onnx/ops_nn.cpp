// onnx/ops_nn.cpp - products and normalizations, decomposed as the frontend's own are.
#include <algorithm>
#include <cctype>

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

// Inference normalizes with the running statistics. Training (opset 14's training_mode)
// normalizes with the batch's own (the biased variance over every axis but the channels),
// and returns the running statistics moved toward them by 1 - momentum.
std::vector<Tensor> BatchNormalization(NodeContext& c) {
  if (c.attr_int("spatial", 1) != 1) c.unsupported("spatial = 0 (statistics per element) is not supported");
  const bool training = c.attr_int("training_mode", 0) != 0;
  if (!training)
    for (int k = 1; k < c.node().output_size(); ++k)
      if (!c.node().output(k).empty()) c.unsupported("the running statistics outputs need training_mode = 1");
  Tensor x = c.input(0);
  if (x.rank() < 2) c.invalid("its input must be [N, C, ...]");
  const int64_t r = x.rank();
  Tensor scale = along_axis(c.input(1), 1, r), bias = along_axis(c.input(2), 1, r);
  Tensor eps = c.scalar_like(c.attr_float("epsilon", 1e-5), x);
  if (!training) {
    Tensor mean = along_axis(c.input(3), 1, r), var = along_axis(c.input(4), 1, r);
    return {(x - mean) * (var + eps).rsqrt() * scale + bias};
  }
  Axes axes{0};
  for (int64_t d = 2; d < r; ++d) axes.push_back(d);
  const Tensor mean = x.mean(axes, true), centered = x - mean, var = (centered * centered).mean(axes, true);
  const Tensor y = centered * (var + eps).rsqrt() * scale + bias;
  const Tensor m = c.scalar_like(c.attr_float("momentum", 0.9), x), rest = c.scalar_like(1, x) - m;
  const int64_t channels = x.size(1);
  return {y, c.input(3) * m + mean.reshape({channels}) * rest, c.input(4) * m + var.reshape({channels}) * rest};
}

// x normalized over `axes`, (x - mean) / sqrt(var + eps) with the biased variance, as
// kiln::layer_norm does over the last axis; with the mean and 1 / sqrt(var + eps).
struct Normalized {
  Tensor y, mean, inv_std;
};
Normalized normalize(NodeContext& c, const Tensor& x, const Axes& axes, double eps) {
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor inv_std = ((centered * centered).mean(axes, true) + c.scalar_like(eps, x)).rsqrt();
  return {centered * inv_std, mean, inv_std};
}

std::vector<Tensor> LayerNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  if (!is_float(x.dtype())) c.invalid("its input must be float or double");
  if (c.has_attr("stash_type") && c.attr_int("stash_type") != 1)
    c.unsupported("stash_type other than 1 (float) is not supported");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), x.rank(), "axis");
  Axes axes;
  for (int64_t d = axis; d < x.rank(); ++d) axes.push_back(d);
  // stash_type 1: f16 and bf16 inputs normalize in f32, and the mean and inverse standard
  // deviation outputs stay f32; the result is rounded to the input's type before the
  // scale and bias, as the op's function body says.
  const Normalized n = normalize(c, x.to(compute_dtype(x.dtype())), axes, c.attr_float("epsilon", 1e-5));
  Tensor y = n.y.to(x.dtype()) * c.input(1);
  if (c.has_input(2)) y = y + c.input(2);
  return {y, n.mean, n.inv_std};
}

std::vector<Tensor> InstanceNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3) c.invalid("its input must be [N, C, spatial...]");
  Axes axes;
  for (int64_t d = 2; d < x.rank(); ++d) axes.push_back(d);
  const Tensor y = normalize(c, x, axes, c.attr_float("epsilon", 1e-5)).y;
  return {y * along_axis(c.input(1), 1, x.rank()) + along_axis(c.input(2), 1, x.rank())};
}

// GroupNormalization: the channels in num_groups groups, each normalized over its channels
// and spatial dims; then scaled and shifted per group (version 18) or per channel (21).
// Narrow floats compute their statistics in f32, as stash_type 1 says.
std::vector<Tensor> GroupNormalization(NodeContext& c) {
  const Tensor x = c.input(0);
  if (!is_float(x.dtype())) c.invalid("its input must be float");
  if (x.rank() < 3) c.invalid(fmt::format("its input must be [N, C, spatial...], got {}", x.shape().str()));
  if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than 1 (float) is not supported");
  const int64_t groups = c.attr_int("num_groups"), channels = x.size(1), n = x.size(0);
  if (groups < 1 || channels % groups != 0)
    c.invalid(fmt::format("{} channels do not fall into {} groups", channels, groups));
  const int64_t per_group = c.version() >= 21 ? channels : groups;
  for (size_t k : {size_t{1}, size_t{2}})
    if (c.shape(k).numel() != per_group || c.shape(k).rank() != 1)
      c.invalid(fmt::format("its {} must be [{}], got {}", k == 1 ? "scale" : "bias", per_group, c.shape(k).str()));
  const Tensor grouped = x.to(compute_dtype(x.dtype())).reshape({n, groups, -1});
  const Tensor y = normalize(c, grouped, {2}, c.attr_float("epsilon", 1e-5)).y.reshape(dims_of(x.shape())).to(x.dtype());
  // Per group: each group's value repeated over its channels.
  auto per_channel = [&](const Tensor& v) {
    if (per_group == channels) return along_axis(v, 1, x.rank());
    return along_axis(v.reshape({groups, 1}).expand({groups, channels / groups}).reshape({channels}), 1, x.rank());
  };
  return {y * per_channel(c.input(1)) + per_channel(c.input(2))};
}

std::vector<Tensor> MeanVarianceNormalization(NodeContext& c) {
  Tensor x = c.input(0);
  const Axes axes = c.attr_ints("axes", std::vector<int64_t>{0, 2, 3});
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor std = (centered * centered).mean(axes, true).sqrt();
  return {centered / (std + c.scalar_like(1e-9, x))};
}

// Einsum as broadcasting: every operand's axes are put in one order (output letters, then
// the summed ones), multiplied together and summed over the letters the output lacks. A
// letter repeated within one operand ("ii") first takes the diagonal, a strided view.
std::vector<Tensor> Einsum(NodeContext& c) {
  std::string eq;
  for (char ch : c.attr_string("equation"))
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    terms.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (terms.size() != c.num_inputs())
    c.invalid(fmt::format("the equation '{}' names {} operands for {} inputs", eq, terms.size(), c.num_inputs()));
  // Letters per operand, the ellipsis spelled as '0', '1', ... for its dims (right-aligned).
  int64_t ellipsis = 0;
  std::vector<Tensor> ops;
  std::vector<std::string> labels;
  for (size_t i = 0; i < terms.size(); ++i) {
    ops.push_back(c.input(i));
    const std::string& t = terms[i];
    const size_t dots = t.find("...");
    const int64_t named = static_cast<int64_t>(t.size()) - (dots == std::string::npos ? 0 : 3);
    const int64_t e = dots == std::string::npos ? 0 : ops.back().rank() - named;
    if (e < 0 || (dots == std::string::npos && named != ops.back().rank()))
      c.invalid(fmt::format("term '{}' does not match operand {} of rank {}", t, i, ops.back().rank()));
    ellipsis = std::max(ellipsis, e);
    std::string l;
    for (size_t k = 0; k < t.size(); ++k) {
      if (k == dots) {
        for (int64_t d = 0; d < e; ++d) l += static_cast<char>('0' + (ellipsis - e) + d);
        k += 2;
      } else if (std::isalpha(static_cast<unsigned char>(t[k]))) {
        l += t[k];
      } else {
        c.invalid(fmt::format("'{}' in the equation is not a letter", t[k]));
      }
    }
    labels.push_back(l);
  }
  std::string out;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    for (size_t k = 0; k < rhs.size(); ++k) {
      if (rhs.compare(k, 3, "...") == 0) {
        for (int64_t d = 0; d < ellipsis; ++d) out += static_cast<char>('0' + d);
        k += 2;
      } else {
        out += rhs[k];
      }
    }
  } else {  // implicit: the ellipsis, then the letters used once, alphabetically
    for (int64_t d = 0; d < ellipsis; ++d) out += static_cast<char>('0' + d);
    std::string all;
    for (const auto& l : labels) all += l;
    for (char ch = 'A'; ch <= 'z'; ++ch)
      if (std::isalpha(static_cast<unsigned char>(ch)) && std::count(all.begin(), all.end(), ch) == 1) out += ch;
  }
  // Diagonals: a letter twice in one operand.
  for (size_t i = 0; i < ops.size(); ++i) {
    for (;;) {
      std::string& l = labels[i];
      size_t a = std::string::npos, b = std::string::npos;
      for (size_t x = 0; x < l.size() && a == std::string::npos; ++x)
        if (const size_t y = l.find(l[x], x + 1); y != std::string::npos) a = x, b = y;
      if (a == std::string::npos) break;
      Tensor& t = ops[i];
      const int64_t n = t.size(static_cast<int64_t>(a));
      if (t.size(static_cast<int64_t>(b)) != n) c.invalid(fmt::format("'{}' has two sizes in operand {}", l[a], i));
      Axes perm;  // b right after a
      for (int64_t d = 0; d < t.rank(); ++d)
        if (d != static_cast<int64_t>(b)) {
          perm.push_back(d);
          if (d == static_cast<int64_t>(a)) perm.push_back(static_cast<int64_t>(b));
        }
      std::vector<int64_t> merged;
      for (size_t k = 0; k < perm.size(); ++k) {
        if (perm[k] == static_cast<int64_t>(b)) continue;
        merged.push_back(perm[k] == static_cast<int64_t>(a) ? n * n : t.size(perm[k]));
      }
      t = t.permute(perm).reshape(merged).slice(static_cast<int64_t>(a), 0, n * n, n + 1);
      l.erase(b, 1);
    }
  }
  std::string order = out;
  for (const auto& l : labels)
    for (char ch : l)
      if (order.find(ch) == std::string::npos) order += ch;
  if (order.size() > static_cast<size_t>(Shape::kMaxRank))
    c.unsupported(fmt::format("the equation has {} distinct indices; kiln's tensors have at most {} axes", order.size(),
                              Shape::kMaxRank));
  Tensor acc;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& l = labels[i];
    Axes perm;
    std::vector<int64_t> dims;
    for (char ch : order) {
      const size_t at = l.find(ch);
      if (at != std::string::npos) perm.push_back(static_cast<int64_t>(at));
    }
    Tensor t = ops[i].permute(perm);
    size_t next = 0;
    for (char ch : order) dims.push_back(l.find(ch) != std::string::npos ? t.size(static_cast<int64_t>(next++)) : 1);
    t = t.reshape(dims);
    acc = acc.defined() ? acc * t : t;
  }
  Axes summed;
  for (size_t k = out.size(); k < order.size(); ++k) summed.push_back(static_cast<int64_t>(k));
  return {summed.empty() ? acc : acc.sum(summed)};
}

constexpr std::string_view kGemm[] = {"alpha", "beta", "transA", "transB", "broadcast"};
constexpr std::string_view kBatchNorm[] = {"epsilon", "momentum", "training_mode", "is_test", "spatial"};
constexpr std::string_view kLayerNorm[] = {"axis", "epsilon", "stash_type"};
constexpr std::string_view kEpsilon[] = {"epsilon"};
constexpr std::string_view kGroupNorm[] = {"epsilon", "num_groups", "stash_type"};
constexpr std::string_view kEquation[] = {"equation"};
constexpr std::string_view kAxes[] = {"axes"};

}  // namespace

const ConverterRow kNnRows[] = {
    {"MatMul", 1, 13, MatMul, {}},
    {"Einsum", 12, 28, Einsum, kEquation},
    {"Gemm", 6, 13, Gemm, kGemm},
    {"BatchNormalization", 6, 15, BatchNormalization, kBatchNorm},
    {"LayerNormalization", 17, 17, LayerNormalization, kLayerNorm},
    {"InstanceNormalization", 6, 22, InstanceNormalization, kEpsilon},
    {"GroupNormalization", 18, 21, GroupNormalization, kGroupNorm},
    {"MeanVarianceNormalization", 9, 13, MeanVarianceNormalization, kAxes},
};
const std::span<const ConverterRow> nn_rows = kNnRows;

}  // namespace kiln::onnx::detail
