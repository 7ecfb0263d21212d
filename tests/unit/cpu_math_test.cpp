// Accuracy of the cpu device's inline f32 math (internal/kiln/codegen/f32_math.h), in ulps.
//
// f32 exp, log, tanh, erf and sigmoid are not computed through libm in double (as the
// interpreter does) but with inline polynomial approximations in f32. Each sweep runs one
// graph over about 10^6 inputs (one kernel per function), compares every element with the
// correctly rounded result (libm in double, rounded once to f32) and asserts that the largest
// error stays within the bound docs/runtime.md states. Special values are checked exactly.
//
// Measured on x86-64 (znver4, 64-byte vectors, fmuladd as FMA), largest error in ulps:
//
//   function  range swept                        max ulp  worst input
//   exp       [-110, 90] (results down to 0)     1        -95.3885345 (a subnormal result)
//   log       every positive float, and [0, 4]   1        6.8379007e-39 (a subnormal input)
//   tanh      [-12, 12]                          4        -7.59245968
//   erf       [-6, 6]                            6        -3.94097519 (near the clamp at 4)
//   sigmoid   [-120, 40] (subnormal results)     3        -3.46512794
//
// The bounds below are one ulp above these, for hosts where fmuladd is not fused. Two ranges
// once failed and have regression tests of their own: erf of |x| < 1e-36 (the rational form
// lost bits in subnormal intermediates, 37 ulp) and sigmoid below -88.72 (1 + e^-x
// overflowed and subnormal results came out as 0).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace kiln {
namespace {

using test::parse_or_fail;
using test::run_cpu;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMinNormal = std::numeric_limits<float>::min();
constexpr float kMinSubnormal = std::numeric_limits<float>::denorm_min();
constexpr float kMax = std::numeric_limits<float>::max();

// The position of `f` on a line where neighbouring floats are 1 apart (-0.0 and +0.0 are
// both 0), so the distance of two finite floats in ulps is the difference of their keys.
int64_t ordered(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
}

float from_ordered(int64_t k) {
  return k < 0 ? std::bit_cast<float>(static_cast<uint32_t>(-k) | 0x80000000u)
               : std::bit_cast<float>(static_cast<uint32_t>(k));
}

// Distance in ulps; NaN against NaN is 0, NaN against a number is "infinitely" far.
int64_t ulps(float got, float want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : INT64_MAX;
  const int64_t d = ordered(got) - ordered(want);
  return d < 0 ? -d : d;
}

/// The sweep: special values, `linear` points evenly spaced over [lo, hi], and `dense`
/// points evenly spaced in ulps over [lo, hi] (which puts half of them near zero when the
/// range spans it: the small magnitudes where relative errors show).
std::vector<float> sweep(float lo, float hi, int linear, int dense) {
  std::vector<float> xs = {0.0f,          -0.0f,          kInf,       -kInf,       kNaN,
                           kMinSubnormal, -kMinSubnormal, kMinNormal, -kMinNormal, kMax,
                           -kMax,         1.0f,           -1.0f,      0.5f,        2.0f,
                           1e-30f,        -1e-30f,        3e-39f,     -3e-39f};
  for (int i = 0; i < linear; ++i)
    xs.push_back(lo + (hi - lo) * (static_cast<float>(i) / static_cast<float>(linear - 1)));
  const int64_t a = ordered(lo), b = ordered(hi);
  for (int i = 0; i < dense; ++i)
    xs.push_back(from_ordered(a + (b - a) * static_cast<int64_t>(i) / (dense - 1)));
  return xs;
}

struct Accuracy {
  int64_t max_ulps = 0;
  float worst_x = 0;
  float worst_got = 0;
  float worst_want = 0;
};

/// Runs `op` on the cpu device over `xs` as one graph and measures the error against
/// `exact` (computed in double, rounded once to f32).
Accuracy measure(const std::string& op, const std::vector<float>& xs, double (*exact)(double)) {
  const std::string type = fmt::format("f32[{}]", xs.size());
  const Graph g = parse_or_fail(fmt::format(
      "graph @{0}_sweep(%x: {1}) -> {1} {{\n  %y = {0} %x : {1}\n  return %y\n}}\n", op, type));
  const std::vector<HostTensor> out =
      run_cpu(g, {HostTensor::from_vector<float>(xs, {static_cast<int64_t>(xs.size())})});
  const std::vector<float> got = out.at(0).to_vector<float>();
  Accuracy acc;
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto want = static_cast<float>(exact(static_cast<double>(xs[i])));
    const int64_t e = ulps(got[i], want);
    if (e > acc.max_ulps) acc = {e, xs[i], got[i], want};
  }
  const std::string report = fmt::format(
      "{}: max {} ulp at x = {:.9g} (got {:.9g}, correctly rounded {:.9g}) over {} points", op,
      acc.max_ulps, acc.worst_x, acc.worst_got, acc.worst_want, xs.size());
  std::cout << "[ accuracy ] " << report << "\n";
  ::testing::Test::RecordProperty(op + "_max_ulp", std::to_string(acc.max_ulps));
  return acc;
}

double exp_ref(double x) {
  return std::exp(x);
}
double log_ref(double x) {
  return std::log(x);
}
double tanh_ref(double x) {
  return std::tanh(x);
}
double erf_ref(double x) {
  return std::erf(x);
}
double sigmoid_ref(double x) {
  return 1 / (1 + std::exp(-x));
}

constexpr int kLinear = 1 << 19;
constexpr int kDense = 1 << 19;

// The documented bounds (docs/runtime.md, "Accuracy").
constexpr int64_t kExpUlp = 2;
constexpr int64_t kLogUlp = 2;
constexpr int64_t kTanhUlp = 5;
constexpr int64_t kErfUlp = 7;
constexpr int64_t kSigmoidUlp = 4;

TEST(CpuMath, ExpUlp) {
  // Past both ends: overflow to inf above 88.72, subnormal results below -87.34, 0 below -103.97.
  EXPECT_LE(measure("exp", sweep(-110.0f, 90.0f, kLinear, kDense), exp_ref).max_ulps, kExpUlp);
}

TEST(CpuMath, LogUlp) {
  // Every binade of positive floats, subnormals included, plus a linear sweep of [0, 4].
  std::vector<float> xs = sweep(0.0f, kMax, 0, kDense);
  for (int i = 0; i < kLinear; ++i)
    xs.push_back(4.0f * static_cast<float>(i) / static_cast<float>(kLinear));
  EXPECT_LE(measure("log", xs, log_ref).max_ulps, kLogUlp);
}

TEST(CpuMath, TanhUlp) {
  EXPECT_LE(measure("tanh", sweep(-12.0f, 12.0f, kLinear, kDense), tanh_ref).max_ulps, kTanhUlp);
}

TEST(CpuMath, ErfUlp) {
  EXPECT_LE(measure("erf", sweep(-6.0f, 6.0f, kLinear, kDense), erf_ref).max_ulps, kErfUlp);
}

TEST(CpuMath, ErfOfTinyInputs) {
  // Regression: erf computed x * P(x^2) / Q(x^2), and for |x| < 1e-36 the product x * P
  // underflowed into the subnormals and lost bits: erf(-2.04086734e-38) was -2.30286713e-38
  // instead of -2.30287218e-38 (36 ulp). There erf(x) is 2x/sqrt(pi) to within an ulp.
  EXPECT_LE(measure("erf", sweep(-1e-36f, 1e-36f, 1 << 14, 1 << 16), erf_ref).max_ulps, kErfUlp);
}

TEST(CpuMath, SigmoidUlp) {
  // Past both ends: results 1 above 17, subnormal below -87.33, 0 below -103.97.
  EXPECT_LE(measure("sigmoid", sweep(-120.0f, 40.0f, kLinear, kDense), sigmoid_ref).max_ulps,
            kSigmoidUlp);
}

TEST(CpuMath, SigmoidOfSubnormalResults) {
  // Regression: sigmoid was 1 / (1 + exp(-x)) in f32 everywhere; below -88.72, exp(-x)
  // overflowed to inf and the result was 0 where the interpreter gives a subnormal:
  // sigmoid(-88.7230835) was 0 instead of 2.93801841e-39, and so on down to -103.28.
  EXPECT_LE(measure("sigmoid", sweep(-104.0f, -87.3f, 1 << 14, 1 << 14), sigmoid_ref).max_ulps,
            kSigmoidUlp);
}

// ---- special values, exactly -----------------------------------------------------------

struct Special {
  float x;
  float want;
};

/// Runs `op` over the inputs of `cases` twice: all together in a vector loop (padded to 64
/// elements), then one at a time through an f32[1] graph (the scalar loop), and checks every
/// result bit for bit (any NaN matches any NaN).
void expect_specials(const std::string& op, const std::vector<Special>& cases) {
  std::vector<float> xs(64, 1.0f);
  ASSERT_LE(cases.size(), xs.size());
  for (size_t i = 0; i < cases.size(); ++i) xs[i] = cases[i].x;
  const Graph wide = parse_or_fail(fmt::format(
      "graph @w(%x: f32[64]) -> f32[64] {{\n  %y = {} %x : f32[64]\n  return %y\n}}\n", op));
  const Graph one = parse_or_fail(fmt::format(
      "graph @s(%x: f32[1]) -> f32[1] {{\n  %y = {} %x : f32[1]\n  return %y\n}}\n", op));
  const std::vector<float> vec =
      run_cpu(wide, {HostTensor::from_vector<float>(xs, {64})}).at(0).to_vector<float>();
  auto same = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) ||
           std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Special& c = cases[i];
    const float scalar =
        run_cpu(one, {HostTensor::from_vector<float>({c.x}, {1})}).at(0).to_vector<float>()[0];
    EXPECT_TRUE(same(vec[i], c.want))
        << op << "(" << c.x << ") = " << vec[i] << " in a vector loop, expected " << c.want;
    EXPECT_TRUE(same(scalar, c.want))
        << op << "(" << c.x << ") = " << scalar << " in the scalar loop, expected " << c.want;
  }
}

TEST(CpuMath, ExpSpecialValues) {
  expect_specials("exp", {{-kInf, 0.0f},
                          {kInf, kInf},
                          {kNaN, kNaN},
                          {0.0f, 1.0f},
                          {-0.0f, 1.0f},
                          {89.0f, kInf},
                          {88.7229f, kInf},
                          {-104.0f, 0.0f},
                          {-1000.0f, 0.0f},
                          {kMax, kInf},
                          {-kMax, 0.0f},
                          {kMinSubnormal, 1.0f},
                          {1.0f, static_cast<float>(std::exp(1.0))},
                          {-100.0f, static_cast<float>(std::exp(-100.0))}});  // a subnormal result
}

TEST(CpuMath, LogSpecialValues) {
  auto log_of = [](float x) { return static_cast<float>(std::log(static_cast<double>(x))); };
  expect_specials("log", {{0.0f, -kInf},
                          {-0.0f, -kInf},
                          {-1.0f, kNaN},
                          {-kInf, kNaN},
                          {-kMinSubnormal, kNaN},
                          {kInf, kInf},
                          {kNaN, kNaN},
                          {1.0f, 0.0f},
                          {kMax, log_of(kMax)},
                          // Subnormal inputs are scaled into the normal range first.
                          {kMinSubnormal, log_of(kMinSubnormal)},
                          {1e-40f, log_of(1e-40f)},
                          {5.877472e-39f, log_of(5.877472e-39f)},
                          {1.1754942e-38f, log_of(1.1754942e-38f)},
                          {kMinNormal, log_of(kMinNormal)}});
}

TEST(CpuMath, TanhSpecialValues) {
  expect_specials("tanh", {{kInf, 1.0f},
                           {-kInf, -1.0f},
                           {kNaN, kNaN},
                           {0.0f, 0.0f},
                           {-0.0f, -0.0f},
                           {9.5f, 1.0f},
                           {-9.5f, -1.0f},
                           {kMax, 1.0f},
                           {-kMax, -1.0f},
                           {kMinSubnormal, kMinSubnormal},
                           {-1e-30f, -1e-30f}});
}

TEST(CpuMath, ErfSpecialValues) {
  expect_specials("erf", {{kInf, 1.0f},
                          {-kInf, -1.0f},
                          {kNaN, kNaN},
                          {0.0f, 0.0f},
                          {-0.0f, -0.0f},
                          {5.0f, 1.0f},
                          {-5.0f, -1.0f},
                          {kMax, 1.0f},
                          {-kMax, -1.0f}});
}

TEST(CpuMath, SigmoidSpecialValues) {
  expect_specials("sigmoid", {{-kInf, 0.0f},
                              {kInf, 1.0f},
                              {kNaN, kNaN},
                              {0.0f, 0.5f},
                              {-0.0f, 0.5f},
                              {40.0f, 1.0f},
                              {-kMax, 0.0f},
                              {kMax, 1.0f},
                              {-200.0f, 0.0f}});
}

// The inline f32 functions are one algorithm for every device (f32_math.h): OpenCL C's exp
// and tanh are its steps printed as helpers, which PoCL runs to the cpu device's bits.
// (Vulkan's log, tanh and erf are its steps too, but lavapipe's f32 division may be off by
// the 2.5 ulp Vulkan allows: docs/backends.md.)
TEST(F32Math, OpenClExpAndTanhAreTheCpuDevicesBitForBit) {
  const Device opencl = Device::parse("opencl:0");
  const std::vector<Device> devices = registered_devices();
  if (std::find(devices.begin(), devices.end(), opencl) == devices.end()) GTEST_SKIP() << "no opencl:0 here";
  std::vector<float> xs = sweep(-110.0f, 90.0f, 1 << 14, 1 << 14);
  for (uint32_t bits = 0; bits < 1u << 14; ++bits) xs.push_back(std::bit_cast<float>(bits * 262147u));  // every kind
  for (const char* op : {"exp", "tanh"}) {
    const std::string type = fmt::format("f32[{}]", xs.size());
    const Graph g = parse_or_fail(fmt::format("graph @{0}s(%x: {1}) -> {1} {{\n  %y = {0} %x : {1}\n  return %y\n}}\n", op, type));
    const std::vector<HostTensor> in{HostTensor::from_vector<float>(xs, {static_cast<int64_t>(xs.size())})};
    const std::vector<float> cpu = run_cpu(g, in).at(0).to_vector<float>();
    const std::vector<float> cl = run_on_host(opencl, g, in).at(0).to_vector<float>();
    int differ = 0;
    for (size_t i = 0; i < xs.size(); ++i)
      if (ulps(cl[i], cpu[i]) != 0 && differ++ < 3)
        ADD_FAILURE() << op << "(" << xs[i] << "): opencl:0 " << cl[i] << ", cpu " << cpu[i];
    EXPECT_EQ(differ, 0) << op;
  }
}

}  // namespace
}  // namespace kiln
