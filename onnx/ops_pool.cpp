// onnx/ops_pool.cpp - MaxPool and AveragePool over 1 to 3 spatial dims.
//
// A window of k1 x ... x kn elements is kn strided slices of the padded input, one per
// offset in the window, reduced together: views and one reduction, which fuse into one
// kernel. The average's divisor (how many elements of each window count) is the same
// pooling of a 0/1 mask, computed while importing.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, out;
};

Window window_of(NodeContext& c, const Shape& x) {
  const auto dims = static_cast<size_t>(x.rank() - 2);
  Window w;
  w.kernel = c.attr_ints("kernel_shape");
  if (w.kernel.size() != dims)
    c.invalid(fmt::format("kernel_shape has {} dims for {} spatial dims", w.kernel.size(), dims));
  w.strides = c.attr_ints("strides", std::vector<int64_t>(dims, 1));
  w.dilations = c.attr_ints("dilations", std::vector<int64_t>(dims, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (w.strides.size() != dims || w.dilations.size() != dims || pads.size() != 2 * dims)
    c.invalid("strides, dilations and pads must match the spatial dims");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t size = x[static_cast<int>(d + 2)], k = w.kernel[d], s = w.strides[d], dil = w.dilations[d];
    if (k < 1 || s < 1 || dil < 1) c.invalid("kernel_shape, strides and dilations must be positive");
    const int64_t span = (k - 1) * dil + 1;
    int64_t begin = pads[d], end = pads[d + dims], out = 0;
    if (auto_pad == "NOTSET") {
      const int64_t room = size + begin + end - span;
      if (room < 0) c.invalid(fmt::format("the window ({}) is larger than the padded input ({})", span, size + begin + end));
      out = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
      // ceil_mode: a last window must start inside the input or its leading padding.
      if (ceil_mode && (out - 1) * s >= size + begin) --out;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
      out = (size - span + s) / s;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (size + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + span - size);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else {
      c.invalid(fmt::format("auto_pad '{}' is none of NOTSET, VALID, SAME_UPPER, SAME_LOWER", auto_pad));
    }
    if (out < 1) c.invalid("the output would be empty");
    w.pad_begin.push_back(begin);
    w.pad_end.push_back(end);
    w.out.push_back(out);
  }
  return w;
}

// Pads x's spatial dims (begin, end + what the last window reads past the end) with `fill`,
// then stacks the window's strided slices along a new last axis.
Tensor windows(const Tensor& x, const Window& w, Number fill) {
  const auto dims = w.kernel.size();
  std::vector<int64_t> low(2, 0), high(2, 0);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t reach = (w.out[d] - 1) * w.strides[d] + (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t padded = x.size(static_cast<int64_t>(d + 2)) + w.pad_begin[d];
    low.push_back(w.pad_begin[d]);
    high.push_back(std::max<int64_t>(0, reach - padded));
  }
  const Tensor p = x.pad(low, high, fill);
  std::vector<Tensor> parts;
  std::vector<int64_t> at(dims, 0);
  for (;;) {
    Tensor s = p;
    for (size_t d = 0; d < dims; ++d) {
      const int64_t start = at[d] * w.dilations[d];
      s = s.slice(static_cast<int64_t>(d + 2), start, start + (w.out[d] - 1) * w.strides[d] + 1, w.strides[d]);
    }
    parts.push_back(s.unsqueeze(-1));
    size_t d = dims;
    while (d > 0 && ++at[d - 1] == w.kernel[d - 1]) at[--d] = 0;
    if (d == 0) break;
  }
  return parts.size() == 1 ? parts.front() : kiln::cat(parts, -1);
}

std::vector<Tensor> MaxPool(NodeContext& c) {
  if (c.node().output_size() > 1 && !c.node().output(1).empty())
    c.unsupported("MaxPool's Indices output is not supported");
  if (c.attr_int("storage_order", 0) != 0) c.unsupported("storage_order = 1 is not supported");
  Tensor x = c.input(0);
  if (x.rank() < 3 || x.rank() > 5) c.invalid(fmt::format("its input must be [N, C, d1..dn] with n in 1..3, got {}", x.shape().str()));
  const Window w = window_of(c, x.shape());
  Number lowest = is_float(x.dtype()) ? Number(-std::numeric_limits<double>::infinity())
                  : x.dtype() == DType::I32 ? Number(std::numeric_limits<int32_t>::min())
                                            : Number(std::numeric_limits<int64_t>::min());
  return {windows(x, w, lowest).max({-1})};
}

std::vector<Tensor> AveragePool(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3 || x.rank() > 5) c.invalid(fmt::format("its input must be [N, C, d1..dn] with n in 1..3, got {}", x.shape().str()));
  if (!is_float(x.dtype())) c.invalid("its input must be float or double");
  const Window w = window_of(c, x.shape());
  const Tensor sums = windows(x, w, 0).sum({-1});
  // The mask: 1 where an element counts (the input, and its explicit padding when
  // count_include_pad), 0 where it does not (padding, what ceil_mode reads past the end).
  std::vector<int64_t> mask_shape = {1, 1};
  for (int64_t d = 2; d < x.rank(); ++d) mask_shape.push_back(x.size(d));
  Tensor mask = kiln::ones(Shape(std::span<const int64_t>(mask_shape)), x.dtype(), c.device());
  Window mw = w;
  if (c.attr_int("count_include_pad", 0) != 0) {
    std::vector<int64_t> low = {0, 0}, high = {0, 0};
    for (size_t d = 0; d < w.kernel.size(); ++d) {
      low.push_back(w.pad_begin[d]);
      high.push_back(w.pad_end[d]);
      mw.pad_begin[d] = 0;
    }
    mask = mask.pad(low, high, 1);
  }
  const Tensor counts = windows(mask, mw, 0).sum({-1});
  return {sums / counts};
}

constexpr std::string_view kMaxPool[] = {"kernel_shape", "strides", "pads", "auto_pad", "dilations", "ceil_mode",
                                          "storage_order"};
constexpr std::string_view kAveragePool[] = {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                                              "count_include_pad"};

}  // namespace

const ConverterRow kPoolRows[] = {
    {"MaxPool", 1, MaxPool, kMaxPool},
    {"AveragePool", 1, AveragePool, kAveragePool},
};
const std::span<const ConverterRow> pool_rows = kPoolRows;

}  // namespace kiln::onnx::detail
