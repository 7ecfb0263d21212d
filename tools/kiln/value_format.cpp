// tools/kiln/value_format.cpp - tensors as text, in NumPy's layout.
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "commands.h"

namespace kiln::cli {
namespace {

std::string element(const HostTensor& t, int64_t k) {
  if (is_bool(t.dtype())) return t.get_int(k) ? "True" : "False";
  if (is_integer(t.dtype())) return std::to_string(t.get_int(k));
  const double v = t.get_double(k);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return fmt::format("{:.6g}", v);
}

void format_axis(const HostTensor& t, int axis, int64_t offset, bool summarize, int indent,
                 std::string& out) {
  const Shape& s = t.shape();
  const auto strides = s.strides();
  out += '[';
  const int64_t n = s[axis];
  const bool cut = summarize && n > 6;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == 3) {
      out += axis + 1 == s.rank() ? "..., " : "...,\n" + std::string(static_cast<size_t>(indent + 1), ' ');
      i = n - 3;
    }
    const int64_t at = offset + i * strides[static_cast<size_t>(axis)];
    if (axis + 1 == s.rank()) out += element(t, at);
    else format_axis(t, axis + 1, at, summarize, indent + 1, out);
    if (i + 1 < n) {
      if (axis + 1 == s.rank()) out += ", ";
      else out += ",\n" + std::string(static_cast<size_t>(s.rank() - axis - 2), '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
    }
  }
  out += ']';
}

}  // namespace

ValueSummary summary_of(const HostTensor& t) {
  ValueSummary s;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t k = 0; k < t.numel(); ++k) {
    const double v = t.get_double(k);
    if (std::isnan(v)) {
      ++s.nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (const int64_t n = t.numel() - s.nans; n > 0) {
    s.min = lo;
    s.max = hi;
    s.mean = sum / static_cast<double>(n);  // nan when +inf meets -inf
  }
  return s;
}

std::string summarize(const HostTensor& t) {
  if (t.numel() == 0) return "(empty)";
  const ValueSummary v = summary_of(t);
  const int64_t n = t.numel() - v.nans;
  std::string s = n ? fmt::format("min={:.6g} max={:.6g} mean={}", v.min, v.max,
                                  std::isnan(v.mean) ? "nan" : fmt::format("{:.6g}", v.mean))
                    : std::string("all nan");
  if (v.nans && n) s += fmt::format(" nan={}", v.nans);
  return s;
}

std::string format_values(const HostTensor& t, int64_t threshold) {
  if (t.shape().rank() == 0) return element(t, 0);
  std::string out;
  format_axis(t, 0, 0, t.numel() > threshold, 0, out);
  return out;
}

namespace {

// How many values of `t` lie between a and b: distance between their bit patterns mapped
// to one monotonic integer line (negative floats mirrored below zero).
double ulps_between(double a, double b, DType t) {
  auto line = [&](double x) -> int64_t {
    if (t == DType::F32) {
      const auto bits = std::bit_cast<int32_t>(static_cast<float>(x));
      return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : bits;
    }
    const auto bits = std::bit_cast<int64_t>(x);
    return bits < 0 ? -(bits & INT64_MAX) : bits;
  };
  const int64_t x = line(a), y = line(b);
  // Through double: two f64 far apart differ by more than int64 holds.
  return std::fabs(static_cast<double>(x) - static_cast<double>(y));
}

}  // namespace

ValueDifference difference_of(const HostTensor& got, const HostTensor& want) {
  ValueDifference r;
  for (int64_t k = 0; k < got.numel() && k < want.numel(); ++k) {
    const double a = is_float(got.dtype()) ? got.get_double(k) : static_cast<double>(got.get_int(k));
    const double b = is_float(want.dtype()) ? want.get_double(k) : static_cast<double>(want.get_int(k));
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    ++r.differ;
    const double d = std::fabs(a - b);
    r.max_abs = std::max(r.max_abs, d);
    r.max_rel = std::max(r.max_rel, b != 0 ? d / std::fabs(b) : INFINITY);
    if (is_float(got.dtype()) && std::isfinite(a) && std::isfinite(b))
      r.max_ulp = std::max(r.max_ulp, ulps_between(a, b, got.dtype()));
  }
  return r;
}

std::string compare_values(const HostTensor& got, const HostTensor& want) {
  if (!(got.type() == want.type())) return fmt::format("type {} differs from {}", got.type().str(), want.type().str());
  const ValueDifference d = difference_of(got, want);
  if (d.differ == 0) return "identical to the interpreter";
  return fmt::format("{} of {} elements differ; max abs {:.3g}, max rel {:.3g}{}", d.differ, got.numel(), d.max_abs,
                     d.max_rel, is_float(got.dtype()) ? fmt::format(", max {:.1f} ulp", d.max_ulp) : "");
}

}  // namespace kiln::cli
