// onnx/ops_reduce.cpp - reductions, arg-reductions and the softmax family.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "ops.h"

namespace kiln::onnx::detail {

namespace {

// The axes a Reduce* node reduces: from its `axes` attribute, or its second input (ReduceSum
// from version 13, the other Reduce* from version 18); none means every axis unless
// noop_with_empty_axes says otherwise. Returns nullopt for "reduce nothing".
std::optional<Axes> reduce_axes(NodeContext& c, int64_t rank) {
  std::vector<int64_t> axes;
  const bool axes_input = c.version() >= (c.node().op_type() == "ReduceSum" ? 13 : 18);
  if (axes_input) {
    if (c.has_attr("axes")) c.invalid("its axes are an input from this version on, not an attribute");
    if (c.has_input(1)) axes = c.ints(1, "axes");
  } else if (auto a = c.attr_ints_opt("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = normalize_axis(c, a, rank, "axis");
  return axes;
}

enum class Reduction { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

template <Reduction R>
std::vector<Tensor> reduce(NodeContext& c) {
  Tensor x = c.input(0);
  const bool keep = c.attr_int("keepdims", 1) != 0;
  const auto axes = reduce_axes(c, x.rank());
  if (!axes) return {x};
  if (x.dtype() == DType::Bool) c.unsupported(fmt::format("{} of bool is not supported", c.node().op_type()));
  auto back = [&](Tensor t) { return t.dtype() == x.dtype() ? t : t.to(x.dtype()); };
  if (R == Reduction::Max || R == Reduction::Min) {
    // From version 18 the max of an empty set is the type's lowest value (-inf), the min its
    // highest; kiln's max and min refuse empty axes, so the result is that constant.
    bool empty = false;
    for (int64_t a : *axes) empty = empty || x.size(a) == 0;
    if (empty && c.version() >= 18) {
      if (!is_float(x.dtype())) c.unsupported("the max or min of an empty set of integers is not supported");
      std::vector<int64_t> dims = dims_of(x.shape());
      for (int64_t a : *axes) dims[static_cast<size_t>(a)] = 1;
      Tensor out = c.scalar(R == Reduction::Max ? -INFINITY : INFINITY, x.dtype()).expand(dims);
      if (!keep) {
        std::vector<int64_t> kept;
        for (int64_t d = 0; d < x.rank(); ++d)
          if (std::find(axes->begin(), axes->end(), d) == axes->end()) kept.push_back(x.size(d));
        out = out.reshape(kept);
      }
      return {out};
    }
  }
  switch (R) {
    case Reduction::Sum: return {x.sum(*axes, keep)};
    case Reduction::Mean: return {back(x.mean(*axes, keep))};
    case Reduction::Max: return {x.max(*axes, keep)};
    case Reduction::Min: return {x.min(*axes, keep)};
    case Reduction::Prod: return {x.prod(*axes, keep)};
    case Reduction::L1: return {x.abs().sum(*axes, keep)};
    case Reduction::L2: return {back((x * x).sum(*axes, keep).to(is_float(x.dtype()) ? x.dtype() : DType::F64).sqrt())};
    case Reduction::LogSum: return {x.sum(*axes, keep).log()};
    case Reduction::LogSumExp: return {x.exp().sum(*axes, keep).log()};
    case Reduction::SumSquare: return {(x * x).sum(*axes, keep)};
  }
  return {};
}

template <bool IsMax>
std::vector<Tensor> arg_reduce(NodeContext& c) {
  Tensor x = c.input(0);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.rank(), "axis");
  const bool keep = c.attr_int("keepdims", 1) != 0;
  if (c.attr_int("select_last_index", 0) == 0) return {IsMax ? x.argmax(axis, keep) : x.argmin(axis, keep)};
  // The last index where x reaches its extreme (a NaN, where the extreme is NaN: kiln's
  // arg-reductions pick NaN as the extreme, as NumPy does).
  const Tensor m = IsMax ? x.max({axis}, true) : x.min({axis}, true);
  const Tensor hit = x.eq(m).logical_or(x.ne(x).logical_and(m.ne(m)));
  const Tensor idx = positions_along(c, x.size(axis), axis, x.rank());
  return {where(hit, idx, c.scalar(-1, DType::I64)).max({axis}, keep)};
}

// kiln's cumsum, in the input's type (kiln sums narrow integers in i64; the cast back wraps
// as a sum in the narrow type would).
std::vector<Tensor> CumSum(NodeContext& c) {
  Tensor x = c.input(0);
  const auto axis_v = c.ints(1, "axis");
  if (axis_v.size() != 1) c.invalid("its axis must hold one value");
  const int64_t axis = normalize_axis(c, axis_v[0], x.rank(), "axis");
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  const Tensor sums = x.cumsum(axis, exclusive, reverse);
  return {sums.dtype() == x.dtype() ? sums : sums.to(x.dtype())};
}

// Before opset 13 the softmax family works on the input seen as 2-D: dims before `axis`
// flattened into rows, the rest into one row each.
template <class F>
Tensor over_axis(NodeContext& c, const Tensor& x, F f) {
  if (c.version() >= 13) return f(x, normalize_axis(c, c.attr_int("axis", -1), x.rank(), "axis"));
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 1), x.rank(), "axis");
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= x.size(d);
  const int64_t cols = rows == 0 ? 0 : x.numel() / std::max<int64_t>(rows, 1);
  return f(x.reshape({rows, cols}), 1).reshape(dims_of(x.shape()));
}

std::vector<Tensor> Softmax(NodeContext& c) {
  return {rounded_once(c.input(0), [&](const Tensor& x) {
    return over_axis(c, x, [](const Tensor& t, int64_t a) { return t.softmax(a); });
  })};
}
std::vector<Tensor> LogSoftmax(NodeContext& c) {
  return {rounded_once(c.input(0), [&](const Tensor& x) {
    return over_axis(c, x, [](const Tensor& t, int64_t a) { return t.log_softmax(a); });
  })};
}
// 1 at the first maximum along the axis, 0 elsewhere.
std::vector<Tensor> Hardmax(NodeContext& c) {
  return {over_axis(c, c.input(0), [&](const Tensor& t, int64_t a) {
    return positions_along(c, t.size(a), a, t.rank()).eq(t.argmax(a, true)).to(t.dtype());
  })};
}

template <bool IsMax>
std::vector<Tensor> global_pool(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3) c.invalid(fmt::format("its input must be [N, C, spatial...], got rank {}", x.rank()));
  Axes axes;
  for (int64_t d = 2; d < x.rank(); ++d) axes.push_back(d);
  return {IsMax ? x.max(axes, true) : x.mean(axes, true)};
}

constexpr std::string_view kReduce[] = {"axes", "keepdims", "noop_with_empty_axes"};
constexpr std::string_view kArg[] = {"axis", "keepdims", "select_last_index"};
constexpr std::string_view kAxis[] = {"axis"};
constexpr std::string_view kCumSum[] = {"exclusive", "reverse"};

}  // namespace

const ConverterRow kReduceRows[] = {
    {"ReduceSum", 1, 13, reduce<Reduction::Sum>, kReduce},
    {"ReduceMean", 1, 18, reduce<Reduction::Mean>, kReduce},
    {"ReduceMax", 1, 20, reduce<Reduction::Max>, kReduce},
    {"ReduceMin", 1, 20, reduce<Reduction::Min>, kReduce},
    {"ReduceProd", 1, 18, reduce<Reduction::Prod>, kReduce},
    {"ReduceL1", 1, 18, reduce<Reduction::L1>, kReduce},
    {"ReduceL2", 1, 18, reduce<Reduction::L2>, kReduce},
    {"ReduceLogSum", 1, 28, reduce<Reduction::LogSum>, kReduce},
    {"ReduceLogSumExp", 1, 28, reduce<Reduction::LogSumExp>, kReduce},
    {"ReduceSumSquare", 1, 18, reduce<Reduction::SumSquare>, kReduce},
    {"ArgMax", 1, 13, arg_reduce<true>, kArg},
    {"ArgMin", 1, 13, arg_reduce<false>, kArg},
    {"CumSum", 11, 14, CumSum, kCumSum},
    {"Softmax", 1, 13, Softmax, kAxis},
    {"LogSoftmax", 1, 13, LogSoftmax, kAxis},
    {"Hardmax", 1, 13, Hardmax, kAxis},
    {"GlobalAveragePool", 1, 22, global_pool<false>, {}},
    {"GlobalMaxPool", 1, 22, global_pool<true>, {}},
};
const std::span<const ConverterRow> reduce_rows = kReduceRows;

}  // namespace kiln::onnx::detail
