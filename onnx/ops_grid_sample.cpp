// onnx/ops_grid_sample.cpp - GridSample: the input sampled at positions a grid gives at run
// time, each tap a kiln gather.
//
// The grid's (x, y) in [-1, 1] become pixel coordinates (align_corners says whether -1 and 1
// are the corner pixels' centres or their outer edges), are padded (border clamps, reflection
// mirrors), then bilinear mixes 4 taps, nearest takes 1 (halves to even), bicubic 16 with
// Keys' cubic (A = -0.75); a tap outside the input reads 0. This follows PyTorch's
// grid_sampler, which ONNX's GridSample was specified from.
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

struct Sampler {
  NodeContext& c;
  Tensor flat;  // the input as [N, C, H*W]
  int64_t n, ch, h, w, ho, wo;
  bool align_corners;
  std::string padding;

  Tensor k(double v, const Tensor& like) const { return c.scalar_like(v, like); }

  // The grid's coordinate `g` along an axis of `size` pixels, in pixels.
  Tensor unnormalize(const Tensor& g, int64_t size) const {
    const auto s = static_cast<double>(size);
    return align_corners ? (g + k(1, g)) * k((s - 1) / 2, g) : ((g + k(1, g)) * k(s, g) - k(1, g)) * k(0.5, g);
  }

  // Mirrors `x` into [low, high] (twice each, as PyTorch keeps them integral).
  Tensor reflect(const Tensor& x, double twice_low, double twice_high) const {
    if (twice_low == twice_high) return x * k(0, x);
    const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
    const Tensor in = (x - k(lo, x)).abs();
    const Tensor extra = in.fmod(k(span, x)), flips = (in / k(span, x)).floor();
    const Tensor even = flips.fmod(k(2, x)).eq(k(0, x));
    return where(even, extra + k(lo, x), k(span + lo, x) - extra);
  }

  // The padding mode applied to pixel coordinate `x` along an axis of `size`.
  Tensor pad(const Tensor& x, int64_t size) const {
    const auto s = static_cast<double>(size);
    auto clip = [&](const Tensor& v) { return v.maximum(k(0, v)).minimum(k(s - 1, v)); };
    if (padding == "border") return clip(x);
    if (padding == "reflection") return clip(align_corners ? reflect(x, 0, 2 * (s - 1)) : reflect(x, -1, 2 * s - 1));
    return x;
  }

  // The input at integral pixel coordinates (x, y) [N, Ho, Wo], as [N, C, Ho, Wo]; 0 outside.
  Tensor tap(const Tensor& x, const Tensor& y) const {
    const Tensor inside = (x >= 0) & (x <= static_cast<double>(w - 1)) & (y >= 0) & (y <= static_cast<double>(h - 1));
    const Tensor at = (y * k(static_cast<double>(w), y) + x).to(DType::I64);
    const Tensor index = where(inside, at, kiln::full({}, h * w, DType::I64, c.device()));  // outside: reads 0
    return flat.gather(2, index.reshape({n, 1, ho * wo}).expand({n, ch, ho * wo})).reshape({n, ch, ho, wo});
  }

  static Tensor per_channel(const Tensor& weight) { return weight.unsqueeze(1); }
};

// Keys' cubic convolution weights of the four taps around fraction t.
std::array<Tensor, 4> cubic_weights(const Sampler& s, const Tensor& t) {
  const double a = -0.75;
  auto near = [&](const Tensor& x) { return ((x * s.k(a + 2, x) - s.k(a + 3, x)) * x * x) + s.k(1, x); };
  auto far = [&](const Tensor& x) { return ((x * s.k(a, x) - s.k(5 * a, x)) * x + s.k(8 * a, x)) * x - s.k(4 * a, x); };
  const Tensor one = s.k(1, t), two = s.k(2, t);
  return {far(t + one), near(t), near(one - t), far(two - t)};
}

std::vector<Tensor> GridSample(NodeContext& c) {
  const Tensor x = c.input(0), grid = c.input(1);
  if (!is_float(x.dtype()) || x.rank() != 4) c.unsupported(fmt::format("X must be a float [N, C, H, W], not {}", x.shape().str()));
  if (grid.rank() != 4 || grid.size(3) != 2 || grid.size(0) != x.size(0))
    c.invalid(fmt::format("Grid must be [N, H_out, W_out, 2] for X {}, not {}", x.shape().str(), grid.shape().str()));
  Sampler s{c, Tensor(), x.size(0), x.size(1), x.size(2), x.size(3), grid.size(1), grid.size(2),
            c.attr_int("align_corners", 0) != 0, c.attr_string("padding_mode", "zeros")};
  if (s.padding != "zeros" && s.padding != "border" && s.padding != "reflection")
    c.invalid(fmt::format("padding_mode '{}' is none of zeros, border, reflection", s.padding));
  s.flat = x.reshape({s.n, s.ch, s.h * s.w});
  const Tensor g = grid.to(x.dtype());
  const Tensor gx = s.unnormalize(g.slice(3, 0, 1).squeeze(3), s.w), gy = s.unnormalize(g.slice(3, 1, 2).squeeze(3), s.h);
  // GridSample-20 renamed bilinear and bicubic to linear and cubic (and took N-d inputs,
  // which kiln refuses above).
  const bool renamed = c.version() >= 20;
  const std::string linear = renamed ? "linear" : "bilinear", cubic = renamed ? "cubic" : "bicubic";
  const std::string mode = c.attr_string("mode", linear);
  if (mode == "nearest") return {s.tap(s.pad(gx, s.w).round(), s.pad(gy, s.h).round())};
  if (mode == linear) {
    const Tensor ix = s.pad(gx, s.w), iy = s.pad(gy, s.h);
    const Tensor x0 = ix.floor(), y0 = iy.floor(), x1 = x0 + s.k(1, x0), y1 = y0 + s.k(1, y0);
    const Tensor nw = (x1 - ix) * (y1 - iy), ne = (ix - x0) * (y1 - iy), sw = (x1 - ix) * (iy - y0), se = (ix - x0) * (iy - y0);
    return {s.tap(x0, y0) * Sampler::per_channel(nw) + s.tap(x1, y0) * Sampler::per_channel(ne) +
            s.tap(x0, y1) * Sampler::per_channel(sw) + s.tap(x1, y1) * Sampler::per_channel(se)};
  }
  if (mode == cubic) {
    // Padding applies to each tap's coordinate, not to the sampling point.
    const Tensor x0 = gx.floor(), y0 = gy.floor();
    const auto wx = cubic_weights(s, gx - x0), wy = cubic_weights(s, gy - y0);
    Tensor out;
    for (int j = 0; j < 4; ++j) {
      const Tensor ty = s.pad(y0 + s.k(j - 1, y0), s.h);
      Tensor row;
      for (int i = 0; i < 4; ++i) {
        const Tensor v = s.tap(s.pad(x0 + s.k(i - 1, x0), s.w), ty) * Sampler::per_channel(wx[static_cast<size_t>(i)]);
        row = i == 0 ? v : row + v;
      }
      const Tensor term = row * Sampler::per_channel(wy[static_cast<size_t>(j)]);
      out = j == 0 ? term : out + term;
    }
    return {out};
  }
  c.invalid(fmt::format("mode '{}' is none of {}, nearest, {}", mode, linear, cubic));
}

constexpr std::string_view kGridSample[] = {"align_corners", "mode", "padding_mode"};

}  // namespace

const ConverterRow kGridSampleRows[] = {
    {"GridSample", 16, 22, GridSample, kGridSample},
};
const std::span<const ConverterRow> grid_sample_rows = kGridSampleRows;

}  // namespace kiln::onnx::detail
