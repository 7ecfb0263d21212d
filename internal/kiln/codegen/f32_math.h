// internal/kiln/codegen/f32_math.h - kiln's own f32 exp, log, tanh, erf and sigmoid, written once.
//
// Each function is a sequence of operations on an emitter, so that every device computes
// the same clamps, coefficients, cut-offs and roundings: the cpu backend instantiates it with
// LLVM values (backends/cpu/vector_math.cpp), the C-family dialects with OpenCL C or GLSL
// text (codegen/c_math.cpp). exp and log are Cephes' (range reduction and a polynomial),
// tanh and erf Eigen's rational approximations; their errors against the correctly rounded
// result are measured in tests/unit/cpu_math_test.cpp and documented in docs/runtime.md.
// They are built from plain arithmetic, compares and selects, with no branch and no loop: a
// vector of lanes runs them as one, and lavapipe's loop budget never sees them.
//
// An emitter E has a type E::Value, for floats, integers and conditions alike, and:
//   constant(double), int_constant(int64_t)                       f32 and i32 constants
//   add sub mul div (x, y), neg(x), fma(x, y, z), fabs(x), copysign(magnitude, sign)
//   greater less equal (x, y), is_nan(x)                          ordered compares
//   select(condition, x, y)                                       on floats or integers
//   bits(x), from_bits(i), int_to_float(i)                        i32 <-> f32
//   int_sub int_and int_or (i, j), shift_left shift_right_arith shift_right_logical (i, n)
// Each operation's operands are named before it is called: the order in which values are
// emitted is the order written here, whatever the compiler's order of evaluating arguments.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace kiln::f32_math {

// Horner's rule, coefficients from the highest degree down.
template <class E, size_t N>
typename E::Value poly(E& e, typename E::Value x, const std::array<double, N>& c) {
  typename E::Value p = e.constant(c[0]);
  for (size_t i = 1; i < N; ++i) p = e.fma(p, x, e.constant(c[i]));
  return p;
}

// x clamped to [lo, hi] by a compare and a select each: NaN flows through (minnum and
// maxnum would drop it).
template <class E>
typename E::Value clamp(E& e, typename E::Value x, double lo, double hi) {
  const typename E::Value above = e.greater(x, e.constant(hi));
  const typename E::Value y = e.select(above, e.constant(hi), x);
  const typename E::Value below = e.less(y, e.constant(lo));
  return e.select(below, e.constant(lo), y);
}

template <class E>
typename E::Value exp(E& e, typename E::Value x) {
  using V = typename E::Value;
  // Past the clamp the scaling overflows to inf, or rounds to 0, by itself; NaN flows
  // through every step.
  const V xc = clamp(e, x, -104.0, 88.8);
  // n = rint(xc / ln 2), in [-150, 128]: adding 1.5 * 2^23 rounds to an integer as rint
  // does (ties to even), and leaves 1.5 * 2^23 + n, whose bits are 0x4b400000 + n. So n
  // comes from the bits, without a rounding instruction, a conversion, or the select that a
  // conversion needs for NaN (here any bits will do, as p is NaN).
  constexpr double kRound = 12582912.0;  // 1.5 * 2^23
  const V scaled = e.mul(xc, e.constant(1.44269504088896341));
  const V t = e.add(scaled, e.constant(kRound));
  const V fx = e.sub(t, e.constant(kRound));
  V r = e.fma(fx, e.constant(-0.693359375), xc);  // ln 2 in two parts: xc - n ln 2, exactly
  r = e.fma(fx, e.constant(2.12194440e-4), r);
  V p = poly(e, r, std::array{1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1,
                              5.0000001201E-1});
  const V r2 = e.mul(r, r);
  const V r1 = e.add(r, e.constant(1.0));
  p = e.fma(p, r2, r1);
  // p * 2^n as p * 2^n1 * 2^n2 with n1 = n >> 1 and n2 = n - n1, two normal factors, so
  // that a subnormal result rounds once. Their biased exponents n1 + 127 and n2 + 127 are
  // m >> 1 and m - (m >> 1) for m = n + 254.
  const V bits = e.bits(t);
  const V m = e.int_sub(bits, e.int_constant(0x4b400000 - 254));
  const V e1 = e.shift_right_arith(m, 1);
  const V e2 = e.int_sub(m, e1);
  const V f1 = e.from_bits(e.shift_left(e1, 23));
  const V f2 = e.from_bits(e.shift_left(e2, 23));
  const V p1 = e.mul(p, f1);
  return e.mul(p1, f2);
}

template <class E>
typename E::Value log(E& e, typename E::Value x) {
  using V = typename E::Value;
  // Subnormals: scaled into the normal range first.
  const V tiny = e.less(x, e.constant(1.17549435e-38));
  const V x_scaled = e.mul(x, e.constant(8388608.0));
  const V xs = e.select(tiny, x_scaled, x);
  const V bits = e.bits(xs);
  const V exponent = e.shift_right_logical(bits, 23);
  V n = e.int_sub(exponent, e.int_constant(126));
  const V n_tiny = e.int_sub(n, e.int_constant(23));
  n = e.select(tiny, n_tiny, n);
  // The mantissa in [0.5, 1).
  const V mantissa_bits = e.int_and(bits, e.int_constant(0x807fffff));
  const V m = e.from_bits(e.int_or(mantissa_bits, e.int_constant(0x3f000000)));
  V ef = e.int_to_float(n);
  const V small = e.less(m, e.constant(0.707106781186547524));
  const V ef_less = e.sub(ef, e.constant(1.0));
  ef = e.select(small, ef_less, ef);
  const V m2 = e.add(m, m);
  const V z_small = e.sub(m2, e.constant(1.0));
  const V z_other = e.sub(m, e.constant(1.0));
  const V z = e.select(small, z_small, z_other);
  const V z2 = e.mul(z, z);
  V y = poly(e, z, std::array{7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                              -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  y = e.mul(y, z);
  y = e.mul(y, z2);
  y = e.fma(ef, e.constant(-2.12194440e-4), y);
  y = e.fma(z2, e.constant(-0.5), y);
  V r = e.add(z, y);
  r = e.fma(ef, e.constant(0.693359375), r);
  // Special values as the C library gives them.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  r = e.select(e.equal(x, e.constant(0.0)), e.constant(-kInf), r);
  r = e.select(e.less(x, e.constant(0.0)), e.constant(std::numeric_limits<double>::quiet_NaN()), r);
  r = e.select(e.equal(x, e.constant(kInf)), x, r);
  return e.select(e.is_nan(x), x, r);
}

template <class E>
typename E::Value tanh(E& e, typename E::Value x) {
  using V = typename E::Value;
  const V xc = clamp(e, x, -7.90531110763549805, 7.90531110763549805);
  const V x2 = e.mul(xc, xc);
  V p = poly(e, x2, std::array{-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                               1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03});
  p = e.mul(xc, p);
  const V q = poly(e, x2, std::array{1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03});
  V r = e.div(p, q);
  const V ax = e.fabs(x);
  r = e.select(e.less(ax, e.constant(0.0004)), x, r);
  // Beyond 9 the result rounds to +-1 (also for the infinities).
  const V one = e.copysign(e.constant(1.0), x);
  return e.select(e.greater(ax, e.constant(9.0)), one, r);
}

template <class E>
typename E::Value erf(E& e, typename E::Value x) {
  using V = typename E::Value;
  const V xc = clamp(e, x, -4.0, 4.0);
  const V x2 = e.mul(xc, xc);
  V p = poly(e, x2, std::array{-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                               -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02});
  p = e.mul(xc, p);
  const V q = poly(e, x2, std::array{-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                     -7.37332916720468e-03, -1.42647390514189e-02});
  const V r = e.div(p, q);
  // Near 0, erf(x) = 2/sqrt(pi) x (1 - x^2/3 + ...): the rational form would lose the bits
  // of a tiny x in subnormal intermediates.
  const V ax = e.fabs(x);
  const V linear = e.mul(x, e.constant(1.12837916709551257));
  return e.select(e.less(ax, e.constant(1e-4)), linear, r);
}

// One exp, of -|x| (at most 1, so 1 + it never overflows): 1 / (1 + e^-x) right of 0, and
// e^x / (1 + e^x) left of it, which far left (down to the subnormals) is e^x to within an
// ulp. Two exps, e^-x and e^x, cost a SiLU twice an exp's time (EfficientNet's epilogues).
template <class E>
typename E::Value sigmoid(E& e, typename E::Value x) {
  using V = typename E::Value;
  const V t = exp(e, e.neg(e.fabs(x)));
  const V r = e.div(e.constant(1.0), e.add(e.constant(1.0), t));
  return e.select(e.less(x, e.constant(0.0)), e.mul(t, r), r);
}

}  // namespace kiln::f32_math
