// onnx/ops_signal.cpp - DFT and STFT: products with constant cosine and sine matrices.
//
// A transform of length n along an axis is two [n, bins] matrices of cos(2 pi j k / n) and
// sin(2 pi j k / n) built while importing; the real and imaginary parts are products with
// them (O(n * bins) per signal, a GEMM rather than an FFT), computed in f64 so that bins
// that cancel to 0 stay near 0 in f32.
#include <cmath>

#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

struct Complex {
  Tensor re, im;  // im undefined: a real signal
};

// The DFT along the last axis of `x` (length n) into `bins` bins; inverse divides by n.
Complex dft_last(NodeContext& c, const Complex& x, int64_t n, int64_t bins, bool inverse) {
  HostTensor cos_m(TensorType{DType::F64, Shape{n, bins}}), sin_m(TensorType{DType::F64, Shape{n, bins}});
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < bins; ++k) {
      // j * k mod n keeps the angle small, so large lengths stay accurate.
      const double angle = 2 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n);
      cos_m.set_double(j * bins + k, std::cos(angle));
      sin_m.set_double(j * bins + k, std::sin(angle));
    }
  const Tensor cm = kiln::constant(cos_m, c.device()), sm = kiln::constant(sin_m, c.device());
  const Tensor re = x.re.to(DType::F64);
  // Forward: (a + ib)(cos - i sin); inverse: (a + ib)(cos + i sin) / n.
  const double s = inverse ? -1 : 1;
  Tensor out_re = re.matmul(cm), out_im = re.matmul(sm) * c.scalar(-s, DType::F64);
  if (x.im.defined()) {
    const Tensor im = x.im.to(DType::F64);
    out_re = out_re + im.matmul(sm) * c.scalar(s, DType::F64);
    out_im = out_im + im.matmul(cm);
  }
  if (inverse) {
    const Tensor scale = c.scalar(1.0 / static_cast<double>(n), DType::F64);
    out_re = out_re * scale;
    out_im = out_im * scale;
  }
  return {out_re, out_im};
}

// [..., 1] (real) or [..., 2] (complex) as parts.
Complex parts(NodeContext& c, const Tensor& x) {
  if (!is_float(x.dtype())) c.invalid(fmt::format("its signal is {}, not float", dtype_name(x.dtype())));
  const int64_t last = x.size(-1);
  if (last != 1 && last != 2) c.invalid(fmt::format("its signal's last dim is {}, not 1 (real) or 2 (complex)", last));
  Complex out{x.slice(-1, 0, 1).squeeze(-1), Tensor()};
  if (last == 2) out.im = x.slice(-1, 1, 2).squeeze(-1);
  return out;
}

Tensor joined(const Complex& y, DType t) { return kiln::cat({y.re.unsqueeze(-1), y.im.unsqueeze(-1)}, -1).to(t); }

std::vector<Tensor> DFT(NodeContext& c) {
  const Tensor x = c.input(0);
  const int64_t rank = x.rank();
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 1), rank - 1, "axis");
  if (axis == 0) c.invalid("its axis is the batch axis");
  const bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  Complex p = parts(c, x);
  // The transformed axis last.
  p.re = p.re.transpose(axis, rank - 2);
  if (p.im.defined()) p.im = p.im.transpose(axis, rank - 2);
  int64_t n = p.re.size(-1);
  if (c.has_input(1)) {
    const std::vector<int64_t> length = c.ints(1, "dft_length");
    if (length.size() != 1 || length[0] < 1) c.invalid("its dft_length must be one positive integer");
    const int64_t want = length[0];
    auto fit = [&](const Tensor& t) {  // zero-padded or truncated to the DFT's length
      if (want <= n) return t.slice(-1, 0, want);
      std::vector<int64_t> low(static_cast<size_t>(t.rank()), 0), high(static_cast<size_t>(t.rank()), 0);
      high.back() = want - n;
      return t.pad(low, high);
    };
    p.re = fit(p.re);
    if (p.im.defined()) p.im = fit(p.im);
    n = want;
  }
  if (onesided && p.im.defined()) c.invalid("onesided needs a real signal");
  Complex y = dft_last(c, p, n, onesided ? n / 2 + 1 : n, inverse);
  y.re = y.re.transpose(axis, rank - 2);
  y.im = y.im.transpose(axis, rank - 2);
  return {joined(y, x.dtype())};
}

// Frames of `frame_length` samples, `frame_step` apart (a view), each weighted by the window
// and transformed: [batch, frames, bins, 2].
std::vector<Tensor> STFT(NodeContext& c) {
  const Tensor signal = c.input(0);
  if (signal.rank() != 3) c.invalid(fmt::format("its signal has rank {}, not 3", signal.rank()));
  const std::vector<int64_t> step = c.ints(1, "frame_step");
  if (step.size() != 1 || step[0] < 1) c.invalid("its frame_step must be one positive integer");
  std::optional<Tensor> window;
  if (c.has_input(2)) window = c.input(2);
  int64_t length = window ? window->size(0) : 0;
  if (c.has_input(3)) {
    const std::vector<int64_t> l = c.ints(3, "frame_length");
    if (l.size() != 1 || (window && l[0] != length)) c.invalid("its frame_length must be one integer, the window's length");
    length = l[0];
  }
  if (length < 1 || length > signal.size(1))
    c.invalid(fmt::format("its frame length {} does not fit a signal of {} samples", length, signal.size(1)));
  const bool onesided = c.attr_int("onesided", 1) != 0;
  Complex p = parts(c, signal.unfold(1, length, step[0]).transpose(2, 3));  // [batch, frames, length, 1|2]
  if (window) {
    p.re = p.re * window->to(p.re.dtype());
    if (p.im.defined()) p.im = p.im * window->to(p.im.dtype());
  }
  if (onesided && p.im.defined()) c.invalid("onesided needs a real signal");
  return {joined(dft_last(c, p, length, onesided ? length / 2 + 1 : length, false), signal.dtype())};
}

constexpr std::string_view kDft[] = {"axis", "inverse", "onesided"};
constexpr std::string_view kStft[] = {"onesided"};

}  // namespace

const ConverterRow kSignalRows[] = {
    {"DFT", 17, 17, DFT, kDft},
    {"STFT", 17, 17, STFT, kStft},
};
const std::span<const ConverterRow> signal_rows = kSignalRows;

}  // namespace kiln::onnx::detail
