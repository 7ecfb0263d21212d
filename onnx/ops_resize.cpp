// onnx/ops_resize.cpp - Resize (and the Upsample it replaced).
//
// Every mode of Resize is separable: along each axis an output element is a fixed
// combination of at most four input elements, computed from the coordinate transform and
// the mode while importing. So each resized axis is a product with a constant [in, out]
// matrix of those coefficients (plus a constant where tf_crop_and_resize extrapolates):
// exact for nearest, and for the other modes the same sums ONNX's reference forms.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "ops.h"

namespace kiln::onnx::detail {
namespace {

struct Resize1d {
  std::string mode, transform, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
  bool symmetric_allowed = false;  // half_pixel_symmetric exists from Resize-19 on
  double roi_start = 0, roi_end = 1;
};

std::vector<double> coefficients(const Resize1d& r, double ratio, NodeContext& c) {
  if (r.mode == "nearest") {
    if (ratio == 1) return {0, 1};
    if (r.nearest_mode == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (r.nearest_mode == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (r.nearest_mode == "floor") return {1, 0};
    if (r.nearest_mode == "ceil") return {0, 1};
    c.invalid(fmt::format("nearest_mode '{}' is none of round_prefer_floor, round_prefer_ceil, floor, ceil", r.nearest_mode));
  }
  if (r.mode == "linear") return {1 - ratio, ratio};
  if (r.mode == "cubic") {
    const double a = r.cubic_a, s = ratio + 1, t = 1 - ratio, u = 2 - ratio;
    return {((a * s - 5 * a) * s + 8 * a) * s - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
            ((a + 2) * t - (a + 3)) * t * t + 1, ((a * u - 5 * a) * u + 8 * a) * u - 4 * a};
  }
  c.invalid(fmt::format("mode '{}' is none of nearest, linear, cubic", r.mode));
}

// The [out][in] coefficients and, per output, whether it is the extrapolation value.
// The largest in x out interpolation matrix the importer builds (an axis resized from 4096 to
// 4096 takes 16 M entries).
constexpr int64_t kMaxResizeMatrix = int64_t{1} << 24;

std::pair<std::vector<std::vector<double>>, std::vector<bool>> resize_matrix(const Resize1d& r, int64_t in, int64_t out,
                                                                             double scale, NodeContext& c) {
  std::vector<std::vector<double>> m(static_cast<size_t>(out), std::vector<double>(static_cast<size_t>(in), 0.0));
  std::vector<bool> extrapolated(static_cast<size_t>(out), false);
  const double out_width = scale * static_cast<double>(in);
  for (int64_t o = 0; o < out; ++o) {
    const auto x = static_cast<double>(o);
    double xo = 0;
    if (r.transform == "half_pixel") xo = (x + 0.5) / scale - 0.5;
    else if (r.transform == "half_pixel_symmetric" && r.symmetric_allowed) {
      // Resize-19: half_pixel, shifted so that the rounding of the output size is split
      // evenly between both ends.
      const double center = static_cast<double>(in) / 2, adjustment = static_cast<double>(out) / out_width;
      xo = center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    else if (r.transform == "pytorch_half_pixel") xo = out_width != 1 ? (x + 0.5) / scale - 0.5 : 0;
    else if (r.transform == "align_corners") xo = out_width == 1 ? 0 : x * static_cast<double>(in - 1) / (out_width - 1);
    else if (r.transform == "asymmetric") xo = x / scale;
    else if (r.transform == "tf_half_pixel_for_nn") xo = (x + 0.5) / scale;
    else if (r.transform == "tf_crop_and_resize") {
      const double span = (r.roi_end - r.roi_start) * static_cast<double>(in - 1);
      xo = (out_width == 1 ? span / 2 : x * span / (out_width - 1)) + r.roi_start * static_cast<double>(in - 1);
      if (xo < 0 || xo > static_cast<double>(in - 1)) {
        extrapolated[static_cast<size_t>(o)] = true;
        continue;
      }
    } else {
      c.invalid(fmt::format("coordinate_transformation_mode '{}' is not one ONNX defines", r.transform));
    }
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> w = coefficients(r, ratio, c);
    const auto n = static_cast<int64_t>(w.size());
    // The n positions nearest xo (ties to the lower), as the reference picks them from the
    // input padded with its edge values.
    std::vector<int64_t> near;
    for (int64_t p = static_cast<int64_t>(fl) - n; p <= static_cast<int64_t>(fl) + n; ++p) near.push_back(p);
    std::sort(near.begin(), near.end(), [&](int64_t a, int64_t b) {
      const double da = std::abs(xo - static_cast<double>(a)), db = std::abs(xo - static_cast<double>(b));
      return da != db ? da < db : a < b;
    });
    near.resize(static_cast<size_t>(n));
    std::sort(near.begin(), near.end());
    if (r.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (near[static_cast<size_t>(k)] < 0 || near[static_cast<size_t>(k)] >= in) w[static_cast<size_t>(k)] = 0;
        sum += w[static_cast<size_t>(k)];
      }
      if (sum != 0)
        for (double& v : w) v /= sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t p = std::clamp<int64_t>(near[static_cast<size_t>(k)], 0, in - 1);
      m[static_cast<size_t>(o)][static_cast<size_t>(p)] += w[static_cast<size_t>(k)];
    }
  }
  return {m, extrapolated};
}

// Resize-18's `axes` (scales, sizes and roi name only those axes) and
// `keep_aspect_ratio_policy` (sizes bound one scale shared by those axes), rewritten into
// the full-rank scales, sizes and roi of the versions before.
void resize_18_attributes(NodeContext& c, const Tensor& x, std::vector<double>& scales, std::vector<int64_t>& sizes,
                          std::vector<double>& roi) {
  const int64_t rank = x.rank();
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) axes[static_cast<size_t>(d)] = d;
  if (auto a = c.attr_ints_opt("axes")) {
    axes = *a;
    for (int64_t& d : axes) d = normalize_axis(c, d, rank, "axis");
    const size_t given = std::max(scales.size(), sizes.size());
    if (given != axes.size()) c.invalid(fmt::format("it has {} scales or sizes for {} axes", given, axes.size()));
    std::vector<double> full_scales(scales.empty() ? 0 : static_cast<size_t>(rank), 1.0);
    std::vector<int64_t> full_sizes = sizes.empty() ? std::vector<int64_t>{} : dims_of(x.shape());
    std::vector<double> full_roi;
    if (!roi.empty()) {
      if (roi.size() != 2 * axes.size()) c.invalid("tf_crop_and_resize needs an roi of 2 values per axis");
      full_roi.assign(static_cast<size_t>(rank), 0.0);
      full_roi.resize(2 * static_cast<size_t>(rank), 1.0);
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto d = static_cast<size_t>(axes[k]);
      if (!scales.empty()) full_scales[d] = scales[k];
      if (!sizes.empty()) full_sizes[d] = sizes[k];
      if (!roi.empty()) {
        full_roi[d] = roi[k];
        full_roi[d + static_cast<size_t>(rank)] = roi[k + axes.size()];
      }
    }
    scales = std::move(full_scales);
    sizes = std::move(full_sizes);
    roi = std::move(full_roi);
  }
  const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch" || sizes.empty()) return;
  if (policy != "not_larger" && policy != "not_smaller")
    c.invalid(fmt::format("keep_aspect_ratio_policy '{}' is none of stretch, not_larger, not_smaller", policy));
  double scale = policy == "not_larger" ? INFINITY : 0;
  for (int64_t d : axes) {
    const double s = static_cast<double>(sizes[static_cast<size_t>(d)]) / static_cast<double>(x.size(d));
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  // One ratio for every listed axis; each output size is it times the input's, rounded
  // half up. Both are kept: the coordinates transform with the ratio, not size / input.
  scales.assign(static_cast<size_t>(rank), 1.0);
  for (int64_t d : axes) {
    scales[static_cast<size_t>(d)] = scale;
    sizes[static_cast<size_t>(d)] = static_cast<int64_t>(std::floor(scale * static_cast<double>(x.size(d)) + 0.5));
  }
}

std::vector<Tensor> Resize(NodeContext& c) {
  Tensor x = c.input(0);
  if (!is_float(x.dtype())) c.unsupported(fmt::format("Resize of {} is not supported", dtype_name(x.dtype())));
  Resize1d r;
  r.mode = c.attr_string("mode", "nearest");
  const int64_t rank = x.rank();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;
  if (c.node().op_type() == "Upsample" || c.version() < 11) {
    r.transform = "asymmetric";
    r.nearest_mode = "floor";
    const HostTensor& s = c.value(1, "scales");
    for (int64_t i = 0; i < s.numel(); ++i) scales.push_back(s.get_double(i));
  } else {
    r.transform = c.attr_string("coordinate_transformation_mode", "half_pixel");
    r.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
    r.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    r.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    r.extrapolation = c.attr_float("extrapolation_value", 0.0);
    if (c.has_input(1) && r.transform == "tf_crop_and_resize") {
      const HostTensor& v = c.value(1, "roi");
      for (int64_t i = 0; i < v.numel(); ++i) roi.push_back(v.get_double(i));
    }
    if (c.has_input(2) && c.shape(2).numel() > 0) {
      const HostTensor& v = c.value(2, "scales");
      for (int64_t i = 0; i < v.numel(); ++i) scales.push_back(v.get_double(i));
    }
    if (c.has_input(3) && c.shape(3).numel() > 0) sizes = c.ints(3, "sizes");
    r.symmetric_allowed = c.version() >= 19;
  }
  if (scales.empty() == sizes.empty()) c.invalid("exactly one of scales and sizes must be given");
  resize_18_attributes(c, x, scales, sizes, roi);
  // Resize-18's antialias widens the filter when downsampling with linear or cubic.
  const bool antialias = c.attr_int("antialias", 0) != 0 && r.mode != "nearest";
  if (static_cast<int64_t>(std::max(scales.size(), sizes.size())) != rank)
    c.invalid(fmt::format("its scales or sizes do not match the input's rank {}", rank));
  if (r.transform == "tf_crop_and_resize" && static_cast<int64_t>(roi.size()) != 2 * rank)
    c.invalid("tf_crop_and_resize needs an roi of 2 * rank values");
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t in = x.size(d);
    const double scale = scales.empty() ? static_cast<double>(sizes[static_cast<size_t>(d)]) / static_cast<double>(in)
                                        : scales[static_cast<size_t>(d)];
    // The output size as the file gives it, checked before it becomes an integer (a scale
    // of 1e300 is no size) and before the in x out interpolation matrix is allocated: a
    // file only claims it.
    const double wanted = !sizes.empty() ? static_cast<double>(sizes[static_cast<size_t>(d)])
                                         : std::floor(scale * static_cast<double>(in));
    if (!(scale > 0) || !(wanted >= 1) || in < 1 || !(wanted < 0x1p62))
      c.invalid(fmt::format("axis {} would resize {} to {}", d, in, wanted));
    const auto out = static_cast<int64_t>(wanted);
    if (in > kMaxResizeMatrix / out)
      c.unsupported(fmt::format("axis {} resizes {} to {}: its {} x {} interpolation matrix is past kiln's {} entries",
                                d, in, out, in, out, kMaxResizeMatrix));
    if (antialias && scale < 1) c.unsupported("antialias when downsampling is not supported");
    if (!roi.empty()) {
      r.roi_start = roi[static_cast<size_t>(d)];
      r.roi_end = roi[static_cast<size_t>(d + rank)];
    }
    const auto [m, extrapolated] = resize_matrix(r, in, out, scale, c);
    bool identity = in == out && std::find(extrapolated.begin(), extrapolated.end(), true) == extrapolated.end();
    for (int64_t o = 0; identity && o < out; ++o)
      for (int64_t i = 0; identity && i < in; ++i) identity = m[static_cast<size_t>(o)][static_cast<size_t>(i)] == (o == i ? 1.0 : 0.0);
    if (identity) continue;
    HostTensor mt(TensorType{x.dtype(), Shape{in, out}});
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) mt.set_double(i * out + o, m[static_cast<size_t>(o)][static_cast<size_t>(i)]);
    Tensor y = x.transpose(d, -1).matmul(kiln::constant(mt, c.device()));
    if (std::find(extrapolated.begin(), extrapolated.end(), true) != extrapolated.end()) {
      HostTensor e(TensorType{x.dtype(), Shape{out}}), keep(TensorType{DType::Bool, Shape{out}});
      for (int64_t o = 0; o < out; ++o) {
        e.set_double(o, r.extrapolation);
        keep.set_int(o, extrapolated[static_cast<size_t>(o)] ? 0 : 1);
      }
      y = where(kiln::constant(keep, c.device()), y, kiln::constant(e, c.device()));
    }
    x = y.transpose(d, -1);
  }
  return {x};
}

constexpr std::string_view kResize[] = {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                         "exclude_outside", "extrapolation_value", "antialias", "axes",
                                         "keep_aspect_ratio_policy"};

}  // namespace

const ConverterRow kResizeRows[] = {
    {"Resize", 10, 19, Resize, kResize},
    {"Upsample", 9, 10, Resize, kResize},
};
const std::span<const ConverterRow> resize_rows = kResizeRows;

}  // namespace kiln::onnx::detail
