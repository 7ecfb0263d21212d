// onnx/ops_pool.cpp - MaxPool, AveragePool, Conv and ConvTranspose over 1 to 3 spatial dims.
//
// The padded input is unfolded into its windows (a view: [N, C, o1..on, k1..kn]) that a
// pooling reduces over; a convolution is kiln's conv op (a GEMM whose packing gathers the
// windows; no im2col buffer). The average's divisor (how many elements of each window count) is the same
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

// The windows of a pooling or convolution: `kernel` (empty: the kernel_shape attribute),
// strides, dilations, pads and auto_pad, and the output size they give per spatial dim.
Window window_of(NodeContext& c, const Shape& x, std::vector<int64_t> kernel = {}) {
  const auto dims = static_cast<size_t>(x.rank() - 2);
  Window w;
  w.kernel = kernel.empty() ? c.attr_ints("kernel_shape") : std::move(kernel);
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

// Pads x's spatial dims (begin, end + what the last window reads past the end) with `fill`
// and unfolds each into its windows: [N, C, o1..on, k1..kn], a view of x.
Tensor windows(const Tensor& x, const Window& w, Number fill) {
  const auto dims = w.kernel.size();
  std::vector<int64_t> low(2, 0), high(2, 0);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t reach = (w.out[d] - 1) * w.strides[d] + (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t padded = x.size(static_cast<int64_t>(d + 2)) + w.pad_begin[d];
    low.push_back(w.pad_begin[d]);
    high.push_back(std::max<int64_t>(0, reach - padded));
  }
  Tensor v = x.pad(low, high, fill);
  for (size_t d = 0; d < dims; ++d) {
    const auto axis = static_cast<int64_t>(d + 2);
    v = v.unfold(axis, w.kernel[d], w.strides[d], w.dilations[d]).slice(axis, 0, w.out[d]);
  }
  return v;
}

// The sum (or max) of windows() over each window, reduced along window axes that come before
// the last output axis ([N, C, o1..o(n-1), k1..kn, on]): the kernel's innermost dim is then
// the output line, which its loops vectorize, summing the window's taps (rather than a short
// sum of kn elements per output element).
Tensor pool(const Tensor& v, const Window& w, bool max) {
  const auto n = static_cast<int64_t>(w.kernel.size());
  Axes perm = {0, 1}, axes;
  for (int64_t d = 0; d + 1 < n; ++d) perm.push_back(2 + d);
  for (int64_t d = 0; d < n; ++d) {
    perm.push_back(2 + n + d);
    axes.push_back(1 + n + d);
  }
  perm.push_back(1 + n);
  const Tensor t = v.permute(perm);
  return max ? t.max(axes) : t.sum(axes);
}

// The Indices output: where in x (flat over the whole tensor, padding not counted; spatial
// dims row-major, or column-major with storage_order 1) each window's first maximum is.
Tensor max_indices(NodeContext& c, const Tensor& x, const Window& w, const Tensor& v) {
  const auto dims = static_cast<int64_t>(w.kernel.size());
  const int64_t r = x.rank();
  std::vector<int64_t> flat(v.shape().begin(), v.shape().end() - dims);
  int64_t window = 1;
  for (int64_t k : w.kernel) window *= k;
  flat.push_back(window);
  const Tensor q = v.reshape(flat).argmax(-1);  // [N, C, o1..on]: the place in the window
  const bool column_major = c.attr_int("storage_order", 0) != 0;
  auto k64 = [&](int64_t n) { return c.scalar(static_cast<double>(n), DType::I64); };
  Tensor spatial = k64(0), inner = k64(1);
  int64_t after = 1;  // kernel elements after dim d in the window
  std::vector<Tensor> coord(static_cast<size_t>(dims));
  for (int64_t d = dims - 1; d >= 0; --d) {
    const auto dd = static_cast<size_t>(d);
    const Tensor a = (q / k64(after)).floor().to(DType::I64).remainder(k64(w.kernel[dd]));
    after *= w.kernel[dd];
    const Tensor o = positions_along(c, w.out[dd], d + 2, r);
    coord[dd] = o * k64(w.strides[dd]) + a * k64(w.dilations[dd]) - k64(w.pad_begin[dd]);
  }
  for (int64_t j = 0; j < dims; ++j) {  // the fastest dim last (row-major) or first (column-major)
    const int64_t d = column_major ? j : dims - 1 - j;
    spatial = spatial + coord[static_cast<size_t>(d)] * inner;
    inner = inner * k64(x.size(d + 2));
  }
  const Tensor nc = positions_along(c, x.size(0), 0, r) * k64(x.size(1)) + positions_along(c, x.size(1), 1, r);
  return nc * inner + spatial;
}

std::vector<Tensor> MaxPool(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3 || x.rank() > 5) c.invalid(fmt::format("its input must be [N, C, d1..dn] with n in 1..3, got {}", x.shape().str()));
  const Window w = window_of(c, x.shape());
  const Number lowest = is_float(x.dtype()) ? Number(-std::numeric_limits<double>::infinity()) : Number(int_min(x.dtype()));
  const Tensor v = windows(x, w, lowest);
  if (c.node().output_size() < 2 || c.node().output(1).empty()) return {pool(v, w, true)};
  return {pool(v, w, true), max_indices(c, x, w, v)};
}

std::vector<Tensor> AveragePool(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3 || x.rank() > 5) c.invalid(fmt::format("its input must be [N, C, d1..dn] with n in 1..3, got {}", x.shape().str()));
  if (!is_float(x.dtype())) c.invalid("its input must be float or double");
  const Window w = window_of(c, x.shape());
  const Tensor sums = pool(windows(x, w, 0), w, false);
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
  const Tensor counts = pool(windows(mask, mw, 0), w, false);
  return {sums / counts};
}

// y[n, m, o..] = sum over c, k.. of x_padded[n, c, o * stride + k * dilation] * w[m, c, k..]
// (+ b[m]), with `group` blocks of channels: kiln's conv op, which runs on the GEMM.
Tensor convolve(NodeContext& c, const Tensor& x, const Tensor& w, const Window& win, int64_t group) {
  const int64_t channels = x.size(1), m = w.size(0);
  if (group < 1 || channels % group != 0 || m % group != 0 || w.size(1) * group != channels)
    c.invalid(fmt::format("X {} and W {} do not make {} groups", x.shape().str(), w.shape().str(), group));
  ConvOptions o;
  o.strides = win.strides;
  o.dilations = win.dilations;
  o.pad_low = win.pad_begin;
  o.pad_high = win.pad_end;
  o.groups = group;
  return x.conv(w, o);
}

Tensor add_bias(NodeContext& c, const Tensor& y) {
  return c.has_input(2) ? y + along_axis(c.input(2), 1, y.rank()) : y;
}

// The window of a convolution of X by W: their ranks checked, the kernel W's spatial dims.
Window conv_window(NodeContext& c, const Tensor& x, const Tensor& w) {
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    c.invalid(fmt::format("X {} and W {} must be [N, C, d1..dn] and [M, C/group, k1..kn] with n in 1..3", x.shape().str(),
                          w.shape().str()));
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (auto given = c.attr_ints_opt("kernel_shape"); given && *given != kernel)
    c.invalid("kernel_shape differs from W's spatial dims");
  return window_of(c, x.shape(), kernel);
}

std::vector<Tensor> Conv(NodeContext& c) {
  Tensor x = c.input(0), w = c.input(1);
  const Window win = conv_window(c, x, w);
  if (!is_float(x.dtype()) || w.dtype() != x.dtype()) c.invalid("X and W must be float or double, of one type");
  return {add_bias(c, convolve(c, x, w, win, c.attr_int("group", 1)))};
}

// Quantized convolutions: X and W less their zero points (W's per output channel), convolved
// in i32, exactly. Padding pads the centered values with 0, so with the zero point itself.
Tensor centered_conv(NodeContext& c, size_t xi, size_t x_zero, size_t wi, size_t w_zero) {
  const Tensor x = c.input(xi), w = c.input(wi);
  const Window win = conv_window(c, x, w);
  require_quantized(c, x.dtype(), "X");
  require_quantized(c, w.dtype(), "W");
  Tensor xc = x.to(DType::I32), wc = w.to(DType::I32);
  if (c.has_input(x_zero)) xc = xc - c.input(x_zero).reshape({}).to(DType::I32);
  if (c.has_input(w_zero)) wc = wc - per_axis(c, c.input(w_zero), 0, w.rank(), "w_zero_point").to(DType::I32);
  return convolve(c, xc, wc, win, c.attr_int("group", 1)).to(DType::I32);
}

std::vector<Tensor> ConvInteger(NodeContext& c) { return {centered_conv(c, 0, 2, 1, 3)}; }

// y = quantize(conv(X - x_zero, W - w_zero) + B, x_scale * w_scale / y_scale, y_zero).
std::vector<Tensor> QLinearConv(NodeContext& c) {
  Tensor acc = centered_conv(c, 0, 2, 3, 5);
  if (c.has_input(8)) acc = acc + along_axis(c.input(8).to(DType::I32), 1, acc.rank());
  const Tensor scale =
      c.input(1).reshape({}) * per_axis(c, c.input(4), 1, acc.rank(), "w_scale") / c.input(6).reshape({});
  const Tensor zero = c.input(7);
  return {quantize(c, acc.to(DType::F32) * scale, zero.reshape({}), zero.dtype())};
}

// The gradient of a convolution with respect to its input: each input element spreads over
// the output through the kernel. Computed as the convolution of the input with `stride - 1`
// zeros between elements (a view: unsqueeze, pad, reshape, slice), padded by the kernel's
// reach less `pads`, with the kernel flipped and its two channel axes swapped.
std::vector<Tensor> ConvTranspose(NodeContext& c) {
  Tensor x = c.input(0), w = c.input(1);
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    c.invalid(fmt::format("X {} and W {} must be [N, C, d1..dn] and [C, M/group, k1..kn] with n in 1..3",
                          x.shape().str(), w.shape().str()));
  if (!is_float(x.dtype()) || w.dtype() != x.dtype()) c.invalid("X and W must be float or double, of one type");
  const auto dims = static_cast<size_t>(x.rank() - 2);
  const int64_t group = c.attr_int("group", 1), channels = x.size(1);
  if (group < 1 || channels % group != 0 || w.size(0) != channels)
    c.invalid(fmt::format("X {} and W {} do not make {} groups", x.shape().str(), w.shape().str(), group));
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  const auto strides = c.attr_ints("strides", std::vector<int64_t>(dims, 1));
  const auto dilations = c.attr_ints("dilations", std::vector<int64_t>(dims, 1));
  const auto out_pad = c.attr_ints("output_padding", std::vector<int64_t>(dims, 0));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (strides.size() != dims || dilations.size() != dims || out_pad.size() != dims || pads.size() != 2 * dims)
    c.invalid("strides, dilations, output_padding and pads must match the spatial dims");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::optional<std::vector<int64_t>> out_shape = c.attr_ints_opt("output_shape");
  if (out_shape && out_shape->size() != dims) c.invalid("output_shape must match the spatial dims");
  if (!out_shape && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    out_shape.emplace();
    for (size_t d = 0; d < dims; ++d) out_shape->push_back(x.size(static_cast<int64_t>(d + 2)) * strides[d]);
  }
  for (size_t d = 0; d < dims; ++d) {
    if (strides[d] < 1 || dilations[d] < 1) c.invalid("strides and dilations must be positive");
    if (out_shape) {
      const int64_t total = strides[d] * (x.size(static_cast<int64_t>(d + 2)) - 1) + out_pad[d] +
                            (kernel[d] - 1) * dilations[d] + 1 - (*out_shape)[d];
      // The spec's halves round down (Python's //): a total of -1 takes the extra from the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[d + dims] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[d + dims] = 0;
    }
  }
  // Zeros between the input's elements, then the kernel's reach as padding (negative: crop).
  Tensor z = x;
  std::vector<int64_t> low(2, 0), high(2, 0);
  for (size_t d = 0; d < dims; ++d) {
    const auto axis = static_cast<int64_t>(d + 2);
    const int64_t len = z.size(axis), s = strides[d];
    if (s > 1) {
      std::vector<int64_t> lo(static_cast<size_t>(z.rank() + 1), 0), hi(lo.size(), 0);
      hi[static_cast<size_t>(axis + 1)] = s - 1;
      std::vector<int64_t> merged = dims_of(z.shape());
      merged[static_cast<size_t>(axis)] = len * s;
      z = z.unsqueeze(axis + 1).pad(lo, hi, 0).reshape(merged).slice(axis, 0, (len - 1) * s + 1);
    }
    const int64_t reach = (kernel[d] - 1) * dilations[d];
    low.push_back(reach - pads[d]);
    high.push_back(reach - pads[d + dims] + out_pad[d]);
  }
  for (size_t d = 0; d < dims; ++d) {  // crop what the padding takes away
    const auto axis = static_cast<int64_t>(d + 2);
    if (low[d + 2] < 0 || high[d + 2] < 0) {
      z = z.slice(axis, std::max<int64_t>(0, -low[d + 2]), z.size(axis) - std::max<int64_t>(0, -high[d + 2]));
      low[d + 2] = std::max<int64_t>(0, low[d + 2]);
      high[d + 2] = std::max<int64_t>(0, high[d + 2]);
    }
  }
  z = z.pad(low, high, 0);
  // W [C, Mg, k..] -> [M, Cg, k..] flipped: per group, swap the channel axes.
  const int64_t mg = w.size(1), cg = channels / group;
  std::vector<int64_t> ws = {group, cg, mg};
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  Axes perm = {0, 2, 1};
  Axes spatial;
  for (size_t d = 0; d < dims; ++d) {
    perm.push_back(static_cast<int64_t>(d + 3));
    spatial.push_back(static_cast<int64_t>(d + 3));
  }
  std::vector<int64_t> wf = {group * mg, cg};
  wf.insert(wf.end(), kernel.begin(), kernel.end());
  const Tensor wt = w.reshape(ws).permute(perm).flip(spatial).reshape(wf);
  Window win;
  win.kernel = kernel;
  win.strides.assign(dims, 1);
  win.dilations = dilations;
  win.pad_begin.assign(dims, 0);
  win.pad_end.assign(dims, 0);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t out = z.size(static_cast<int64_t>(d + 2)) - (kernel[d] - 1) * dilations[d];
    if (out < 1) c.invalid("the output would be empty");
    win.out.push_back(out);
  }
  return {add_bias(c, convolve(c, z, wt, win, group))};
}

// Local response normalization across channels: each element divided by
// (bias + alpha / size * the sum of squares of the `size` channels around it)^beta, the
// window read through unfold over the channel axis padded with zeros.
std::vector<Tensor> LRN(NodeContext& c) {
  Tensor x = c.input(0);
  if (x.rank() < 3 || !is_float(x.dtype())) c.invalid("its input must be float [N, C, d1..dn]");
  const int64_t size = c.attr_int("size");
  if (size < 1) c.invalid("size must be positive");
  std::vector<int64_t> low(static_cast<size_t>(x.rank()), 0), high(low);
  low[1] = (size - 1) / 2;
  high[1] = size - 1 - low[1];
  const Tensor squares = (x * x).pad(low, high, 0).unfold(1, size, 1).sum({-1});
  const Tensor scale = c.scalar_like(c.attr_float("bias", 1.0), x) +
                       c.scalar_like(c.attr_float("alpha", 1e-4) / static_cast<double>(size), x) * squares;
  return {x / scale.pow(c.scalar_like(c.attr_float("beta", 0.75), x))};
}

constexpr std::string_view kMaxPool[] = {"kernel_shape", "strides", "pads", "auto_pad", "dilations", "ceil_mode",
                                          "storage_order"};
constexpr std::string_view kAveragePool[] = {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                                              "count_include_pad", "dilations"};  // dilations from version 19
constexpr std::string_view kLrn[] = {"alpha", "beta", "bias", "size"};
constexpr std::string_view kConv[] = {"kernel_shape", "strides", "pads", "auto_pad", "dilations", "group"};
constexpr std::string_view kConvTranspose[] = {"kernel_shape", "strides", "pads", "auto_pad", "dilations", "group",
                                                "output_padding", "output_shape"};

}  // namespace

const ConverterRow kPoolRows[] = {
    {"MaxPool", 1, 22, MaxPool, kMaxPool},
    {"AveragePool", 1, 22, AveragePool, kAveragePool},
    {"Conv", 1, 22, Conv, kConv},
    {"ConvInteger", 10, 10, ConvInteger, kConv},
    {"QLinearConv", 10, 10, QLinearConv, kConv},
    {"LRN", 1, 13, LRN, kLrn},
    {"ConvTranspose", 1, 22, ConvTranspose, kConvTranspose},
};
const std::span<const ConverterRow> pool_rows = kPoolRows;

}  // namespace kiln::onnx::detail
