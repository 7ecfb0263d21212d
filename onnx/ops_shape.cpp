// onnx/ops_shape.cpp - shapes, constants and movement: views of their input in kiln.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "ops.h"

namespace kiln::onnx::detail {
namespace {

HostTensor i64_vector(const std::vector<int64_t>& v) { return HostTensor::from_vector(v, Shape{static_cast<int64_t>(v.size())}); }

std::vector<Tensor> Constant(NodeContext& c) {
  if (c.has_attr("value")) return {c.known(c.attr_tensor("value"))};
  if (c.has_attr("value_float")) return {c.known(HostTensor::from_vector(std::vector<float>{static_cast<float>(c.attr_float("value_float"))}, Shape{}))};
  if (c.has_attr("value_int")) return {c.known(HostTensor::from_vector(std::vector<int64_t>{c.attr_int("value_int")}, Shape{}))};
  if (c.has_attr("value_ints")) return {c.known(i64_vector(c.attr_ints("value_ints")))};
  c.unsupported("Constant needs one of value, value_float, value_int, value_ints");
}

std::vector<Tensor> ShapeOp(NodeContext& c) {
  const Shape s = c.shape(0);
  const int64_t rank = s.rank();
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return {c.known(i64_vector(std::vector<int64_t>(s.begin() + start, s.begin() + end)))};
}

std::vector<Tensor> Size(NodeContext& c) {
  return {c.known(HostTensor::from_vector(std::vector<int64_t>{c.shape(0).numel()}, Shape{}))};
}

std::vector<Tensor> ConstantOfShape(NodeContext& c) {
  const std::vector<int64_t> dims = c.ints(0, "shape");
  HostTensor fill = c.has_attr("value") ? c.attr_tensor("value") : HostTensor::from_vector(std::vector<float>{0.f}, Shape{1});
  if (fill.numel() != 1) c.invalid("its value must hold one element");
  HostTensor one(TensorType{fill.dtype(), Shape{}});
  if (is_float(fill.dtype())) one.set_double(0, fill.get_double(0));
  else one.set_int(0, fill.get_int(0));
  Tensor v = kiln::constant(one, c.device());
  return {v.expand(dims)};
}

// The most elements of a Range computed while importing (its values become a constant).
constexpr int64_t kMaxRangeElements = int64_t{1} << 24;

// Range's output length depends on its inputs' values, so they must be known.
std::vector<Tensor> Range(NodeContext& c) {
  const HostTensor &s = c.value(0, "start"), &l = c.value(1, "limit"), &d = c.value(2, "delta");
  const DType t = s.dtype();
  HostTensor out;
  // The length, from values a file gives, checked before it becomes an integer and before the
  // values are laid out in host memory while importing.
  auto length = [&](double n) {
    if (!(n < static_cast<double>(kMaxRangeElements) + 1))
      c.unsupported(fmt::format("its {} elements are more than the {} kiln computes while importing", n,
                                kMaxRangeElements));
    return std::max<int64_t>(0, static_cast<int64_t>(n));
  };
  if (is_float(t)) {
    const double start = s.get_double(0), limit = l.get_double(0), delta = d.get_double(0);
    if (delta == 0) c.invalid("its delta is 0");
    const double n = std::ceil((limit - start) / delta);
    if (std::isnan(n)) c.invalid(fmt::format("from {} to {} by {} has no length", start, limit, delta));
    out = HostTensor(TensorType{t, Shape{length(n)}});
    for (int64_t i = 0; i < out.numel(); ++i) out.set_double(i, start + static_cast<double>(i) * delta);
  } else {
    const int64_t start = s.get_int(0), limit = l.get_int(0), delta = d.get_int(0);
    if (delta == 0) c.invalid("its delta is 0");
    // ceil((limit - start) / delta) without overflow: a difference past int64 is a length
    // past any bound.
    int64_t diff = 0;
    if (__builtin_sub_overflow(limit, start, &diff)) length(0x1p63);
    const int64_t steps = delta > 0 ? (diff <= 0 ? 0 : (diff - 1) / delta + 1) : (diff >= 0 ? 0 : (diff + 1) / delta + 1);
    const int64_t n = length(static_cast<double>(steps));
    out = HostTensor(TensorType{t, Shape{n}});
    for (int64_t i = 0; i < n; ++i) out.set_int(i, start + i * delta);
  }
  return {c.known(std::move(out))};
}

std::vector<Tensor> Reshape(NodeContext& c) {
  Tensor x = c.input(0);
  std::vector<int64_t> shape = c.version() >= 5 ? c.ints(1, "shape") : c.attr_ints("shape");
  const bool allow_zero = c.attr_int("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= x.rank()) c.invalid(fmt::format("shape[{}] = 0 copies a dim the input lacks", i));
      shape[i] = x.size(static_cast<int64_t>(i));
    }
  }
  return {x.reshape(shape)};
}

std::vector<Tensor> Flatten(NodeContext& c) {
  Tensor x = c.input(0);
  const int64_t axis = c.attr_int("axis", 1);
  const int64_t a = axis < 0 ? axis + x.rank() : axis;
  if (a < 0 || a > x.rank()) c.invalid(fmt::format("axis {} is out of range for rank {}", axis, x.rank()));
  int64_t rows = 1;
  for (int64_t d = 0; d < a; ++d) rows *= x.size(d);
  int64_t cols = 1;
  for (int64_t d = a; d < x.rank(); ++d) cols *= x.size(d);
  return {x.reshape({rows, cols})};
}

std::vector<Tensor> Transpose(NodeContext& c) {
  Tensor x = c.input(0);
  Axes perm(static_cast<size_t>(x.rank()));
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = c.attr_ints_opt("perm")) perm = *p;
  return {x.permute(perm)};
}

std::vector<int64_t> axes_of(NodeContext& c, int64_t rank, bool required) {
  std::vector<int64_t> axes;
  if (c.version() >= 13) {
    if (c.has_input(1)) axes = c.ints(1, "axes");
    else if (required) c.invalid("input 1 (axes) is required");
  } else {
    axes = c.attr_ints("axes", required ? std::nullopt : std::optional<std::vector<int64_t>>(std::vector<int64_t>{}));
  }
  for (int64_t& a : axes) a = normalize_axis(c, a, rank, "axis");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.invalid("its axes repeat");
  return axes;
}

std::vector<Tensor> Squeeze(NodeContext& c) {
  Tensor x = c.input(0);
  const std::vector<int64_t> axes = axes_of(c, x.rank(), false);
  if (axes.empty()) return {x.squeeze()};
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = x.squeeze(*it);
  return {x};
}

std::vector<Tensor> Unsqueeze(NodeContext& c) {
  Tensor x = c.input(0);
  const int64_t out_rank = x.rank() + static_cast<int64_t>(c.version() >= 13 ? c.shape(1).numel()
                                                                           : static_cast<int64_t>(c.attr_ints("axes").size()));
  for (int64_t a : axes_of(c, out_rank, true)) x = x.unsqueeze(a);
  return {x};
}

// ONNX's Expand broadcasts both ways: the result has the broadcast of both shapes.
std::vector<Tensor> Expand(NodeContext& c) {
  Tensor x = c.input(0);
  const std::vector<int64_t> want = c.ints(1, "shape");
  for (int64_t d : want)
    if (d < 0) c.invalid(fmt::format("its shape has the negative dim {}", d));
  const auto b = broadcast_shapes(x.shape(), Shape(std::span<const int64_t>(want)));
  if (!b) c.invalid(fmt::format("shape {} does not broadcast with the input's {}", Shape(std::span<const int64_t>(want)).str(),
                                x.shape().str()));
  return {x.expand(dims_of(*b))};
}

std::vector<Tensor> Concat(NodeContext& c) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) parts.push_back(c.input(i));
  const int64_t axis = normalize_axis(c, c.attr_int("axis"), parts.front().rank(), "axis");
  // kiln's concat takes no empty operand along the axis; ONNX allows them.
  std::vector<Tensor> nonempty;
  for (const Tensor& p : parts)
    if (p.size(axis) != 0) nonempty.push_back(p);
  if (nonempty.empty()) return {parts.front()};
  return {nonempty.size() == 1 ? nonempty.front() : kiln::cat(nonempty, axis)};
}

std::vector<Tensor> Slice(NodeContext& c) {
  Tensor x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.version() >= 10) {
    starts = c.ints(1, "starts");
    ends = c.ints(2, "ends");
    if (c.has_input(3)) axes = c.ints(3, "axes");
    if (c.has_input(4)) steps = c.ints(4, "steps");
  } else {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes", std::vector<int64_t>{});
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.invalid("its starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = normalize_axis(c, axes[i], x.rank(), "axis");
    if (steps[i] == 0) c.invalid("a step is 0");
    const int64_t n = x.size(axis);
    // ONNX clamps like Python, with INT64_MAX/MIN standing for "to the end"; walking down,
    // starts clamp to [0, n - 1] and ends to [-1, n - 1] (-1: through index 0).
    auto shifted = [n](int64_t v) { return v < 0 ? std::max<int64_t>(v, -n - 1) + n : v; };
    if (steps[i] > 0) {
      const int64_t start = std::clamp<int64_t>(shifted(starts[i]), 0, n);
      const int64_t end = std::clamp<int64_t>(shifted(ends[i]), 0, n);
      x = x.slice(axis, start, std::max(start, end), steps[i]);
    } else {
      const int64_t start = std::clamp<int64_t>(shifted(starts[i]), -1, n - 1);
      const int64_t end = std::clamp<int64_t>(shifted(ends[i]), -1, n - 1);
      // The frontend reads -1 as the last index, as Python does: -n - 1 is "past index 0".
      x = x.slice(axis, start, end < 0 ? -n - 1 : end, steps[i]);
    }
  }
  return {x};
}

// The most copies of an axis that wrap padding lays around it.
constexpr int64_t kMaxWrapCopies = 4096;

std::vector<Tensor> Pad(NodeContext& c) {
  Tensor x = c.input(0);
  const std::string mode = c.attr_string("mode", "constant");
  const bool wrap_allowed = c.version() >= 19;
  if (mode != "constant" && mode != "edge" && mode != "reflect" && !(mode == "wrap" && wrap_allowed))
    c.invalid(fmt::format("mode '{}' is none of constant, reflect, edge{}", mode, wrap_allowed ? ", wrap" : ""));
  std::vector<int64_t> pads;
  double value = 0;
  if (c.version() >= 11) {
    pads = c.ints(1, "pads");
    if (c.has_input(2)) {
      const HostTensor& v = c.value(2, "constant_value");
      value = is_float(v.dtype()) ? v.get_double(0) : static_cast<double>(v.get_int(0));
    }
  } else {
    pads = c.attr_ints("pads");
    value = c.attr_float("value", 0.0);
  }
  const auto rank = static_cast<size_t>(x.rank());
  if (c.version() >= 18 && c.has_input(3)) {
    // Pad-18's axes: the pads name only these axes (begins, then ends); the others get 0.
    const std::vector<int64_t> axes = c.ints(3, "axes");
    if (pads.size() != 2 * axes.size()) c.invalid(fmt::format("it has {} pads for {} axes", pads.size(), axes.size()));
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto d = static_cast<size_t>(normalize_axis(c, axes[k], x.rank(), "axis"));
      full[d] = pads[k];
      full[d + rank] = pads[k + axes.size()];
    }
    pads = std::move(full);
  }
  if (pads.size() != 2 * rank) c.invalid(fmt::format("it has {} pads for rank {}", pads.size(), rank));
  std::vector<int64_t> low(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank)),
      high(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  // Negative pads crop.
  for (size_t d = 0; d < rank; ++d) {
    const auto a = static_cast<int64_t>(d);
    if (low[d] < 0 || high[d] < 0) {
      // -INT64_MIN has no int64: any crop that deep is past every axis anyway.
      auto crop = [](int64_t pad) { return pad >= 0 ? 0 : pad == INT64_MIN ? INT64_MAX : -pad; };
      const int64_t from = crop(low[d]), cut = crop(high[d]), n = x.size(a);
      if (from > n || cut > n - from)
        c.invalid(fmt::format("pads {} and {} crop more than the {} elements of axis {}", low[d], high[d], n, d));
      x = x.slice(a, from, n - cut);
      low[d] = std::max<int64_t>(0, low[d]);
      high[d] = std::max<int64_t>(0, high[d]);
    }
  }
  if (mode == "constant") {
    const Number fill = is_float(x.dtype()) ? Number(value) : Number(static_cast<int64_t>(value));
    return {x.pad(low, high, fill)};
  }
  // edge repeats the border element; reflect mirrors the elements next to it; wrap
  // continues periodically (the copies of the axis around it, sliced).
  for (size_t d = 0; d < rank; ++d) {
    const auto a = static_cast<int64_t>(d);
    const int64_t n = x.size(a);
    if (low[d] == 0 && high[d] == 0) continue;
    if (n == 0) c.invalid(fmt::format("axis {} is empty: there is nothing to {}", d, mode));
    if (mode == "wrap") {
      // Copies of the axis around it: as many as the pads ask for, which a file only claims.
      const int64_t before = low[d] / n + (low[d] % n != 0), after = high[d] / n + (high[d] % n != 0);
      if (before > kMaxWrapCopies || after > kMaxWrapCopies)
        c.unsupported(fmt::format("wrap pads of {} and {} around axis {} of {} elements take more than {} copies of it",
                                  low[d], high[d], d, n, kMaxWrapCopies));
      const std::vector<Tensor> copies(static_cast<size_t>(before + 1 + after), x);
      const int64_t start = before * n - low[d];
      x = kiln::cat(copies, a).slice(a, start, start + low[d] + n + high[d]);
      continue;
    }
    if (mode == "reflect" && (low[d] > n - 1 || high[d] > n - 1))
      c.invalid(fmt::format("reflect pads of {} and {} exceed axis {} of {} elements less one", low[d], high[d], d, n));
    std::vector<Tensor> parts;
    auto edge = [&](int64_t at, int64_t count) {
      std::vector<int64_t> dims = dims_of(x.shape());
      dims[d] = count;
      return x.slice(a, at, at + 1).expand(dims);
    };
    if (low[d] > 0) {
      if (mode == "edge") parts.push_back(edge(0, low[d]));
      else for (int64_t i = low[d]; i >= 1; --i) parts.push_back(x.slice(a, i, i + 1));
    }
    parts.push_back(x);
    if (high[d] > 0) {
      if (mode == "edge") parts.push_back(edge(n - 1, high[d]));
      else for (int64_t i = n - 2; i >= n - 1 - high[d]; --i) parts.push_back(x.slice(a, i, i + 1));
    }
    x = kiln::cat(parts, a);
  }
  return {x};
}

std::vector<Tensor> Tile(NodeContext& c) {
  Tensor x = c.input(0);
  const std::vector<int64_t> reps = c.ints(1, "repeats");
  if (static_cast<int64_t>(reps.size()) != x.rank()) c.invalid("its repeats do not match the input's rank");
  // [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] -> [r0*d0, r1*d1]
  std::vector<int64_t> split, expanded, merged;
  for (int64_t d = 0; d < x.rank(); ++d) {
    split.insert(split.end(), {1, x.size(d)});
    expanded.insert(expanded.end(), {reps[static_cast<size_t>(d)], x.size(d)});
    int64_t tiled = 0;
    if (reps[static_cast<size_t>(d)] < 0 || __builtin_mul_overflow(reps[static_cast<size_t>(d)], x.size(d), &tiled))
      c.invalid(fmt::format("{} repeats of axis {} of {} elements are no size", reps[static_cast<size_t>(d)], d,
                            x.size(d)));
    merged.push_back(tiled);
  }
  return {x.reshape(split).expand(expanded).reshape(merged)};
}

std::vector<Tensor> Split(NodeContext& c) {
  Tensor x = c.input(0);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.rank(), "axis");
  std::vector<int64_t> sizes;
  if (c.version() >= 13) {
    if (c.has_input(1)) sizes = c.ints(1, "split");
  } else {
    sizes = c.attr_ints("split", std::vector<int64_t>{});
  }
  const int64_t n = x.size(axis);
  const auto parts = static_cast<int64_t>(c.node().output_size());
  if (c.version() >= 18 && c.has_attr("num_outputs")) {
    // Split-18: num_outputs parts of ceil(n / num_outputs), the last one smaller.
    const int64_t k = c.attr_int("num_outputs");
    if (!sizes.empty()) c.invalid("it has both a split input and num_outputs");
    if (k != parts) c.invalid(fmt::format("num_outputs is {}, but it has {} outputs", k, parts));
    if (k < 1 || k > std::max<int64_t>(n, 1)) c.invalid(fmt::format("{} elements do not split into {} parts", n, k));
    const int64_t each = (n + k - 1) / k;
    for (int64_t at = 0; at < n; at += each) sizes.push_back(std::min(each, n - at));
    if (static_cast<int64_t>(sizes.size()) != k)
      c.invalid(fmt::format("{} elements in parts of {} do not make {} parts", n, each, k));
  }
  if (sizes.empty()) {
    if (parts == 0 || n % parts != 0) c.invalid(fmt::format("{} elements do not split into {} equal parts", n, parts));
    sizes.assign(static_cast<size_t>(parts), n / parts);
  }
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != n) c.invalid("its split sizes do not add up to the axis");
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.slice(axis, at, at + s));
    at += s;
  }
  return out;
}

// indices (any numeric type; negative ones count from depth) as one-hot vectors along a new
// `axis`, holding values[1] where hot and values[0] elsewhere.
std::vector<Tensor> OneHot(NodeContext& c) {
  Tensor idx = c.input(0);
  const HostTensor& depth_v = c.value(1, "depth");
  const auto depth = static_cast<int64_t>(is_float(depth_v.dtype()) ? depth_v.get_double(0) : static_cast<double>(depth_v.get_int(0)));
  if (depth < 1) c.invalid(fmt::format("its depth {} is not positive", depth));
  Tensor values = c.input(2);
  if (values.numel() != 2) c.invalid("its values must hold [off, on]");
  values = values.reshape({2});
  const int64_t rank = idx.rank() + 1;
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), rank, "axis");
  if (idx.dtype() != DType::I64) idx = idx.to(DType::I64);
  idx = where(idx.lt(c.scalar(0, DType::I64)), idx + c.scalar(static_cast<double>(depth), DType::I64), idx);
  const Tensor hot = idx.unsqueeze(axis).eq(positions_along(c, depth, axis, rank));
  return {where(hot, values.slice(0, 1, 2).reshape({}), values.slice(0, 0, 1).reshape({}))};
}

// col - row for every element of a rows x cols matrix: diagonal k is where it equals k.
Tensor diagonal_index(NodeContext& c, int64_t rows, int64_t cols) {
  return kiln::arange(cols, DType::I64, c.device()).reshape({1, cols}) -
         kiln::arange(rows, DType::I64, c.device()).reshape({rows, 1});
}

std::vector<Tensor> Trilu(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 2) c.invalid("its input must have rank 2 or more");
  const int64_t k = c.has_input(1) ? c.ints(1, "k").at(0) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const Tensor d = diagonal_index(c, x.size(-2), x.size(-1)), kk = c.scalar(static_cast<double>(k), DType::I64);
  return {where(upper ? d.ge(kk) : d.le(kk), x, c.scalar_like(0, x))};
}

std::vector<Tensor> EyeLike(NodeContext& c) {
  const Shape s = c.shape(0);
  if (s.rank() != 2) c.invalid("its input must be 2-D");
  const DType t = c.has_attr("dtype") ? dtype_from_onnx(static_cast<int>(c.attr_int("dtype")), "EyeLike's dtype") : c.dtype(0);
  const int64_t k = c.attr_int("k", 0);
  return {diagonal_index(c, s[0], s[1]).eq(c.scalar(static_cast<double>(k), DType::I64)).to(t)};
}

// HannWindow, HammingWindow and BlackmanWindow: sum_k a_k cos(2 pi k n / N') over n < size,
// N' = size (periodic) or size - 1 (symmetric), computed in double while importing; the
// size must be known then (a model input fixed with input_values).
std::vector<Tensor> cosine_window(NodeContext& c, std::vector<double> a) {
  const std::vector<int64_t> size = c.ints(0, "size");
  if (size.size() != 1 || size[0] < 0) c.invalid("its size must be one non-negative integer");
  const int64_t n = size[0];
  const DType t = dtype_from_onnx(static_cast<int>(c.attr_int("output_datatype", 1)), "the window's output_datatype");
  const double denominator = static_cast<double>(c.attr_int("periodic", 1) != 0 ? n : n - 1);
  HostTensor w(TensorType{t, Shape{n}});
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k)
      v += (k % 2 ? -a[k] : a[k]) * std::cos(2 * M_PI * static_cast<double>(k * static_cast<size_t>(i)) / denominator);
    if (is_float(t)) w.set_double(i, v);
    else w.set_int(i, static_cast<int64_t>(v));
  }
  return {c.known(std::move(w))};
}
std::vector<Tensor> HannWindow(NodeContext& c) { return cosine_window(c, {0.5, 0.5}); }
std::vector<Tensor> HammingWindow(NodeContext& c) { return cosine_window(c, {25.0 / 46, 21.0 / 46}); }
std::vector<Tensor> BlackmanWindow(NodeContext& c) { return cosine_window(c, {0.42, 0.5, 0.08}); }

// DepthToSpace and SpaceToDepth: a reshape, a permutation and a reshape.
std::vector<Tensor> DepthToSpace(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() != 4) c.invalid("its input must be [N, C, H, W]");
  const int64_t b = c.attr_int("blocksize"), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  if (b <= 0 || ch % (b * b) != 0) c.invalid(fmt::format("C = {} is not a multiple of blocksize^2", ch));
  const std::string mode = c.attr_string("mode", "DCR");
  if (mode == "DCR")
    return {x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2}).reshape({n, ch / (b * b), h * b, w * b})};
  if (mode == "CRD")
    return {x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3}).reshape({n, ch / (b * b), h * b, w * b})};
  c.invalid(fmt::format("mode '{}' is neither DCR nor CRD", mode));
}

std::vector<Tensor> SpaceToDepth(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() != 4) c.invalid("its input must be [N, C, H, W]");
  const int64_t b = c.attr_int("blocksize"), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  if (b <= 0 || h % b != 0 || w % b != 0) c.invalid("H and W must be multiples of blocksize");
  return {x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, ch * b * b, h / b, w / b})};
}

constexpr std::string_view kConstant[] = {"value", "value_float", "value_int", "value_ints"};
constexpr std::string_view kShape[] = {"start", "end"};
constexpr std::string_view kValue[] = {"value"};
constexpr std::string_view kReshape[] = {"allowzero", "shape"};
constexpr std::string_view kAxis[] = {"axis"};
constexpr std::string_view kPerm[] = {"perm"};
constexpr std::string_view kAxes[] = {"axes"};
constexpr std::string_view kSlice[] = {"starts", "ends", "axes"};
constexpr std::string_view kPad[] = {"mode", "pads", "value"};
constexpr std::string_view kSplit[] = {"axis", "split", "num_outputs"};
constexpr std::string_view kTrilu[] = {"upper"};
constexpr std::string_view kEyeLike[] = {"dtype", "k"};
constexpr std::string_view kBlock[] = {"blocksize", "mode"};
constexpr std::string_view kWindow[] = {"output_datatype", "periodic"};

}  // namespace

const ConverterRow kShapeRows[] = {
    {"Constant", 1, 25, Constant, kConstant},
    {"Shape", 1, 25, ShapeOp, kShape},
    {"Size", 1, 25, Size, {}},
    {"ConstantOfShape", 9, 25, ConstantOfShape, kValue},
    {"Range", 11, 11, Range, {}},
    {"Reshape", 1, 25, Reshape, kReshape},
    {"Flatten", 1, 25, Flatten, kAxis},
    {"Transpose", 1, 25, Transpose, kPerm},
    {"Squeeze", 1, 25, Squeeze, kAxes},
    {"Unsqueeze", 1, 25, Unsqueeze, kAxes},
    {"Expand", 8, 13, Expand, {}},
    {"Concat", 4, 13, Concat, kAxis},
    {"Slice", 1, 13, Slice, kSlice},
    {"Pad", 2, 25, Pad, kPad},
    {"Tile", 6, 13, Tile, {}},
    {"Split", 2, 18, Split, kSplit},
    {"OneHot", 9, 28, OneHot, kAxis},
    {"Trilu", 14, 14, Trilu, kTrilu},
    {"EyeLike", 9, 22, EyeLike, kEyeLike},
    {"DepthToSpace", 1, 28, DepthToSpace, kBlock},
    {"SpaceToDepth", 1, 13, SpaceToDepth, kBlock},
    {"HannWindow", 17, 17, HannWindow, kWindow},
    {"HammingWindow", 17, 17, HammingWindow, kWindow},
    {"BlackmanWindow", 17, 17, BlackmanWindow, kWindow},
};
const std::span<const ConverterRow> shape_rows = kShapeRows;

}  // namespace kiln::onnx::detail
