// Every op on the device under test (cpu; KILN_TEST_DEVICE names another, and ctest runs
// these suites again on opencl:0 and vulkan:0) against the reference interpreter.
//
// The interpreter is the oracle (interpreter_ops_test checks it by hand). Each test builds
// graphs from IR text, fills their parameters with seeded data full of special values
// (NaN, infinities, signed zeros, subnormals, integer limits), runs them on both and compares
// bit for bit (any NaN matches any NaN), except where docs/runtime.md allows the cpu device
// to round differently: f32 exp/log/tanh/erf/sigmoid within their ulp bounds
// (cpu_math_test measures them), and float sums, products and matmuls within a relative
// tolerance of the sum of the magnitudes involved.
//
// Many elementwise ops are checked in one kernel: a "stack" graph computes each op on the
// same parameters and concatenates the results along a new leading axis, so a dozen ops cost
// one compilation. Shapes of 1 and 7 elements run the scalar loop only; 37, 100 and [5,37]
// run the vector loop and a scalar remainder. EveryOpIsCovered runs the other tests of this
// file and fails when an op of ops.def appears in no graph they ran.
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <span>

#include "kiln/backends/backend.h"
#include "kiln/backends/vulkan.h"
#include "kiln/engine/compile.h"
#include "kiln/runtime/stats.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::parse_or_fail;
using test::run_on_device_under_test;


constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- data --------------------------------------------------------------------------------

/// What a parameter is filled with.
enum class Data {
  General,   // special values every third element, the rest random over several magnitudes
  Smooth,    // |x| <= 10, infinities, NaN, signed zeros: where the approximated f32 math is
             // used most (cpu_math_test sweeps its whole range)
  NearOne,   // |x| in [0.5, 1.5], either sign (products that neither overflow nor vanish)
  Exponent,  // integers in [-3, 40] (pow exponents; floats hold the same values)
  Unit,      // uniform in [-1, 1] (matmul and sum operands: tolerances scale with them)
};

uint64_t mix(uint64_t seed, uint64_t k) {  // splitmix64 of (seed, k)
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + k * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double unit(uint64_t h) {
  return static_cast<double>(h >> 11) * 0x1p-53;
}  // [0, 1)

const std::vector<double> kFloatSpecials = {kNaN,
                                            kInf,
                                            -kInf,
                                            0.0,
                                            -0.0,
                                            1.0,
                                            -1.0,
                                            0.5,
                                            -0.5,
                                            2.5,
                                            -2.5,
                                            3.5,
                                            -3.5,
                                            1e-40,
                                            -1e-40,  // subnormal in f32
                                            1.1754943508222875e-38,
                                            3.4028234663852886e+38,
                                            -3.4028234663852886e+38,
                                            1e10,
                                            -1e10,
                                            2147483648.0,
                                            -2147483904.0,
                                            16777217.0,
                                            1e20,
                                            -1e20,
                                            100.0,
                                            -100.0,
                                            9.3e18,
                                            -9.3e18,
                                            1e300,
                                            -1e300,
                                            4.9e-324,
                                            9007199254740993.0};
const std::vector<double> kSmoothSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0,
                                             -1.0, 0.5,  -2.5,  9.5, -9.5, 1e-3};
const std::vector<int64_t> kI32Specials = {INT32_MIN, INT32_MAX, 0,      1,  -1, 2, -2,
                                           46341,     65536,     -65536, 31, 32, 7};
const std::vector<int64_t> kI64Specials = {
    INT64_MIN,
    INT64_MAX,
    0,
    1,
    -1,
    int64_t{1} << 31,
    -(int64_t{1} << 31) - 1,
    int64_t{1} << 32,
    (int64_t{1} << 53) + 1,
    (int64_t{1} << 60) + (int64_t{1} << 36) + 1,  // rounds differently via f64
    -((int64_t{1} << 60) + (int64_t{1} << 36) + 1),
    3037000500,
    63,
    64};

/// Fills `t` with `data` from stream `seed`.
void fill(HostTensor& t, Data data, uint64_t seed) {
  const DType d = t.dtype();
  for (int64_t k = 0; k < t.numel(); ++k) {
    const uint64_t h = mix(seed, static_cast<uint64_t>(k));
    const bool special = k % 3 == 0;
    const size_t pick = static_cast<size_t>(static_cast<uint64_t>(k) / 3 + seed);
    if (is_bool(d)) {
      t.set_int(k, static_cast<int64_t>(h & 1));
      continue;
    }
    switch (data) {
      case Data::Exponent:
        t.set_int(k, static_cast<int64_t>(h % 44) - 3);
        continue;  // set_int converts for floats
      case Data::NearOne:
        t.set_double(k, (h & 1 ? -1 : 1) * (0.5 + unit(h >> 1)));
        continue;
      case Data::Unit:
        t.set_double(k, 2 * unit(h) - 1);
        continue;
      case Data::Smooth:
        if (is_float(d)) {
          t.set_double(
              k, special ? kSmoothSpecials[pick % kSmoothSpecials.size()] : 20 * unit(h) - 10);
          continue;
        }
        break;
      case Data::General:
        break;
    }
    if (is_float(d)) {
      const double magnitude = std::array{1.0, 10.0, 1000.0}[h % 3];
      t.set_double(k, special ? kFloatSpecials[pick % kFloatSpecials.size()]
                              : magnitude * (2 * unit(h >> 2) - 1));
    } else {
      const auto& specials = d == DType::I32 ? kI32Specials : kI64Specials;
      if (special)
        t.set_int(k, specials[pick % specials.size()]);
      else if (h % 3 == 0)
        t.set_int(k, static_cast<int64_t>(h >> 1));  // any bits (i32 keeps the low 32)
      else
        t.set_int(k, static_cast<int64_t>(h % 101) - 50);
    }
  }
}

/// One filled tensor per graph parameter; parameter i uses kinds[i] (the last kind repeats).
std::vector<HostTensor> inputs_for(const Graph& g, std::vector<Data> kinds = {Data::General},
                                   uint64_t seed = 1) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    HostTensor t(g.type(g.inputs()[i]));
    fill(t, kinds[std::min(i, kinds.size() - 1)], seed * 131 + i);
    in.push_back(std::move(t));
  }
  return in;
}

// ---- comparison --------------------------------------------------------------------------

/// How close a cpu result must be. Default: bit for bit.
struct Tol {
  int64_t f32_ulps = 0;  // f32 elements: within this many ulps
  double rtol = 0;       // floats: |got - want| <= rtol * (|want| + magnitude)
  double magnitude = 0;  // the sum of the magnitudes that went into one element
};
const Tol kExact{};

// A math function on the device under test: on the cpu, `host` (docs/runtime.md, "Accuracy",
// measured by cpu_math_test); on a device with a libm of its own (OpenCL), the bound its
// specification gives for f32 (OpenCL 1.2, 7.4: exp and log 3 ulp, tanh 5, erf 16, pow 16,
// sin and cos 4), and for f64 a few units of 2^-52.
Tol device_math(const Tol& host, int64_t spec_f32_ulps) {
  const Backend* b = engine_for(test::device_under_test()).backend();
  if (!b || b->capabilities().exact_math) return host;
  return Tol{std::max(host.f32_ulps, spec_f32_ulps), 16 * 0x1p-52, 0};
}
const Tol kExpUlp = device_math({2}, 3), kLogUlp = device_math({2}, 3), kTanhUlp = device_math({5}, 5),
          kErfUlp = device_math({7}, 16), kSigmoidUlp = device_math({4}, 6), kSinCos = device_math(kExact, 4),
          kPow = device_math(kExact, 16),
          // The inverse trigonometric functions: the C library in double on cpu and wherever the
          // device has doubles (OpenCL); Vulkan computes f32 with GLSL's own, bounded at 4096 ulp.
          kInverseTrig = device_math(kExact, 4096);

int64_t ordered(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
}

// A Vulkan device that cannot keep f32 subnormals (no shaderDenormPreserveFloat32) may flush
// them to zero, in results and in operands: lavapipe flushes results; NVIDIA's driver also
// compares a subnormal operand as zero (sign and relu of one gave it back unchanged, and
// bool(x) false). There the inputs' f32 and bf16 subnormals are zeros of their sign for both
// the device and the interpreter, and a zero where the interpreter has a subnormal result is
// not an error. Where the device can keep them, kiln's shaders ask for it (DenormPreserve)
// and every value must match.
bool flushes_f32_subnormals() {
  const Device d = test::device_under_test();
  return d.kind == Device::Kind::Vulkan && !vulkan_devices().at(static_cast<size_t>(d.index)).f32_subnormals;
}
std::vector<HostTensor> inputs_as_the_device_reads_them(const std::vector<HostTensor>& inputs) {
  if (!flushes_f32_subnormals()) return inputs;
  std::vector<HostTensor> out = inputs;
  for (HostTensor& t : out) {
    if (t.dtype() != DType::F32 && t.dtype() != DType::BF16) continue;  // (bf16's subnormals are f32's)
    for (int64_t k = 0; k < t.numel(); ++k)
      if (const double v = t.get_double(k); v != 0 && std::fabs(v) < 0x1p-126) t.set_double(k, std::copysign(0.0, v));
  }
  return out;
}

// GLSL has no double-precision exp, log, tanh, sin, cos, pow, erf or inverse trigonometric
// functions: on Vulkan devices these
// ops on f64 are a clear error (docs/backends.md), checked instead of the values.
bool lacks_f64_math() { return test::device_under_test().kind == Device::Kind::Vulkan; }
bool is_f64_math(const std::string& expr) {
  for (const char* op : {"exp ", "log ", "tanh ", "sin ", "cos ", "pow ", "erf ", "sigmoid ", "asin ", "acos ", "atan ",
                         "atan2 "})
    if (expr.starts_with(op)) return true;
  return false;
}
void expect_f64_math_error(const std::string& text) {
  const Graph g = parse_or_fail(text);
  try {
    run_on_device_under_test(g, inputs_for(g, {Data::General}));
    ADD_FAILURE() << "f64 math ran on " << test::device_under_test().str() << ":\n" << text;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("GLSL has no double-precision")) << text;
  }
}

bool close(const HostTensor& want, const HostTensor& got, int64_t k, const Tol& tol) {
  if (!is_float(want.dtype())) return want.get_int(k) == got.get_int(k);
  const double w = want.get_double(k), g = got.get_double(k);
  if (std::isnan(w) || std::isnan(g)) return std::isnan(w) && std::isnan(g);
  // (bf16's subnormals are f32's.)
  if ((want.dtype() == DType::F32 || want.dtype() == DType::BF16) && g == 0 && std::fabs(w) < 0x1p-126 &&
      flushes_f32_subnormals())
    return true;
  const size_t es = dtype_size(want.dtype());
  if (std::memcmp(want.data() + k * es, got.data() + k * es, es) == 0)
    return true;  // bits, so -0.0 != 0.0
  if (want.dtype() == DType::F32 && tol.f32_ulps > 0 &&
      std::abs(ordered(static_cast<float>(w)) - ordered(static_cast<float>(g))) <= tol.f32_ulps)
    return true;
  return tol.rtol > 0 && std::isfinite(w) && std::isfinite(g) &&
         std::fabs(g - w) <= tol.rtol * (std::fabs(w) + tol.magnitude);
}

std::string value_str(const HostTensor& t, int64_t k) {
  if (!is_float(t.dtype())) return std::to_string(t.get_int(k));
  return fmt::format("{:.9g}", t.get_double(k));
}

/// Compares the outputs of `g` on the cpu device and on the interpreter. `tol_of(o, k)` is
/// the tolerance of element k of output o, `label(o, k)` names it in failure messages.
void compare(const Graph& g, const std::vector<HostTensor>& given,
             const std::function<const Tol&(size_t, int64_t)>& tol_of,
             const std::function<std::string(size_t, int64_t)>& label) {
  const std::vector<HostTensor> inputs = inputs_as_the_device_reads_them(given);
  const std::vector<HostTensor> want = interpret(g, inputs);
  std::vector<HostTensor> got;
  try {
    got = run_on_device_under_test(g, inputs);
  } catch (const std::exception& e) {
    ADD_FAILURE() << test::device_under_test().str() << " failed: " << e.what() << "\n" << print_graph(g);
    return;
  }
  ASSERT_EQ(got.size(), want.size());
  bool printed = false;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].type(), want[o].type()) << "output " << o;
    int bad = 0;
    for (int64_t k = 0; k < want[o].numel(); ++k) {
      if (close(want[o], got[o], k, tol_of(o, k))) continue;
      if (++bad <= 6)
        ADD_FAILURE() << label(o, k) << ": " << test::device_under_test().str() << " " << value_str(got[o], k) << ", interpreter "
                      << value_str(want[o], k);
    }
    if (bad > 6) ADD_FAILURE() << "... " << bad << " elements of output " << o << " differ";
    if (bad && !printed) std::cerr << print_graph(g);
    printed = printed || bad;
  }
}

std::string index_str(const Shape& s, int64_t k) {
  std::string out;
  for (int d = s.rank() - 1; d >= 0; --d) {
    out = std::to_string(s[d] ? k % s[d] : 0) + (out.empty() ? "" : ", ") + out;
    if (s[d]) k /= s[d];
  }
  return "[" + out + "]";
}

/// Runs the graph in `text` on both and compares output o with tols[o] (the last one repeats).
void expect_same(const std::string& text, const std::vector<HostTensor>& inputs,
                 const std::vector<Tol>& tols) {
  const Graph g = parse_or_fail(text);
  compare(
      g, inputs,
      [&](size_t o, int64_t) -> const Tol& { return tols[std::min(o, tols.size() - 1)]; },
      [&](size_t o, int64_t k) {
        return fmt::format("%{} {}", g.node(g.outputs()[o]).name,
                           index_str(g.type(g.outputs()[o]).shape, k));
      });
}
void expect_same(const std::string& text, const std::vector<HostTensor>& inputs,
                 const Tol& tol = kExact) {
  expect_same(text, inputs, std::vector<Tol>{tol});
}
void expect_same(const std::string& text, std::vector<Data> kinds = {Data::General},
                 const Tol& tol = kExact) {
  const Graph g = parse_or_fail(text);
  expect_same(text, inputs_for(g, std::move(kinds)), tol);
}

/// One op of a stack: `expr` ("add %a, %b") gives a value of the stack's row type.
struct Row {
  std::string expr;
  Tol tol = kExact;
};

/// Computes every row's `expr` from the parameters `params` ("%a: f32[37], %b: f32[37]") as
/// a value of type `type` ("f32[37]"), concatenates them along a new axis 0 (one kernel) and
/// compares row by row.
void expect_rows(const std::string& params, const std::string& type, std::vector<Row> rows,
                 std::vector<Data> kinds = {Data::General}) {
  if (lacks_f64_math() && type.starts_with("f64")) {
    std::erase_if(rows, [&](const Row& r) {
      if (!is_f64_math(r.expr)) return false;
      expect_f64_math_error(fmt::format("graph @one({}) -> {} {{\n  %v = {} : {}\n  return %v\n}}\n", params, type, r.expr, type));
      return true;
    });
    if (rows.empty()) return;
  }
  const size_t bracket = type.find('[');
  const std::string dims = type.substr(bracket + 1, type.size() - bracket - 2);
  const std::string row_type =
      type.substr(0, bracket) + "[1" + (dims.empty() ? "" : "," + dims) + "]";
  const std::string all_type =
      fmt::format("{}[{}{}]", type.substr(0, bracket), rows.size(), dims.empty() ? "" : "," + dims);
  std::string text = fmt::format("graph @stack({}) -> {} {{\n", params, all_type);
  std::string names;
  for (size_t i = 0; i < rows.size(); ++i) {
    text += fmt::format("  %v{0} = {1} : {2}\n  %r{0} = reshape %v{0} : {3}\n", i, rows[i].expr,
                        type, row_type);
    names += (i ? ", %r" : "%r") + std::to_string(i);
  }
  text += fmt::format("  %all = concat {} {{axis = 0}} : {}\n  return %all\n}}\n", names, all_type);
  const Graph g = parse_or_fail(text);
  if (g.outputs().empty()) return;  // did not parse (reported)
  const int64_t per_row = g.type(g.outputs()[0]).shape.numel() / static_cast<int64_t>(rows.size());
  compare(
      g, inputs_for(g, std::move(kinds)),
      [&](size_t, int64_t k) -> const Tol& { return rows[static_cast<size_t>(k / per_row)].tol; },
      [&](size_t, int64_t k) {
        if (per_row == 0) return std::string();
        return fmt::format("'{}' on {} at element {}", rows[static_cast<size_t>(k / per_row)].expr,
                           type, k % per_row);
      });
}

const std::vector<std::string> kShapes = {"[1]", "[7]", "[37]", "[100]", "[5,37]"};

// ---- sources -----------------------------------------------------------------------------


TEST(DeviceSources, ConstantsOfEveryType) {
  // Constants feed kernels as literals (splats) or buffers (data); the add keeps them from
  // being returned as they are.
  expect_same(
      "graph @c(%x: f32[7], %i: i32[7], %l: i64[7], %b: bool[7], %d: f64[7]) -> (f32[7], i32[7], "
      "i64[7], bool[7], f64[7], f32[7]) {\n"
      "  %cf = constant {data = [nan, inf, -inf, -0.0, 1e-45, 3.4028235e38, 0.1]} : f32[7]\n"
      "  %ci = constant {data = [-2147483648, 2147483647, 0, -1, 1, 7, 100]} : i32[7]\n"
      "  %cl = constant {value = 9007199254740993} : i64[]\n"
      "  %cb = constant {data = [true, false, true, true, false, false, true]} : bool[7]\n"
      "  %cd = constant {value = -0.0} : f64[]\n"
      "  %cs = constant {value = 0.1} : f32[]\n"
      "  %yf = add %x, %cf : f32[7]\n"
      "  %yi = add %i, %ci : i32[7]\n"
      "  %yl = sub %l, %cl : i64[7]\n"
      "  %yb = or %b, %cb : bool[7]\n"
      "  %yd = mul %d, %cd : f64[7]\n"
      "  %ys = mul %x, %cs : f32[7]\n"
      "  return %yf, %yi, %yl, %yb, %yd, %ys\n}\n");
}

TEST(DeviceSources, LaunchScalarsOfEveryTypeAreArguments) {
  const std::string text =
      "graph @s(%x: f32[37], %i: i32[37], %b: bool[37]) -> (f32[37], f64[37], i32[37], i64[37], bool[37], f32[37]) {\n"
      "  %a = scalar {slot = 0, value = -2.5} : f32[]\n"
      "  %d = scalar {slot = 1, value = 1e-300} : f64[]\n"
      "  %n = scalar {slot = 2, value = -2147483648} : i32[]\n"
      "  %l = scalar {slot = 3, value = 9007199254740993} : i64[]\n"
      "  %t = scalar {slot = 4, value = true} : bool[]\n"
      "  %s = scalar {slot = 5, value = 3.0} : f32[37]\n"
      "  %y0 = mul %x, %a : f32[37]\n"
      "  %y1 = add %x, %d : f64[37]\n"
      "  %y2 = max %i, %n : i32[37]\n"
      "  %y3 = add %i, %l : i64[37]\n"
      "  %y4 = and %b, %t : bool[37]\n"
      "  return %y0, %y1, %y2, %y3, %y4, %s\n}";
  expect_same(text, {Data::General});
  // The same executable with other values: the plan cache hits, the results follow.
  const Graph g = parse_or_fail(text);
  RuntimeCounters& c = runtime_counters();
  std::string other = text;
  other.replace(other.find("-2.5"), 4, "0.75");
  other.replace(other.find("value = true"), 12, "value = false");
  const uint64_t misses = c.plan_misses;
  expect_same(other, {Data::General});
  EXPECT_EQ(c.plan_misses, misses) << "a new scalar value compiles nothing";
}

TEST(DeviceSources, InputsReturnedAndUsed) {
  expect_same(
      "graph @p(%x: f32[37], %b: bool[37]) -> (f32[37], bool[37], f32[37]) {\n"
      "  %y = neg %x : f32[37]\n  return %x, %b, %y\n}\n");
}

TEST(DeviceSources, ArangeBitIdentical) {
  expect_same(
      "graph @r() -> (f32[100], f64[37], i32[7], i64[100], i32[3], f32[5,37]) {\n"
      "  %a = arange {start = 0.1, step = 0.3} : f32[100]\n"
      "  %b = arange {start = -1e10, step = 3.14159} : f64[37]\n"
      "  %c = arange {start = 2147483645, step = 1} : i32[7]\n"              // wraps past INT32_MAX
      "  %d = arange {start = 9223372036854775000, step = 17} : i64[100]\n"  // wraps
      "  %e = arange {start = 5, step = -3} : i32[3]\n"
      "  %f0 = arange {start = 1.0, step = 1e-3} : f32[185]\n"
      "  %f = reshape %f0 : f32[5,37]\n"
      "  return %a, %b, %c, %d, %e, %f\n}\n",
      std::vector<HostTensor>{});
}

TEST(DeviceSources, RandBitIdenticalThroughViews) {
  // The element index of rand is its own row-major index, whatever view reads it.
  expect_same(
      "graph @r(%x: f32[5,37]) -> (f32[100], f64[37], f32[5,37], f32[5,37], f64[2,12], f32[1]) {\n"
      "  %a = rand {seed = 0} : f32[100]\n"
      "  %b = rand {seed = -9223372036854775808} : f64[37]\n"
      "  %c0 = rand {seed = 42} : f32[37,5]\n"
      "  %c = permute %c0 {perm = [1, 0]} : f32[5,37]\n"
      "  %d0 = rand {seed = 7} : f32[5,37]\n"
      "  %d = add %d0, %x : f32[5,37]\n"
      "  %e0 = rand {seed = 123456789012} : f64[5,37]\n"
      "  %e = slice %e0 {start = [1, 2], stop = [5, 37], step = [2, 3]} : f64[2,12]\n"
      "  %f = rand {seed = 1} : f32[1]\n"
      "  return %a, %b, %c, %d, %e, %f\n}\n",
      {Data::Unit});
}

// ---- elementwise unary -------------------------------------------------------------------


TEST(DeviceUnary, ExactFloatOps) {
  // sqrt, rsqrt, floor, ceil and the sign ops are exact; sin and cos (and all f64 math) go
  // through the C library in double, as in the interpreter.
  for (const char* t : {"f32", "f64"})
    for (const std::string& s : kShapes) {
      const std::string type = t + s;
      expect_rows("%x: " + type, type,
                  {{"neg %x"},
                   {"abs %x"},
                   {"relu %x"},
                   {"sqrt %x"},
                   {"rsqrt %x"},
                   {"floor %x"},
                   {"ceil %x"},
                   {"sin %x", kSinCos},
                   {"cos %x", kSinCos}});
    }
}

TEST(DeviceUnary, RoundSignAndFloatTests) {
  // round is half to even (General data holds +-0.5, 2.5, 3.5); sign passes zeros and NaN
  // through; isnan and isinf give bools.
  for (const char* t : {"f32", "f64"})
    for (const std::string& s : kShapes) {
      const std::string type = t + s;
      expect_rows("%x: " + type, type, {{"round %x"}, {"sign %x"}});
      expect_same(fmt::format("graph @p(%x: {0}) -> (bool{1}, bool{1}) {{\n  %n = isnan %x : bool{1}\n"
                              "  %i = isinf %x : bool{1}\n  return %n, %i\n}}\n",
                              type, s));
    }
  for (const char* t : {"i32[37]", "i64[37]"}) expect_rows(fmt::format("%x: {}", t), t, {{"sign %x"}});
}

TEST(DeviceUnary, ApproximatedFloatMath) {
  // f32: inline approximations within their ulp bounds; f64: libm, bit for bit.
  for (const char* t : {"f32", "f64"})
    for (const std::string& s : kShapes) {
      const std::string type = t + s;
      expect_rows("%x: " + type, type,
                  {{"exp %x", kExpUlp},
                   {"log %x", kLogUlp},
                   {"tanh %x", kTanhUlp},
                   {"erf %x", kErfUlp},
                   {"sigmoid %x", kSigmoidUlp}},
                  {Data::Smooth});
    }
}

TEST(DeviceUnary, ApproximatedFloatMathOverTheWholeRange) {
  // General data: subnormals, huge values and infinities too (cpu_math_test sweeps densely).
  expect_rows("%x: f32[100]", "f32[100]",
              {{"exp %x", kExpUlp},
               {"log %x", kLogUlp},
               {"tanh %x", kTanhUlp},
               {"erf %x", kErfUlp},
               {"sigmoid %x", kSigmoidUlp}});
}

TEST(DeviceUnary, IntegerAndBool) {
  // neg and abs of the minimum wrap to the minimum.
  for (const char* t : {"i32", "i64"})
    for (const std::string& s : kShapes)
      expect_rows(std::string("%x: ") + t + s, t + s, {{"neg %x"}, {"abs %x"}, {"relu %x"}});
  for (const std::string& s : kShapes) expect_rows("%x: bool" + s, "bool" + s, {{"not %x"}});
}

// ---- cast --------------------------------------------------------------------------------


/// Every cast between two of `types` on parameters of shape `shape`: one stack per target.
void expect_casts(std::span<const char* const> types, const std::string& shape) {
  for (const char* to : types) {
    std::vector<Row> rows;
    std::string params;
    for (const char* from : types) {
      rows.push_back({std::string("cast %") + from});
      params += fmt::format("{}%{}: {}{}", params.empty() ? "" : ", ", from, from, shape);
    }
    expect_rows(params, to + shape, rows);
  }
}

TEST(DeviceCast, EveryPairOfTypes) {
  // Float -> int truncates, saturates and maps NaN to 0; int -> int wraps; i64 -> f32 rounds
  // twice, through f64; float -> bool is x != 0 (NaN is true).
  const char* types[] = {"bool", "i32", "i64", "f32", "f64"};
  for (const std::string& s : {std::string("[100]"), std::string("[7]")}) expect_casts(types, s);
}

TEST(DeviceCast, SaturationAndNaNExactly) {
  const std::vector<double> xs = {
      kNaN, kInf, -kInf, 1e10,   -1e10,   2147483647.0,          2147483648.0, -2147483649.0,
      2.7,  -2.7, -0.5,  9.3e18, -9.3e18, 9223372036854775807.0, -0.0};
  expect_same(
      "graph @c(%x: f64[15]) -> (i32[15], i64[15], bool[15]) {\n"
      "  %a = cast %x : i32[15]\n"
      "  %b = cast %x : i64[15]\n"
      "  %c = cast %x : bool[15]\n"
      "  return %a, %b, %c\n}\n",
      {HostTensor::from_vector<double>(xs, {15})});
  // Checked by hand as well: NaN -> 0, saturation at both ends.
  const Graph g = parse_or_fail(
      "graph @c(%x: f64[15]) -> i32[15] {\n  %a = cast %x : i32[15]\n  return %a\n}\n");
  const auto got =
      run_on_device_under_test(g, {HostTensor::from_vector<double>(xs, {15})}).at(0).to_vector<int32_t>();
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], INT32_MAX);
  EXPECT_EQ(got[2], INT32_MIN);
  EXPECT_EQ(got[3], INT32_MAX);
  EXPECT_EQ(got[4], INT32_MIN);
}

TEST(DeviceCast, I64ToF32RoundsThroughF64) {
  // docs/ir.md 5.2: "i64 -> f32 rounds twice, through double". 2^60 + 2^36 + 1 lies just
  // above the midpoint of two floats; in f64 it becomes the midpoint itself (2^60 + 2^36),
  // which rounds to even: 2^60. Regression: a direct conversion (one rounding) gave
  // 2^60 + 2^37.
  const std::vector<int64_t> xs = {(int64_t{1} << 60) + (int64_t{1} << 36) + 1,
                                   -((int64_t{1} << 60) + (int64_t{1} << 36) + 1),
                                   (int64_t{1} << 53) + 1, INT64_MAX};
  const Graph g =
      parse_or_fail("graph @c(%x: i64[4]) -> f32[4] {\n  %y = cast %x : f32[4]\n  return %y\n}\n");
  const auto got = run_on_device_under_test(g, {HostTensor::from_vector<int64_t>(xs, {4})}).at(0).to_vector<float>();
  EXPECT_EQ(got[0], 0x1p60f) << "got 2^60 + " << (static_cast<double>(got[0]) - 0x1p60);
  EXPECT_EQ(got[1], -0x1p60f);
  EXPECT_EQ(got[2], 0x1p53f);
  EXPECT_EQ(got[3], 0x1p63f);
}

TEST(DeviceCast, F64ToF16AndBf16RoundOnce) {
  // docs/ir.md 5.2: a float to f16 or bf16 rounds once, from the double. Each value lies just
  // above a halfway point of the narrow type that f32 cannot tell from the point itself:
  // rounded to f32 first, the tie went to even (1 + 2^-11 + 2^-40 to f16 gave 1, not 1 +
  // 2^-10; kiln fuzz --big --seed 175 on cpu, element 15606 of a cast from f64). Then the
  // edges: past f32's range, NaN, f16's smallest subnormal's half, just below f16's overflow.
  const std::vector<double> xs = {1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 1 + 0x1p-8 + 0x1p-40,
                                  -(1 + 0x1p-8 + 0x1p-40), 1e39, NAN, 0x1p-25 + 0x1p-60, 65520 - 0x1p-30, 1.5, -0.0};
  expect_same(
      "graph @c(%x: f64[10]) -> (f16[10], bf16[10]) {\n"
      "  %h = cast %x : f16[10]\n  %b = cast %x : bf16[10]\n  return %h, %b\n}\n",
      {HostTensor::from_vector<double>(xs, {10})});
}

TEST(DeviceCast, StorageTypesToAndFromEveryType) {
  // Narrow integers wrap, floats saturate into them; f16 and bf16 round to nearest even
  // (large values to infinity); u64 to a float rounds once to f64 (to f32 through it, as i64).
  const char* types[] = {"bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"};
  expect_casts(types, "[37]");
}

// ---- binary ------------------------------------------------------------------------------


std::vector<Row> arith_rows(const std::string& a, const std::string& b, bool with_div) {
  std::vector<Row> rows;
  for (const char* op : {"add", "sub", "mul", "max", "min"})
    rows.push_back({fmt::format("{} {}, {}", op, a, b)});
  if (with_div) rows.push_back({fmt::format("div {}, {}", a, b)});
  return rows;
}

TEST(DeviceBinary, ArithmeticOnEveryTypeAndSize) {
  // Integers wrap; floats meet NaN, infinities and signed zeros (max/min are IEEE maximum and
  // minimum: NaN wins, +0.0 > -0.0).
  for (const char* t : {"i32", "i64", "f32", "f64"})
    for (const std::string& s : kShapes) {
      const std::string type = t + s;
      expect_rows(fmt::format("%a: {0}, %b: {0}", type), type,
                  arith_rows("%a", "%b", is_float(*parse_dtype(t))));
    }
}

TEST(DeviceBinary, StorageTypesWrapAfterEveryOp) {
  // Each op's result wraps into its type before the next op reads it: a kernel computes i8
  // ... u32 in a wider register (dtype.h, compute_dtype) and narrows after each op.
  for (const char* t : {"i8", "i16", "u8", "u16", "u32"})
    for (const std::string& s : {std::string("[7]"), std::string("[100]")}) {
      const std::string type = t + s;
      std::vector<Row> rows = arith_rows("%a", "%b", false);
      for (const char* op : {"mod", "fmod", "shl", "shr"}) rows.push_back({fmt::format("{} %a, %c", op)});
      rows.push_back({"neg %a"});
      rows.push_back({"abs %a"});
      rows.push_back({"sign %a"});
      rows.push_back({"pow %a, %c"});
      expect_rows(fmt::format("%a: {0}, %b: {0}, %c: {0}", type), type, rows, {Data::General, Data::General, Data::Exponent});
      // Chains: the wrap before a division, a remainder, a comparison and a shift.
      expect_same(fmt::format("graph @chain(%a: {0}, %b: {0}, %c: {0}) -> (f64{1}, {0}, bool{1}, {0}) {{\n"
                              "  %s = add %a, %b : {0}\n  %p = mul %s, %a : {0}\n"
                              "  %d = div %p, %c : f64{1}\n  %m = mod %p, %c : {0}\n"
                              "  %l = lt %s, %b : bool{1}\n  %h = shr %p, %c : {0}\n"
                              "  return %d, %m, %l, %h\n}}\n",
                              type, s),
                  {Data::General, Data::General, Data::Exponent});
    }
  // u64: the ops that read its bits as any integer does, and its order (values from 2^63 up
  // are the largest, not negative).
  for (const std::string& s : {std::string("[7]"), std::string("[100]")}) {
    expect_rows("%a: u64" + s + ", %b: u64" + s, "u64" + s,
                {{"add %a, %b"}, {"sub %a, %b"}, {"mul %a, %b"}, {"neg %a"}, {"shl %a, %b"}, {"max %a, %b"},
                 {"min %a, %b"}, {"abs %a"}, {"relu %a"}, {"sign %a"}},
                {Data::General, Data::Exponent});
    expect_rows("%a: u64" + s + ", %b: u64" + s, "bool" + s, {{"lt %a, %b"}, {"le %a, %b"}, {"gt %a, %b"}, {"ge %b, %a"}});
    // Remainders and right shifts, built from int64 ops where a value is from 2^63 up; true
    // division and mixed compares through f64.
    expect_rows("%a: u64" + s + ", %b: u64" + s, "u64" + s,
                {{"mod %a, %b"}, {"fmod %a, %b"}, {"mod %b, %a"}, {"shr %a, %b"}, {"shr %b, %a"}},
                {Data::General, Data::Exponent});
    expect_rows("%a: u64" + s + ", %b: u64" + s + ", %c: f32" + s, "f64" + s,
                {{"div %a, %b"}, {"div %b, %a"}, {"add %a, %c"}, {"atan2 %a, %c", kInverseTrig}},
                {Data::General, Data::Exponent});
  }
  // The edges: 2^64 - 1, 2^63 and its neighbours, 0 (written as int64 bits).
  expect_same("graph @e(%a: u64[9], %b: u64[9]) -> (u64[9], u64[9], f64[9], f32[9]) {\n"
              "  %m = mod %a, %b : u64[9]\n  %s = shr %a, %b : u64[9]\n"
              "  %f = cast %a : f64[9]\n  %g = cast %a : f32[9]\n  return %m, %s, %f, %g\n}\n",
              {HostTensor::from_vector<uint64_t>({~0ull, 1ull << 63, (1ull << 63) + 1, (1ull << 63) - 1, 0, ~0ull, 12345,
                                                  (1ull << 63) + 3, (1ull << 53) + 1},
                                                 {9}),
               HostTensor::from_vector<uint64_t>({3, 7, (1ull << 63) + 5, 1ull << 63, 5, ~0ull, 0, 64, 63}, {9})});
  expect_same("graph @r(%a: u64[5,37]) -> (u64[5], u64[37], i64[5], i64[37]) {\n"
              "  %x = reduce_max %a {axes = [1]} : u64[5]\n  %n = reduce_min %a {axes = [0]} : u64[37]\n"
              "  %i = argmax %a {axes = [1]} : i64[5]\n  %j = argmin %a {axes = [0]} : i64[37]\n"
              "  return %x, %n, %i, %j\n}\n");
}

TEST(DeviceBinary, ShiftsOfEveryIntegerWidth) {
  for (const char* t : {"i32", "i64"})
    for (const std::string& s : kShapes)
      expect_rows(fmt::format("%a: {0}{1}, %b: {0}{1}", t, s), t + s, {{"shl %a, %b"}, {"shr %a, %b"}, {"shr %b, %a"}},
                  {Data::General, Data::Exponent});
}

TEST(DeviceBinary, HalfFloatsRoundAfterEveryOp) {
  // Computed in f32 and rounded after each op, which equals the interpreter's rounding of
  // the exact result for these ops (f32 holds their f16 and bf16 results closely enough).
  for (const char* t : {"f16", "bf16"})
    for (const std::string& s : {std::string("[7]"), std::string("[100]")}) {
      const std::string type = t + s;
      std::vector<Row> rows = arith_rows("%a", "%b", false);
      for (const char* op : {"neg %a", "abs %a", "relu %a", "floor %a", "round %a", "sign %a", "fmod %a, %b"})
        rows.push_back({op});
      expect_rows(fmt::format("%a: {0}, %b: {0}", type), type, rows);
      expect_rows(fmt::format("%a: {0}, %b: {0}", type), "bool" + s, {{"lt %a, %b"}, {"eq %a, %b"}, {"isnan %a"}, {"isinf %b"}});
      // A chain rounds at every step, bit for bit.
      expect_same(fmt::format("graph @chain(%a: {0}, %b: {0}) -> {0} {{\n"
                              "  %m = mul %a, %b : {0}\n  %s = add %m, %a : {0}\n  %d = div %s, %b : {0}\n"
                              "  %r = relu %d : {0}\n  return %r\n}}\n",
                              type));
      expect_same(fmt::format("graph @sum(%a: {0}[5,37]) -> ({0}[5], i64[5]) {{\n"
                              "  %s = reduce_sum %a {{axes = [1]}} : {0}[5]\n  %m = argmax %a {{axes = [1]}} : i64[5]\n"
                              "  return %s, %m\n}}\n", t),
                  {Data::Unit}, Tol{0, 1e-2, 37});
    }
}

TEST(DeviceBinary, SignedZerosInMaxMin) {
  const std::vector<float> a = {-0.0f, 0.0f, -0.0f, 0.0f, NAN, 1.0f, -0.0f};
  const std::vector<float> b = {0.0f, -0.0f, -0.0f, 0.0f, -0.0f, NAN, NAN};
  expect_same(
      "graph @z(%a: f32[7], %b: f32[7]) -> (f32[7], f32[7], f32[7]) {\n"
      "  %x = max %a, %b : f32[7]\n"
      "  %n = min %a, %b : f32[7]\n"
      "  %r = relu %a : f32[7]\n"
      "  return %x, %n, %r\n}\n",
      {HostTensor::from_vector<float>(a, {7}), HostTensor::from_vector<float>(b, {7})});
}

// Known zeros in arithmetic keep IEEE 754's rules: x + 0.0 is +0.0 for x = -0.0, 0.0 - x is
// +0.0 for x = +0.0, x * 0.0 is NaN for infinities. lavapipe folded each of these (and a zero
// reached through a cast) until the GLSL dialect hid its zeros (GlslDialect::zero_value).
TEST(DeviceBinary, ArithmeticWithConstantZeros) {
  for (const char* t : {"f32", "f64"}) {
    const std::vector<double> x = {-0.0, 0.0, INFINITY, -INFINITY, NAN, 1.5, -2.0};
    const HostTensor in = t == std::string_view("f32") ? HostTensor::from_vector<float>(std::vector<float>(x.begin(), x.end()), {7})
                                                      : HostTensor::from_vector<double>(x, {7});
    expect_same(fmt::format("graph @z(%x: {0}[7], %b: bool[7]) -> ({0}[7], {0}[7], {0}[7], {0}[7], {0}[7], {0}[7]) {{\n"
                            "  %zero = constant {{value = 0.0}} : {0}[]\n"
                            "  %nzero = constant {{value = -0.0}} : {0}[]\n"
                            "  %izero = constant {{value = 0}} : i32[]\n"
                            "  %one = constant {{value = -1.0}} : {0}[]\n"
                            "  %a = add %x, %zero : {0}[7]\n"
                            "  %s = sub %zero, %x : {0}[7]\n"
                            "  %m = mul %x, %zero : {0}[7]\n"
                            "  %n = mul %nzero, %x : {0}[7]\n"
                            "  %fzero = cast %izero : {0}[]\n"
                            "  %i = mul %fzero, %x : {0}[7]\n"
                            "  %c = add %one, %b : {0}[7]\n"
                            "  return %a, %s, %m, %n, %i, %c\n}}\n",
                            t),
                {in, HostTensor::from_vector<bool>({true, false, true, true, false, true, false}, {7})});
  }
}

// A position widened to i64 and compared with a constant (the bounds test of a pad): lavapipe
// folded `int64_t(i) < c` into false until the GLSL dialect widened through packInt2x32.
TEST(DeviceMovement, PadBoundsOnWidenedPositions) {
  expect_same(
      "graph @p(%x: i64[1,6,1], %y: f64[2,3]) -> (i64[2,6,2], f64[5,4]) {\n"
      "  %a = pad %x {low = [1, 0, 0], high = [0, 0, 1], value = 1} : i64[2,6,2]\n"
      "  %b = pad %y {low = [2, 0], high = [1, 1], value = -0.5} : f64[5,4]\n"
      "  return %a, %b\n}\n");
}

TEST(DeviceBinary, BroadcastRowsAndColumns) {
  // [5,37] with a row [37], a column [5,1], and row against column (outer broadcast).
  for (const char* t : {"i32", "f32", "f64"}) {
    std::vector<Row> rows;
    for (const auto& [a, b] :
         {std::pair{"%m", "%row"}, std::pair{"%col", "%m"}, std::pair{"%row", "%col"}})
      for (Row& r : arith_rows(a, b, *parse_dtype(t) != DType::I32)) rows.push_back(r);
    expect_rows(fmt::format("%m: {0}[5,37], %row: {0}[37], %col: {0}[5,1]", t),
                fmt::format("{}[5,37]", t), rows);
  }
}

TEST(DeviceBinary, Pow) {
  // Floats: pow of the C library in double. Integers: exact square-and-multiply, wrapping;
  // negative exponents give 0 except for bases 1 and -1.
  for (const char* t : {"i32", "i64", "f32", "f64"})
    for (const char* s : {"[7]", "[100]"}) {
      const std::string type = std::string(t) + s;
      expect_rows(fmt::format("%a: {0}, %e: {0}", type), type, {{"pow %a, %e", kPow}, {"pow %e, %e", kPow}},
                  {Data::General, Data::Exponent});
      expect_rows(fmt::format("%a: {0}, %e: {0}", type), type, {{"pow %a, %e", kPow}}, {Data::General});
    }
}

TEST(DeviceUnary, InverseTrigonometry) {
  // Inside [-1, 1] for asin and acos (NaN outside, where General data also goes), every
  // magnitude for atan and atan2, whose quadrants and signed zeros follow the C library.
  for (const char* t : {"f32", "f64"})
    for (const char* s : {"[7]", "[100]"}) {
      const std::string type = std::string(t) + s;
      expect_rows("%x: " + type, type, {{"asin %x", kInverseTrig}, {"acos %x", kInverseTrig}, {"atan %x", kInverseTrig}},
                  {Data::Unit, Data::General});
      expect_rows(fmt::format("%y: {0}, %x: {0}", type), type, {{"atan2 %y, %x", kInverseTrig}},
                  {Data::General, Data::Unit});
    }
  // Integers promote to f64, as for div (which Vulkan devices refuse for atan2).
  const std::string ints = "graph @a(%y: i32[9], %x: i64[9]) -> f64[9] {\n  %a = atan2 %y, %x : f64[9]\n  return %a\n}\n";
  if (lacks_f64_math()) expect_f64_math_error(ints);
  else expect_same(ints);
}

TEST(DeviceBinary, Remainders) {
  // mod takes the divisor's sign, fmod the dividend's; integers by 0 and -1 (under the
  // minimum) give 0, floats by 0 NaN; infinities, NaN and signed zeros on both sides.
  for (const char* t : {"i32", "i64", "f32", "f64"})
    for (const std::string& s : kShapes) {
      const std::string type = t + s;
      expect_rows(fmt::format("%a: {0}, %b: {0}", type), type, {{"mod %a, %b"}, {"fmod %a, %b"}, {"mod %b, %a"}});
    }
  // Exact where the quotient is far beyond 2^53: f32 1e38 mod 3, f64 1e300 mod 7.
  expect_same(
      "graph @r(%a: f32[4], %b: f32[4], %c: f64[2]) -> (f32[4], f32[4], f64[2]) {\n"
      "  %m = mod %a, %b : f32[4]\n"
      "  %f = fmod %a, %b : f32[4]\n"
      "  %s = constant {data = [7.0, -7.0]} : f64[2]\n"
      "  %g = mod %c, %s : f64[2]\n"
      "  return %m, %f, %g\n}\n",
      {HostTensor::from_vector<float>({1e38f, -1e38f, 5.5f, -0.0f}, {4}),
       HostTensor::from_vector<float>({3.0f, 3.0f, -2.0f, 2.0f}, {4}), HostTensor::from_vector<double>({1e300, -1e300}, {2})});
}

TEST(DeviceBinary, IntegerDivisionIsFloatDivision) {
  expect_same(
      "graph @d(%a: i32[37], %b: i32[37], %l: i64[37]) -> (f64[37], f64[37], f64[37]) {\n"
      "  %x = div %a, %b : f64[37]\n"
      "  %y = div %l, %a : f64[37]\n"
      "  %z = div %a, %a : f64[37]\n"
      "  return %x, %y, %z\n}\n");
}

TEST(DeviceBinary, MixedTypesPromote) {
  // i32 + f32 is f64, bool yields to the other type, i32 with i64 is i64.
  expect_same(
      "graph @m(%i: i32[37], %f: f32[37], %l: i64[37], %b: bool[37], %d: f64[37]) -> (f64[37], "
      "f32[37], i64[37], i64[37], f64[37], i32[37], f64[37], f64[37]) {\n"
      "  %a = add %i, %f : f64[37]\n"
      "  %c = mul %b, %f : f32[37]\n"
      "  %e = sub %l, %i : i64[37]\n"
      "  %g = max %i, %l : i64[37]\n"
      "  %h = min %f, %l : f64[37]\n"
      "  %j = add %b, %i : i32[37]\n"
      "  %k = mul %f, %d : f64[37]\n"
      "  %n = sub %l, %d : f64[37]\n"
      "  return %a, %c, %e, %g, %h, %j, %k, %n\n}\n");
}


std::vector<Row> compare_rows(const std::string& a, const std::string& b) {
  std::vector<Row> rows;
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
    rows.push_back({fmt::format("{} {}, {}", op, a, b)});
  return rows;
}

TEST(DeviceCompare, EveryTypeWithNaNAndBroadcast) {
  // %a against itself makes equal pairs (and NaN != NaN); %b against %a unequal ones.
  for (const char* t : {"bool", "i32", "i64", "f32", "f64"})
    for (const char* s : {"[7]", "[5,37]"}) {
      std::vector<Row> rows = compare_rows("%a", "%b");
      for (Row& r : compare_rows("%a", "%a")) rows.push_back(r);
      if (std::string(s) == "[5,37]")
        for (Row& r : compare_rows("%c", "%a")) rows.push_back(r);
      expect_rows(fmt::format("%a: {0}{1}, %b: {0}{1}, %c: {0}[37]", t, s), std::string("bool") + s,
                  rows);
    }
}

TEST(DeviceCompare, MixedTypesCompareInThePromotedType) {
  // i64 against f32 compares in f64 (2^24 + 1 != 16777216.0f); -0.0 == 0.0.
  expect_rows("%l: i64[37], %f: f32[37], %i: i32[37], %b: bool[37]", "bool[37]", [] {
    std::vector<Row> rows = compare_rows("%l", "%f");
    for (Row& r : compare_rows("%i", "%f")) rows.push_back(r);
    for (Row& r : compare_rows("%b", "%i")) rows.push_back(r);
    return rows;
  }());
  const std::vector<int64_t> l = {16777217, 0, 0, -1};
  const std::vector<float> f = {16777216.0f, -0.0f, 0.0f, NAN};
  expect_same(
      "graph @c(%l: i64[4], %f: f32[4]) -> (bool[4], bool[4]) {\n"
      "  %e = eq %l, %f : bool[4]\n  %n = ne %l, %f : bool[4]\n  return %e, %n\n}\n",
      {HostTensor::from_vector<int64_t>(l, {4}), HostTensor::from_vector<float>(f, {4})});
}


TEST(DeviceLogic, AndOrNotWhere) {
  for (const char* s : {"[7]", "[100]"})
    expect_rows(fmt::format("%a: bool{0}, %b: bool{0}", s), std::string("bool") + s,
                {{"and %a, %b"}, {"or %a, %b"}, {"not %a"}, {"and %a, %a"}});
  expect_rows("%a: bool[5,37], %r: bool[37], %c: bool[5,1]", "bool[5,37]",
              {{"and %a, %r"}, {"or %c, %a"}, {"and %r, %c"}, {"where %c, %a, %r"}});
  // where: broadcast condition, promoted branches (i32 and f32 give f64), every type.
  expect_same(
      "graph @w(%c: bool[5,1], %r: bool[37], %i: i32[5,37], %f: f32[37], %l: i64[5,37], %d: "
      "f64[5,1], %b: bool[5,37]) -> (f64[5,37], i64[5,37], f64[5,37], bool[5,37], f32[5,37]) {\n"
      "  %w1 = where %c, %i, %f : f64[5,37]\n"
      "  %w2 = where %r, %l, %i : i64[5,37]\n"
      "  %w3 = where %b, %d, %f : f64[5,37]\n"
      "  %w4 = where %c, %b, %r : bool[5,37]\n"
      "  %w5 = where %b, %f, %f : f32[5,37]\n"
      "  return %w1, %w2, %w3, %w4, %w5\n}\n");
}

// ---- reductions --------------------------------------------------------------------------


/// The type of reducing `in` ([3,5,37]) over `axes`.
std::string reduced_type(const std::string& dtype, const std::vector<int>& dims,
                         const std::vector<int>& axes, bool keepdim) {
  std::string out;
  for (size_t d = 0; d < dims.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int>(d)) != axes.end();
    if (reduced && !keepdim) continue;
    out += (out.empty() ? "" : ",") + std::to_string(reduced ? 1 : dims[d]);
  }
  return dtype + "[" + out + "]";
}

std::string axes_str(const std::vector<int>& axes) {
  std::string s;
  for (int a : axes) s += (s.empty() ? "" : ", ") + std::to_string(a);
  return "[" + s + "]";
}

/// sum, max, min over each axis set (first, middle, last, all, first and last; keepdim
/// alternating), argmax/argmin over each single axis, and prod over some, of a [3,5,37]
/// tensor of `dtype`.
void check_reductions(const std::string& dtype, bool keepdim_first) {
  const std::vector<int> dims = {3, 5, 37};
  const bool flt = is_float(*parse_dtype(dtype));
  const std::string acc =
      (dtype == "bool" || dtype == "i32") ? "i64" : dtype;  // sums and products widen
  const double rtol = dtype == "f32" ? 1e-5 : 1e-12;
  const std::vector<std::vector<int>> axis_sets = {{0}, {1}, {2}, {0, 1, 2}, {0, 2}};
  struct Outputs {
    std::string body, outs, types;
    std::vector<Tol> tols;
  } red, prod;
  auto add = [&](Outputs& gr, const std::string& op, const std::string& result_dtype,
                 const std::vector<int>& axes, bool keepdim, const Tol& tol) {
    const std::string t = reduced_type(result_dtype, dims, axes, keepdim);
    const size_t n = gr.tols.size();
    gr.body += fmt::format("  %y{} = {} %x {{axes = {}{}}} : {}\n", n, op, axes_str(axes),
                           keepdim ? ", keepdim" : "", t);
    gr.outs += (n ? ", %y" : "%y") + std::to_string(n);
    gr.types += (n ? ", " : "") + t;
    gr.tols.push_back(tol);
  };
  for (size_t i = 0; i < axis_sets.size(); ++i) {
    const bool keep = (i % 2 == 0) == keepdim_first;
    double reduced =
        1;  // elements per sum: the sum of their magnitudes is at most this (data in [-1, 1])
    for (int a : axis_sets[i]) reduced *= dims[static_cast<size_t>(a)];
    // Float sums may add in another order: relative to the sum of the magnitudes.
    add(red, "reduce_sum", acc, axis_sets[i], keep, flt ? Tol{0, rtol, reduced} : kExact);
    add(red, "reduce_max", dtype, axis_sets[i], !keep, kExact);
    add(red, "reduce_min", dtype, axis_sets[i], keep, kExact);
    if (axis_sets[i].size() == 1) {
      add(red, "argmax", "i64", axis_sets[i], keep, kExact);
      add(red, "argmin", "i64", axis_sets[i], !keep, kExact);
    }
    // Products of values near 1 (no overflow, no underflow), relative to the result;
    // integer products wrap, exactly.
    if (i % 2 == 0)
      add(prod, "reduce_prod", acc, axis_sets[i], !keep, flt ? Tol{0, rtol, 0} : kExact);
  }
  for (const auto& [gr, data] : {std::pair{&red, flt ? Data::Unit : Data::General},
                                 std::pair{&prod, flt ? Data::NearOne : Data::General}}) {
    const std::string text =
        fmt::format("graph @red(%x: {}[3,5,37]) -> ({}) {{\n{}  return {}\n}}\n", dtype, gr->types,
                    gr->body, gr->outs);
    expect_same(text, inputs_for(parse_or_fail(text), {data}), gr->tols);
  }
}

TEST(DeviceReduce, F32) {
  check_reductions("f32", true);
}
TEST(DeviceReduce, F64) {
  check_reductions("f64", false);
}
TEST(DeviceReduce, I32SumsToI64) {
  check_reductions("i32", false);
}
TEST(DeviceReduce, I64Wraps) {
  check_reductions("i64", true);
}
TEST(DeviceReduce, BoolSumsToI64) {
  check_reductions("bool", true);
}

TEST(DeviceReduce, SpecialValuesInMaxMinAndSums) {
  // General data: NaN wins max and min, infinities and signed zeros take part.
  for (const char* t : {"f32", "f64"})
    expect_same(
        fmt::format("graph @s(%x: {0}[5,37]) -> ({0}[5], {0}[37], {0}[5], {0}[37]) {{\n"
                    "  %a = reduce_max %x {{axes = [1]}} : {0}[5]\n"
                    "  %b = reduce_min %x {{axes = [0]}} : {0}[37]\n"
                    "  %c = reduce_min %x {{axes = [1]}} : {0}[5]\n"
                    "  %d = reduce_max %x {{axes = [0]}} : {0}[37]\n"
                    "  return %a, %b, %c, %d\n}}\n",
                    t));
  // Sums meeting inf (inf), inf and -inf (NaN), NaN in the scalar remainder (NaN), -inf.
  std::vector<float> x(4 * 37, 1.0f);
  x[30] = INFINITY;
  x[37 + 3] = INFINITY;
  x[37 + 35] = -INFINITY;
  x[2 * 37 + 36] = NAN;
  x[3 * 37] = -INFINITY;
  expect_same(
      "graph @s(%x: f32[4,37]) -> (f32[4], f32[37], f32[4]) {\n"
      "  %a = reduce_sum %x {axes = [1]} : f32[4]\n  %b = reduce_sum %x {axes = [0]} : f32[37]\n"
      "  %c = reduce_prod %x {axes = [1]} : f32[4]\n  return %a, %b, %c\n}\n",
      {HostTensor::from_vector<float>(x, {4, 37})});
  // Signed zeros only: +0.0 wins max and -0.0 wins min in either order.
  const std::vector<float> z = {0.0f, -0.0f, -0.0f, 0.0f, -0.0f, -0.0f, 0.0f, 0.0f};
  std::vector<float> zs;
  for (int i = 0; i < 37 * 2; ++i) zs.push_back(z[static_cast<size_t>(i * 7 % 8)]);
  expect_same(
      "graph @z(%x: f32[2,37]) -> (f32[2], f32[2], f32[37], f32[37], i64[2]) {\n"
      "  %a = reduce_max %x {axes = [1]} : f32[2]\n  %b = reduce_min %x {axes = [1]} : f32[2]\n"
      "  %c = reduce_max %x {axes = [0]} : f32[37]\n  %d = reduce_min %x {axes = [0]} : f32[37]\n"
      "  %e = argmax %x {axes = [1]} : i64[2]\n  return %a, %b, %c, %d, %e\n}\n",
      {HostTensor::from_vector<float>(zs, {2, 37})});
}

TEST(DeviceReduce, F32SumsAndProductsHaveTheRangeOfF64) {
  // docs/ir.md 5.5: f32 sums and products are taken in double and rounded once, so an
  // intermediate beyond the f32 range does not overflow or vanish. Rows and columns of
  // [3e38, 3e38, -3e38] sum to 3e38 (not inf); [1e-30, 1e-30, 1e30] multiplies to 1e-30
  // (not 0); [3e38, 3e38, -3e38, 0] multiplies to -0.0 (not inf * 0 = NaN).
  std::vector<float> sums(3 * 37, 0.0f), prods(3 * 37, 1.0f);
  for (int c = 0; c < 37; ++c) {
    sums[static_cast<size_t>(c)] = sums[static_cast<size_t>(37 + c)] = 3e38f;
    sums[static_cast<size_t>(74 + c)] = -3e38f;
    prods[static_cast<size_t>(c)] = prods[static_cast<size_t>(37 + c)] = 1e-30f;
    prods[static_cast<size_t>(74 + c)] = 1e30f;
  }
  std::vector<float> rows(2 * 37, 0.0f);
  for (int r = 0; r < 2; ++r) {
    rows[static_cast<size_t>(r * 37)] = rows[static_cast<size_t>(r * 37 + 1)] = 3e38f;
    rows[static_cast<size_t>(r * 37 + 2)] = -3e38f;
  }
  expect_same(
      "graph @range(%s: f32[3,37], %p: f32[3,37], %r: f32[2,37]) -> (f32[37], f32[37], f32[2], "
      "f32[2]) {\n"
      "  %a = reduce_sum %s {axes = [0]} : f32[37]\n"
      "  %b = reduce_prod %p {axes = [0]} : f32[37]\n"
      "  %c = reduce_sum %r {axes = [1]} : f32[2]\n"
      "  %d = reduce_prod %r {axes = [1]} : f32[2]\n"
      "  return %a, %b, %c, %d\n}\n",
      {HostTensor::from_vector<float>(sums, {3, 37}),
       HostTensor::from_vector<float>(prods, {3, 37}),
       HostTensor::from_vector<float>(rows, {2, 37})});
}

TEST(DeviceReduce, F32ColumnSumsOverflowingOnlyInTheirLastLanesHaveTheRangeOfF64) {
  // Column sums walk the columns as lanes; the check that sends an overflowed f32 tile to
  // the f64 pass reads the lanes past the last whole vector as one masked vector (cpu). Only
  // the last column overflows in f32 (3e38 + 3e38 - 3e38): 3e38, not inf; widths of 14 (no
  // whole vector of 16), 37 and 7.
  for (int cols : {14, 37, 7}) {
    std::vector<float> x(static_cast<size_t>(3 * cols), 1.0f);
    x[static_cast<size_t>(cols - 1)] = x[static_cast<size_t>(2 * cols - 1)] = 3e38f;
    x[static_cast<size_t>(3 * cols - 1)] = -3e38f;
    const std::string n = std::to_string(cols);
    expect_same("graph @tail(%x: f32[3," + n + "]) -> f32[" + n + "] {\n  %s = reduce_sum %x {axes = [0]} : f32[" +
                    n + "]\n  return %s\n}\n",
                {HostTensor::from_vector<float>(x, {3, cols})});
  }
}

TEST(DeviceReduce, F32SumsOfLongRowsInF32LanesHaveTheRangeOfF64) {
  // Rows long enough that a device sums them in f32 lanes (the cpu backend; OpenCL's vector
  // lanes, a row per work-item): columns 0 and 64 share a lane there, whose f32 sum 3e38 +
  // 3e38 overflows; the row is summed again in f64, to 3e38. Other rows: an infinity stays
  // one, a NaN stays NaN, small integers sum exactly.
  constexpr int kRows = 512, kCols = 256;
  std::vector<float> x(static_cast<size_t>(kRows) * kCols);
  for (int r = 0; r < kRows; ++r) {
    float* row = x.data() + static_cast<ptrdiff_t>(r) * kCols;
    for (int c = 0; c < kCols; ++c) row[c] = static_cast<float>((r + c) % 7);
    if (r % 4 == 0) {
      std::fill(row, row + kCols, 0.0f);
      row[0] = row[64] = 3e38f;
      row[128] = -3e38f;
    }
    if (r % 4 == 1) row[200] = INFINITY;
    if (r % 4 == 2) row[17] = NAN;
  }
  expect_same(
      "graph @rows(%x: f32[512,256]) -> f32[512] {\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[512]\n"
      "  return %s\n}\n",
      {HostTensor::from_vector<float>(x, {kRows, kCols})});
  // The same where the summed values come from a row cache (softmax's exp, kept for the
  // division): the f64 pass reads them back. exp(88.7) = 3.3e38, weighted 1, 1, -1.
  std::vector<float> z(static_cast<size_t>(kRows) * kCols, 0.0f), w(kCols, 0.0f);
  for (int r = 0; r < kRows; ++r)
    for (int c : {0, 64, 128}) z[static_cast<size_t>(r) * kCols + static_cast<size_t>(c)] = 88.7f;
  w[0] = w[64] = 1.0f;
  w[128] = -1.0f;
  expect_same(
      "graph @cached(%z: f32[512,256], %w: f32[256]) -> f32[512,256] {\n"
      "  %e = exp %z : f32[512,256]\n"
      "  %m = mul %e, %w : f32[512,256]\n"
      "  %s = reduce_sum %m {axes = [1], keepdim} : f32[512,1]\n"
      "  %y = div %e, %s : f32[512,256]\n"
      "  return %y\n}\n",
      {HostTensor::from_vector<float>(z, {kRows, kCols}), HostTensor::from_vector<float>(w, {kCols})}, kExpUlp);
}

TEST(DeviceReduce, ArgMaxArgMinTiesAndNaN) {
  // Rows of 37 (past a vector width): ties (the first index wins) and NaN (the first NaN
  // wins) at positions before, inside and after the first vector.
  std::vector<float> x(6 * 37, 0.0f);
  auto row = [&](int r) { return x.begin() + r * 37; };
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 37; ++c)
      row(r)[c] = static_cast<float>((c * 7 + r) % 11) - 5.0f;  // values -5..5, many ties
  row(1)[20] = NAN;
  row(1)[33] = NAN;
  row(2)[36] = NAN;  // in the scalar remainder
  row(3)[0] = 100.0f;
  row(3)[36] = 100.0f;  // tie of maxima far apart
  row(4)[17] = -100.0f;
  row(4)[18] = -100.0f;
  std::fill(row(5), row(5) + 37, 1.0f);  // all equal: 0
  const HostTensor t = HostTensor::from_vector<float>(x, {6, 37});
  const std::string g =
      "graph @a(%x: {0}[6,37]) -> (i64[6], i64[6], i64[37], i64[1,37], i64[6,1]) {{\n"
      "  %a = argmax %x {{axes = [1]}} : i64[6]\n  %b = argmin %x {{axes = [1]}} : i64[6]\n"
      "  %c = argmax %x {{axes = [0]}} : i64[37]\n"
      "  %d = argmin %x {{axes = [0], keepdim}} : i64[1,37]\n"
      "  %e = argmax %x {{axes = [1], keepdim}} : i64[6,1]\n"
      "  return %a, %b, %c, %d, %e\n}}\n";
  expect_same(fmt::format(fmt::runtime(g), "f32"), {t});
  std::vector<double> xd(x.begin(), x.end());
  expect_same(fmt::format(fmt::runtime(g), "f64"), {HostTensor::from_vector<double>(xd, {6, 37})});
  std::vector<int32_t> xi;
  for (float v : x) xi.push_back(std::isnan(v) ? 7 : static_cast<int32_t>(v));
  expect_same(fmt::format(fmt::runtime(g), "i32"), {HostTensor::from_vector<int32_t>(xi, {6, 37})});
  // Known answers for the f32 rows, by hand.
  const Graph graph = parse_or_fail(fmt::format(fmt::runtime(g), "f32"));
  const auto am = run_on_device_under_test(graph, {t}).at(0).to_vector<int64_t>();
  EXPECT_EQ(am[1], 20);  // first NaN
  EXPECT_EQ(am[2], 36);
  EXPECT_EQ(am[3], 0);  // first of the tied maxima
  EXPECT_EQ(am[5], 0);
}

TEST(DeviceReduce, BoolMaxMinAndArgs) {
  // Regression: bool accumulators of column reductions were vectors of i1, bit-packed in
  // memory, while their initial values were written one byte per lane: reduce_min over
  // axis 0 of all-true data gave false in most lanes.
  expect_same(
      "graph @b(%x: bool[2,37]) -> (bool[37], bool[37], bool[2]) {\n"
      "  %a = reduce_min %x {axes = [0]} : bool[37]\n  %b = reduce_max %x {axes = [0]} : bool[37]\n"
      "  %c = reduce_min %x {axes = [1]} : bool[2]\n  return %a, %b, %c\n}\n",
      {HostTensor::from_vector<bool>(std::vector<bool>(74, true), {2, 37})});
  expect_same(
      "graph @b(%x: bool[2,37]) -> (bool[37], bool[37], bool[2]) {\n"
      "  %a = reduce_min %x {axes = [0]} : bool[37]\n  %b = reduce_max %x {axes = [0]} : bool[37]\n"
      "  %c = reduce_min %x {axes = [1]} : bool[2]\n  return %a, %b, %c\n}\n",
      {HostTensor::from_vector<bool>(std::vector<bool>(74, false), {2, 37})});
  expect_same(
      "graph @b(%x: bool[5,37]) -> (bool[5], bool[37], i64[5], i64[37], i64[], bool[]) {\n"
      "  %a = reduce_max %x {axes = [1]} : bool[5]\n  %b = reduce_min %x {axes = [0]} : bool[37]\n"
      "  %c = argmax %x {axes = [1]} : i64[5]\n  %d = argmin %x {axes = [0]} : i64[37]\n"
      "  %e = reduce_sum %x {axes = [0, 1]} : i64[]\n"
      "  %f = reduce_max %x {axes = [0, 1]} : bool[]\n"
      "  return %a, %b, %c, %d, %e, %f\n}\n");
}

TEST(DeviceReduce, ReductionFusedWithElementwise) {
  // Softmax and a normalization: two stages of reductions in one kernel, values broadcast
  // back over the rows; the column version reduces the first axis.
  expect_same(
      "graph @s(%x: f32[5,37]) -> (f32[5,37], f32[5,37]) {\n"
      "  %m = reduce_max %x {axes = [1], keepdim} : f32[5,1]\n  %s = sub %x, %m : f32[5,37]\n"
      "  %e = exp %s : f32[5,37]\n  %z = reduce_sum %e {axes = [1], keepdim} : f32[5,1]\n"
      "  %y = div %e, %z : f32[5,37]\n"
      "  %cm = reduce_min %x {axes = [0], keepdim} : f32[1,37]\n  %c = sub %x, %cm : f32[5,37]\n"
      "  return %y, %c\n}\n",
      {Data::Unit}, Tol{kExpUlp.f32_ulps + 2, 1e-6, 0});
}

// ---- movement ----------------------------------------------------------------------------


TEST(DeviceMovement, LanesAFewElementsApartInOneLoad) {
  // Vector lanes 2, 3 and 4 elements apart (a stride-2 window, every third element) are one
  // masked load of the span and a shuffle on the cpu; through a pad the mask also drops the
  // padding, and the last lane is the buffer's last element (nothing past it is read).
  expect_same(
      "graph @s(%x: f32[301], %i: i32[400], %d: f64[99]) -> (f32[150], f32[100], f32[152], i32[100], f64[33]) {\n"
      "  %a0 = slice %x {start = [1], stop = [301], step = [2]} : f32[150]\n"
      "  %a = neg %a0 : f32[150]\n"
      "  %b0 = slice %x {start = [0], stop = [300], step = [3]} : f32[100]\n"
      "  %b = abs %b0 : f32[100]\n"
      "  %p = pad %x {low = [1], high = [2]} : f32[304]\n"
      "  %c0 = slice %p {start = [0], stop = [304], step = [2]} : f32[152]\n"
      "  %c = neg %c0 : f32[152]\n"
      "  %j0 = slice %i {start = [3], stop = [400], step = [4]} : i32[100]\n"
      "  %j = neg %j0 : i32[100]\n"
      "  %e0 = slice %d {start = [2], stop = [99], step = [3]} : f64[33]\n"
      "  %e = neg %e0 : f64[33]\n"
      "  return %a, %b, %c, %j, %e\n}\n");
}

TEST(DeviceMovement, ViewsInsideKernels) {
  // Each view feeds an elementwise op, so it is an index map inside a kernel, not a copy.
  expect_same(
      "graph @v(%x: f32[5,37], %y: f32[37,5], %c: f32[5,1], %i: i32[4,6], %z: f32[2,3,4]) -> "
      "(f32[5,37], f32[2,12], f32[8,40], f32[37,5], f32[5,37], i32[6,9], f32[4,2,3], f32[185], "
      "f32[3,5]) {\n"
      "  %yt = permute %y {perm = [1, 0]} : f32[5,37]\n"
      "  %a = add %yt, %x : f32[5,37]\n"
      "  %s = slice %x {start = [1, 2], stop = [5, 37], step = [2, 3]} : f32[2,12]\n"
      "  %b = neg %s : f32[2,12]\n"
      "  %p = pad %x {low = [1, 3], high = [2, 0], value = -inf} : f32[8,40]\n"
      "  %pb = relu %p : f32[8,40]\n"
      "  %r = reshape %x : f32[37,5]\n"
      "  %rb = mul %r, %y : f32[37,5]\n"
      "  %e = expand %c : f32[5,37]\n"
      "  %eb = sub %e, %x : f32[5,37]\n"
      "  %ip = pad %i {low = [0, 2], high = [2, 1], value = 7} : i32[6,9]\n"
      "  %ib = abs %ip : i32[6,9]\n"
      "  %zp = permute %z {perm = [2, 0, 1]} : f32[4,2,3]\n"
      "  %zb = abs %zp : f32[4,2,3]\n"
      "  %flat = reshape %x : f32[185]\n"
      "  %fb = floor %flat : f32[185]\n"
      // A chain of views: transpose, strided slice, then a reshape.
      "  %t = permute %x {perm = [1, 0]} : f32[37,5]\n"
      "  %ts = slice %t {start = [0, 0], stop = [37, 5], step = [13, 2]} : f32[3,3]\n"
      "  %tp = pad %ts {low = [0, 1], high = [0, 1], value = 2.5} : f32[3,5]\n"
      "  %tb = ceil %tp : f32[3,5]\n"
      "  return %a, %b, %pb, %rb, %eb, %ib, %zb, %fb, %tb\n}\n");
}

TEST(DeviceMovement, ReversedSlicesInsideKernelsAndChains) {
  // Negative steps: index maps with negative coefficients, alone, under a reshape, a pad and
  // a reduction.
  expect_same(
      "graph @r(%x: f32[5,37], %i: i64[4,6]) -> (f32[5,37], f32[3,12], f32[185], i64[6,8], f32[5]) {\n"
      "  %rev = slice %x {start = [4, 36], stop = [-1, -1], step = [-1, -1]} : f32[5,37]\n"
      "  %a = add %rev, %x : f32[5,37]\n"
      "  %s = slice %x {start = [4, 35], stop = [-1, 0], step = [-2, -3]} : f32[3,12]\n"
      "  %b = neg %s : f32[3,12]\n"
      "  %flat = reshape %rev : f32[185]\n"
      "  %c = floor %flat : f32[185]\n"
      "  %ir = slice %i {start = [3, 0], stop = [-1, 6], step = [-1, 1]} : i64[4,6]\n"
      "  %ip = pad %ir {low = [1, 1], high = [1, 1], value = 9} : i64[6,8]\n"
      "  %d = abs %ip : i64[6,8]\n"
      "  %e = reduce_max %rev {axes = [1]} : f32[5]\n"  // order-free: the data holds 1e20s
      "  return %a, %b, %c, %d, %e\n}\n");
}

TEST(DeviceMovement, UnfoldedWindowsPoolAndConvolve) {
  // Windows read through unfold (with padding, strides and dilation) feeding the
  // reductions of a max pool and of a convolution-shaped product (reduced with max, which
  // compares exactly where a sum would reassociate), and an elementwise use of the view.
  expect_same(
      "graph @u(%x: f32[2,3,9,11], %w: f32[4,3,3,2], %i: i32[10]) -> (f32[2,3,4,5], f32[2,4,7,5], i32[4,3]) {\n"
      "  %p = pad %x {low = [0, 0, 1, 1], high = [0, 0, 1, 1], value = -inf} : f32[2,3,11,13]\n"
      "  %uh = unfold %p {axis = 2, size = 3, step = 2} : f32[2,3,5,13,3]\n"
      "  %uw = unfold %uh {axis = 3, size = 3, step = 2, dilation = 2} : f32[2,3,5,5,3,3]\n"
      "  %s = slice %uw {start = [0, 0, 0, 0, 0, 0], stop = [2, 3, 4, 5, 3, 3]} : f32[2,3,4,5,3,3]\n"
      "  %pool = reduce_max %s {axes = [4, 5]} : f32[2,3,4,5]\n"
      "  %ch = unfold %x {axis = 2, size = 3, step = 1} : f32[2,3,7,11,3]\n"
      "  %cw = unfold %ch {axis = 3, size = 2, step = 2, dilation = 2} : f32[2,3,7,5,3,2]\n"
      "  %xin = reshape %cw : f32[2,1,3,7,5,3,2]\n"
      "  %wp = permute %w {perm = [0, 1, 2, 3]} : f32[4,3,3,2]\n"
      "  %wr = reshape %wp : f32[1,4,3,1,1,3,2]\n"
      "  %prod = mul %xin, %wr : f32[2,4,3,7,5,3,2]\n"
      "  %conv = reduce_max %prod {axes = [2, 5, 6]} : f32[2,4,7,5]\n"
      "  %iu = unfold %i {axis = 0, size = 3, step = 2} : i32[4,3]\n"
      "  %ib = abs %iu : i32[4,3]\n"
      "  return %pool, %conv, %ib\n}\n");
}

/// Indices into an axis of `extent`: mostly valid, some negative, some outside [-n, n).
HostTensor indices(DType t, const Shape& s, int64_t extent, uint64_t seed) {
  HostTensor out(TensorType{t, s});
  for (int64_t k = 0; k < out.numel(); ++k)
    out.set_int(k, static_cast<int64_t>(mix(seed, static_cast<uint64_t>(k)) % static_cast<uint64_t>(2 * extent + 6)) -
                       extent - 3);
  return out;
}

TEST(DeviceMovement, GatherReadsAtRuntimeIndices) {
  // Along the vector axis and across it, with i32 and i64 indices; indices computed in the
  // kernel (an add, a broadcast view: an embedding lookup) and results used there; data
  // that is a view or computed (copied into memory first) and bool data.
  const std::string text =
      "graph @g(%x: f32[5,37], %i: i64[5,40], %j: i32[7,37], %t: f32[11,37], %tok: i32[6], %b: bool[5,37]) -> "
      "(f32[5,40], f32[7,37], f32[6,37], f32[37,7], f32[5,40], bool[7,37], f32[5]) {\n"
      "  %one = constant {value = 1} : i64[]\n"
      "  %i1 = add %i, %one : i64[5,40]\n"
      "  %g0 = gather %x, %i1 {axis = 1} : f32[5,40]\n"
      "  %two = constant {value = 2.0} : f32[]\n"
      "  %a = mul %g0, %two : f32[5,40]\n"
      "  %xt = permute %x {perm = [1, 0]} : f32[37,5]\n"
      "  %jt = permute %j {perm = [1, 0]} : i32[37,7]\n"
      "  %c = gather %xt, %jt {axis = 1} : f32[37,7]\n"
      "  %g1 = gather %x, %j {axis = 0} : f32[7,37]\n"
      "  %tr = reshape %tok : i32[6,1]\n"
      "  %te = expand %tr : i32[6,37]\n"
      "  %emb = gather %t, %te {axis = 0} : f32[6,37]\n"
      "  %e = exp %x : f32[5,37]\n"
      "  %ge = gather %e, %i {axis = 1} : f32[5,40]\n"
      "  %gb = gather %b, %j {axis = 0} : bool[7,37]\n"
      "  %m = reduce_max %g0 {axes = [1]} : f32[5]\n"
      "  return %a, %g1, %emb, %c, %ge, %gb, %m\n}\n";
  const Graph g = parse_or_fail(text);
  std::vector<HostTensor> in = inputs_for(g, {Data::Smooth});
  in[1] = indices(DType::I64, {5, 40}, 37, 11);
  in[2] = indices(DType::I32, {7, 37}, 5, 12);
  in[4] = indices(DType::I32, {6}, 11, 13);
  expect_same(text, in, kExpUlp);
}

TEST(DeviceMovement, ScatterWritesUpdatesInOrder) {
  // Repeated indices (the last update wins; the combining ones fold every update in, in
  // order: the f32 sums round as the interpreter's do), indices and updates computed in the
  // kernel, data that is a view, an update also returned, and the result used afterwards.
  const std::string text =
      "graph @s(%x: f32[5,37], %i: i64[5,40], %u: f32[5,40], %j: i32[9,37], %v: i64[9,37], %l: i64[37,5]) -> "
      "(f32[5,37], f32[5,37], f32[5,37], f32[5,37], f32[5,37], i64[5,37], f32[5,40], f32[5,37]) {\n"
      "  %r = scatter %x, %i, %u {axis = 1} : f32[5,37]\n"
      "  %a = scatter %x, %i, %u {axis = 1, add} : f32[5,37]\n"
      "  %m = scatter %x, %i, %u {axis = 1, mul} : f32[5,37]\n"
      "  %hi = scatter %x, %i, %u {axis = 1, max} : f32[5,37]\n"
      "  %two = constant {value = 2.0} : f32[]\n"
      "  %u2 = mul %u, %two : f32[5,40]\n"
      "  %lo = scatter %x, %i, %u2 {axis = 1, min} : f32[5,37]\n"
      "  %lt = permute %l {perm = [1, 0]} : i64[5,37]\n"
      "  %one = constant {value = 1} : i32[]\n"
      "  %j1 = add %j, %one : i32[9,37]\n"
      "  %c = scatter %lt, %j1, %v {axis = 0, add} : i64[5,37]\n"
      "  %e = exp %a : f32[5,37]\n"
      "  return %r, %a, %m, %hi, %lo, %c, %u2, %e\n}\n";
  const Graph g = parse_or_fail(text);
  std::vector<HostTensor> in = inputs_for(g, {Data::NearOne});
  in[1] = indices(DType::I64, {5, 40}, 37, 21);
  in[3] = indices(DType::I32, {9, 37}, 5, 22);
  in[4] = inputs_for(g, {Data::General}, 23)[4];
  in[5] = inputs_for(g, {Data::General}, 24)[5];
  expect_same(text, in, kExpUlp);
}

TEST(DeviceMovement, CumsumWalksItsAxisInOrder) {
  // Every axis of a 3-D operand computed in the kernel (exp of a view), integers widened to
  // i64, narrow floats rounded at each step; the result read by a later kernel.
  for (int axis : {0, 1, 2}) {
    const std::string text = fmt::format(
        "graph @c(%x: f32[3,5,37], %i: i16[3,5,37], %h: f16[3,5,37]) -> (f32[3,5,37], i64[3,5,37], f16[3,5,37], "
        "f32[3,5,37]) {{\n"
        "  %e = exp %x : f32[3,5,37]\n"
        "  %c = cumsum %e {{axis = {0}}} : f32[3,5,37]\n"
        "  %d = cumsum %i {{axis = {0}}} : i64[3,5,37]\n"
        "  %g = cumsum %h {{axis = {0}}} : f16[3,5,37]\n"
        "  %y = mul %c, %x : f32[3,5,37]\n"
        "  return %c, %d, %g, %y\n}}\n",
        axis);
    // exp is approximated in f32; the sums that follow carry its error, relative to their size.
    const Tol approx{kExpUlp.f32_ulps, 1e-6, 0};
    expect_same(text, inputs_for(parse_or_fail(text), {Data::Unit, Data::General, Data::Unit}),
                std::vector<Tol>{approx, kExact, kExact, approx});
  }
  // A sum starts with its first element itself: -0.0 stays -0.0 (found by kiln fuzz: the
  // kernel added it to a 0.0).
  expect_same("graph @z(%x: f64[3]) -> f64[3] {\n  %c = cumsum %x {axis = 0} : f64[3]\n  return %c\n}\n",
              {HostTensor::from_vector<double>({-0.0, -0.0, 0.0}, {3})});
  // A transposed operand and a reversed, exclusive sum through the frontend's views.
  expect_same(
      "graph @t(%x: i32[6,4]) -> i64[4,6] {\n"
      "  %p = permute %x {perm = [1, 0]} : i32[4,6]\n"
      "  %s = slice %p {start = [0, 5], stop = [4, -1], step = [1, -1]} : i32[4,6]\n"
      "  %c = cumsum %s {axis = 1} : i64[4,6]\n"
      "  return %c\n}\n");
}

TEST(DeviceMovement, ArgsortSortsEveryLaneStably) {
  // Every axis of a 3-D operand computed in the kernel (abs of a permute), lanes of 5, 37
  // and 3 (padded to 8, 64, 4), both directions; special values (NaN, infinities, signed
  // zeros) and ties; the result read by a later kernel (the sorted values, a gather).
  for (int axis : {0, 1, 2})
    for (const char* direction : {"", ", descending"}) {
      const std::string text = fmt::format(
          "graph @s(%x: f32[37,5,3], %t: f32[5,37,3]) -> (i64[5,37,3], f32[5,37,3], i64[5,37,3]) {{\n"
          "  %p = permute %x {{perm = [1, 0, 2]}} : f32[5,37,3]\n"
          "  %e = abs %p : f32[5,37,3]\n"
          "  %a = argsort %e {{axis = {0}{1}}} : i64[5,37,3]\n"
          "  %v = gather %e, %a {{axis = {0}}} : f32[5,37,3]\n"
          "  %b = argsort %t {{axis = {0}{1}}} : i64[5,37,3]\n"
          "  return %a, %v, %b\n}}\n",
          axis, direction);
      expect_same(text, {Data::Smooth, Data::Exponent});
    }
  // Every other dtype, ties everywhere (integers drawn from 17 values), u64 in its order
  // (values from 2^63 up the largest), bool as 0 and 1; a lane of one and a power of two.
  for (const char* t : {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f64", "bool"})
    for (const std::string& s : {std::string("[3,100]"), std::string("[64,1]"), std::string("[2,64]")}) {
      const std::string text = fmt::format(
          "graph @s(%x: {0}{1}) -> (i64{1}, i64{1}) {{\n"
          "  %a = argsort %x {{axis = 1}} : i64{1}\n"
          "  %d = argsort %x {{axis = 0, descending}} : i64{1}\n"
          "  return %a, %d\n}}\n",
          t, s);
      const Graph g = parse_or_fail(text);
      std::vector<HostTensor> in = inputs_for(g, {Data::General});
      if (is_integer(in[0].dtype()) && in[0].dtype() != DType::U64) in = {indices(in[0].dtype(), g.type(g.inputs()[0]).shape, 7, 31)};
      SCOPED_TRACE(text);
      expect_same(text, in);
    }
}

TEST(DeviceMovement, ConcatOfMixedTypes) {
  expect_same(
      "graph @c(%a: i32[5,3], %b: f32[5,37], %d: f64[5,1], %e: bool[5,2]) -> (f64[5,43], "
      "f32[15,37], i32[5,5]) {\n"
      "  %x = concat %a, %b, %d, %e {axis = 1} : f64[5,43]\n"
      "  %y0 = concat %b, %b, %b {axis = 0} : f32[15,37]\n"
      "  %y = sqrt %y0 : f32[15,37]\n"
      "  %z = concat %a, %e {axis = 1} : i32[5,5]\n"
      "  return %x, %y, %z\n}\n");
}

TEST(DeviceMovement, PaddedI64ReadThroughAReshape) {
  // kiln fuzz seed 5312: on vulkan:0 the rows inside the pad came out 0 (lavapipe folded the
  // compare of a position widened implicitly from int; c_emitter.cpp widens it explicitly).
  expect_same(
      "graph @p(%x: i64[2,2]) -> i64[20] {\n"
      "  %y = pad %x {low = [1, 0], high = [2, 0]} : i64[5,2]\n"
      "  %z = expand %y : i64[2,5,2]\n"
      "  %r = reshape %z : i64[20]\n"
      "  return %r\n}\n");
}

TEST(DeviceMovement, ReturnedViewsAreMaterialized) {
  expect_same(
      "graph @v(%x: i64[5,37]) -> (i64[37,5], i64[2,12], i64[5,38], i64[3,5,37], i64[185]) {\n"
      "  %a = permute %x {perm = [1, 0]} : i64[37,5]\n"
      "  %b = slice %x {start = [1, 2], stop = [5, 37], step = [2, 3]} : i64[2,12]\n"
      "  %c = pad %x {low = [0, 1], high = [0, 0], value = -9223372036854775808} : i64[5,38]\n"
      "  %r = reshape %x : i64[1,5,37]\n"
      "  %d = expand %r : i64[3,5,37]\n"
      "  %e = reshape %x : i64[185]\n"
      "  return %a, %b, %c, %d, %e\n}\n");
}

// ---- empty tensors -----------------------------------------------------------------------

TEST(DeviceEmpty, EmptyTensorsEverywhere) {
  // Sums over an empty axis are 0, products 1; reductions with an empty kept dim are empty;
  // pad and concat make elements out of nothing; a matmul over K = 0 gives zeros.
  expect_same(
      "graph @e(%x: f32[0], %m: f32[0,3], %r: f32[3], %n: i32[3,0], %a: f32[2,0], "
      "%b: f32[0,4], %s: f32[5,37]) -> (f32[0], f32[0,3], f32[3], i64[3], i64[3], f32[0], "
      "f32[3], f32[2,4], f32[5,37], f32[5,0], bool[0]) {\n"
      "  %u = exp %x : f32[0]\n"
      "  %v = add %m, %r : f32[0,3]\n"
      "  %w = reduce_sum %m {axes = [0]} : f32[3]\n"
      "  %p = reduce_prod %n {axes = [1]} : i64[3]\n"
      "  %q = reduce_sum %n {axes = [1]} : i64[3]\n"
      "  %t = reduce_max %m {axes = [1]} : f32[0]\n"
      "  %pd = pad %x {low = [1], high = [2], value = 7.0} : f32[3]\n"
      "  %mm = matmul %a, %b : f32[2,4]\n"
      "  %sl = slice %s {start = [0, 5], stop = [5, 5]} : f32[5,0]\n"
      "  %c0 = slice %s {start = [0, 0], stop = [0, 37]} : f32[0,37]\n"
      "  %c = concat %c0, %s {axis = 0} : f32[5,37]\n"
      "  %bl = lt %x, %x : bool[0]\n"
      "  return %u, %v, %w, %p, %q, %t, %pd, %mm, %c, %sl, %bl\n}\n");
}

// ---- matmul ------------------------------------------------------------------------------


TEST(DeviceMatmul, FloatWithEpilogue) {
  // Eigen accumulates in the operand type: a tolerance relative to K * max|a| * max|b|.
  expect_same(
      "graph @m(%a: f32[5,37], %b: f32[37,7], %bias: f32[7]) -> f32[5,7] {\n"
      "  %m = matmul %a, %b : f32[5,7]\n"
      "  %s = add %m, %bias : f32[5,7]\n"
      "  %y = relu %s : f32[5,7]\n"
      "  return %y\n}\n",
      {Data::Unit}, Tol{0, 1e-5, 37});
  const std::string f64_epilogue =
      "graph @m(%a: f64[3,5,8], %b: f64[3,8,6]) -> (f64[3,5,6], f64[3,5,6]) {\n"
      "  %m = matmul %a, %b : f64[3,5,6]\n  %t = tanh %m : f64[3,5,6]\n  return %m, %t\n}\n";
  if (lacks_f64_math()) return expect_f64_math_error(f64_epilogue);
  expect_same(f64_epilogue, {Data::Unit}, Tol{0, 1e-13, 8});
}

TEST(DeviceMatmul, BroadcastBatchAndTransposedOperand) {
  // The second operand of %m2 is a transposed view: the matmul reads operands from memory.
  expect_same(
      "graph @m(%a: f32[2,1,4,5], %b: f32[3,5,6], %c: f32[4,6]) -> (f32[2,3,4,6], f32[2,3,4,4]) {\n"
      "  %m = matmul %a, %b : f32[2,3,4,6]\n"
      "  %ct = permute %c {perm = [1, 0]} : f32[6,4]\n"
      "  %m2 = matmul %m, %ct : f32[2,3,4,4]\n"
      "  return %m, %m2\n}\n",
      {Data::Unit}, Tol{0, 1e-5, 30});
}

TEST(DeviceMatmul, IntegersWrapAndMixedTypes) {
  // Integer products accumulate with wrapping; i32 @ f32 is f64.
  expect_same(
      "graph @m(%a: i32[4,9], %b: i32[9,5], %c: i64[2,4,9], %d: i64[9,3], %e: f32[9,5]) -> "
      "(i32[4,5], i64[2,4,3], f64[4,5], i32[4,5]) {\n"
      "  %x = matmul %a, %b : i32[4,5]\n"
      "  %y = matmul %c, %d : i64[2,4,3]\n"
      "  %z = matmul %a, %e : f64[4,5]\n"
      "  %w0 = matmul %a, %b : i32[4,5]\n"
      "  %one = constant {value = 1} : i32[]\n"
      "  %w = add %w0, %one : i32[4,5]\n"
      "  return %x, %y, %z, %w\n}\n",
      {Data::General, Data::General, Data::General, Data::General, Data::Unit},
      Tol{0, 1e-12, 1e10});
}

// ---- conv --------------------------------------------------------------------------------

TEST(DeviceConv, OnTheGemmWithBiasActivationAndResidual) {
  // 16 filters: a GEMM step whose packing gathers the padded 3 x 3 windows, and whose
  // epilogue (bias, relu, residual) runs over the result's [N, M, H, W] domain.
  expect_same(
      "graph @c(%x: f32[2,5,9,9], %w: f32[16,5,3,3], %b: f32[16,1,1], %r: f32[2,16,9,9]) -> f32[2,16,9,9] {\n"
      "  %c = conv %x, %w {strides = [1, 1], low = [1, 1], high = [1, 1]} : f32[2,16,9,9]\n"
      "  %s = add %c, %b : f32[2,16,9,9]\n"
      "  %a = relu %s : f32[2,16,9,9]\n"
      "  %y = add %a, %r : f32[2,16,9,9]\n"
      "  return %y\n}\n",
      {Data::Unit}, Tol{0, 1e-5, 46});
}

TEST(DeviceConv, StridedDilatedGroupedOneByOneAndDepthwise) {
  expect_same(
      "graph @c(%x: f32[1,6,11,10], %w: f32[16,3,3,2], %p: f32[8,6,1,1], %d: f32[6,1,3,3]) -> "
      "(f32[1,16,5,5], f32[1,8,11,10], f32[1,6,6,5]) {\n"
      "  %g = conv %x, %w {strides = [2, 2], dilations = [2, 1], low = [2, 0], high = [1, 1], groups = 2} : "
      "f32[1,16,5,5]\n"
      "  %o = conv %x, %p {strides = [1, 1], low = [0, 0], high = [0, 0]} : f32[1,8,11,10]\n"
      "  %e = conv %x, %d {strides = [2, 2], low = [1, 1], high = [1, 1], groups = 6} : f32[1,6,6,5]\n"
      "  return %g, %o, %e\n}\n",
      {Data::Unit}, Tol{0, 1e-5, 18});
}

TEST(DeviceConv, OneAndThreeSpatialDimsAndIntegers) {
  expect_same(
      "graph @c(%x: f32[3,4,20], %w: f32[9,4,5], %v: f32[1,2,4,5,6], %k: f32[8,2,2,3,2], %i: i32[1,3,6,6], "
      "%j: i32[8,3,3,3]) -> (f32[3,9,18], f32[1,8,4,3,6], i32[1,8,4,4]) {\n"
      "  %a = conv %x, %w {strides = [1], low = [1], high = [1]} : f32[3,9,18]\n"
      "  %b = conv %v, %k {strides = [1, 1, 1], low = [0, 0, 1], high = [1, 0, 0]} : f32[1,8,4,3,6]\n"
      "  %c = conv %i, %j {strides = [1, 1], low = [0, 0], high = [0, 0]} : i32[1,8,4,4]\n"
      "  return %a, %b, %c\n}\n",
      {Data::Unit, Data::Unit, Data::Unit, Data::Unit, Data::General, Data::General}, Tol{0, 1e-5, 24});
}

// ---- attention ---------------------------------------------------------------------------

// Attention steps (fuse-attention) in the plan `text` compiles to on the device under test.
int64_t attention_steps(const std::string& text) {
  const Compilation c = compile_graph(*engine_for(test::device_under_test()).backend(), parse_or_fail(text));
  return std::count_if(c.plan.steps.begin(), c.plan.steps.end(),
                       [](const LaunchPlan::Step& s) { return s.attention.has_value(); });
}

// softmax(%x) over the last axis of f32[`shape`], as Tensor::softmax records it, named %p.
std::string softmax_of(const std::string& x, const std::string& shape, int axis) {
  std::string keep = shape.substr(0, shape.rfind(',')) + ",1";
  return fmt::format(
      "  %m = reduce_max {0} {{axes = [{2}], keepdim}} : f32[{3}]\n"
      "  %d = sub {0}, %m : f32[{1}]\n"
      "  %e = exp %d : f32[{1}]\n"
      "  %z = reduce_sum %e {{axes = [{2}], keepdim}} : f32[{3}]\n"
      "  %p = div %e, %z : f32[{1}]\n",
      x, shape, axis, keep);
}

TEST(DeviceAttention, ExportedFormWithACausalMaskIsOneStep) {
  // PyTorch's export of scaled_dot_product_attention: q, k, v views of one projection, both
  // scaled by d^-1/4, a causal mask added, NaN rows zeroed. 37 rows and keys: partial register
  // tiles and row blocks. Row 5 of batch entry 1 is masked entirely (zeros).
  const std::string text =
      "graph @a(%x: f32[2,37,64], %w: f32[64,192], %mask: f32[2,1,37,37]) -> f32[2,37,64] {\n"
      "  %p0 = matmul %x, %w : f32[2,37,192]\n"
      "  %r = reshape %p0 : f32[2,37,3,2,32]\n"
      "  %qs = slice %r {start = [0, 0, 0, 0, 0], stop = [2, 37, 1, 2, 32]} : f32[2,37,1,2,32]\n"
      "  %ks = slice %r {start = [0, 0, 1, 0, 0], stop = [2, 37, 2, 2, 32]} : f32[2,37,1,2,32]\n"
      "  %vs = slice %r {start = [0, 0, 2, 0, 0], stop = [2, 37, 3, 2, 32]} : f32[2,37,1,2,32]\n"
      "  %q4 = reshape %qs : f32[2,37,2,32]\n  %k4 = reshape %ks : f32[2,37,2,32]\n"
      "  %v4 = reshape %vs : f32[2,37,2,32]\n"
      "  %q = permute %q4 {perm = [0, 2, 1, 3]} : f32[2,2,37,32]\n"
      "  %kt = permute %k4 {perm = [0, 2, 3, 1]} : f32[2,2,32,37]\n"
      "  %v = permute %v4 {perm = [0, 2, 1, 3]} : f32[2,2,37,32]\n"
      "  %c = constant {value = 0.42044821} : f32[]\n"
      "  %qc = mul %q, %c : f32[2,2,37,32]\n  %kc = mul %kt, %c : f32[2,2,32,37]\n"
      "  %s = matmul %qc, %kc : f32[2,2,37,37]\n"
      "  %b = add %s, %mask : f32[2,2,37,37]\n" +
      softmax_of("%b", "2,2,37,37", 3) +
      "  %n = isnan %p : bool[2,2,37,37]\n  %zero = constant {value = 0.0} : f32[1]\n"
      "  %pw = where %n, %zero, %p : f32[2,2,37,37]\n"
      "  %o = matmul %pw, %v : f32[2,2,37,32]\n"
      "  %ot = permute %o {perm = [0, 2, 1, 3]} : f32[2,37,2,32]\n"
      "  %y = reshape %ot : f32[2,37,64]\n"
      "  return %y\n}\n";
  EXPECT_EQ(attention_steps(text), 1);
  const Graph g = parse_or_fail(text);
  std::vector<HostTensor> in = inputs_for(g, {Data::Unit});
  std::vector<float> mask(2 * 37 * 37);
  const float inf = std::numeric_limits<float>::infinity();
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 37; ++i)
      for (int j = 0; j < 37; ++j) mask[static_cast<size_t>((b * 37 + i) * 37 + j)] = j > i || (b == 1 && i == 5) ? -inf : 0.0f;
  in[2] = HostTensor::from_vector<float>(mask, {2, 1, 37, 37});
  expect_same(text, in, Tol{0, 1e-5, 8});
}

TEST(DeviceAttention, ManyKeyBlocksAndHeadsSharingKeys) {
  // The frontend's form, keys and values shared by 4 heads (broadcast batch dims), 300 keys
  // (past one block of keys), 70 rows (past one block of rows), v of another width.
  const std::string text =
      "graph @a(%q: f32[2,4,70,64], %kt: f32[2,1,64,300], %v: f32[2,1,300,40]) -> f32[2,4,70,40] {\n"
      "  %s = matmul %q, %kt : f32[2,4,70,300]\n"
      "  %c = constant {value = 0.125} : f32[]\n"
      "  %x = mul %s, %c : f32[2,4,70,300]\n" +
      softmax_of("%x", "2,4,70,300", 3) +
      "  %y = matmul %p, %v : f32[2,4,70,40]\n"
      "  return %y\n}\n";
  EXPECT_EQ(attention_steps(text), 1);
  expect_same(text, {Data::Unit}, Tol{0, 1e-5, 8});
}

TEST(DeviceAttention, TheOpWrittenOutWithABiasAlongTheQueries) {
  // The attention op itself (as `kiln opt` prints it), with a bias that is one value per
  // query (its stride along the keys is 0: added before the softmax, not by it), and with k
  // read through a transpose of a stored [3, 16, 40].
  expect_same(
      "graph @a(%q: f32[3,20,16], %kt: f32[3,16,40], %v: f32[3,40,8], %b: f32[20,1]) -> (f32[3,20,8], f32[3,20,8]) {\n"
      "  %k = permute %kt {perm = [0, 2, 1]} : f32[3,40,16]\n"
      "  %y = attention %q, %k, %v, %b {scale = 0.25, masked_zero} : f32[3,20,8]\n"
      "  %z = attention %q, %k, %v {scale = -0.5} : f32[3,20,8]\n"
      "  return %y, %z\n}\n",
      {Data::Unit}, Tol{0, 1e-5, 8});
}

TEST(DeviceAttention, UndefinedRowsAreNaN) {
  // Without where(isnan) a row whose softmax is undefined stays NaN, as the unfused graph's:
  // row 0 masked entirely, row 1 with a NaN score, row 2 with an infinite one.
  const std::string text =
      "graph @a(%q: f32[4,16], %kt: f32[16,9], %v: f32[9,8], %bias: f32[4,9]) -> f32[4,8] {\n"
      "  %s = matmul %q, %kt : f32[4,9]\n"
      "  %x = add %s, %bias : f32[4,9]\n" +
      softmax_of("%x", "4,9", 1) +
      "  %y = matmul %p, %v : f32[4,8]\n"
      "  return %y\n}\n";
  EXPECT_EQ(attention_steps(text), 1);
  const Graph g = parse_or_fail(text);
  std::vector<HostTensor> in = inputs_for(g, {Data::Unit});
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> bias(36, 0.0f);
  for (int j = 0; j < 9; ++j) bias[static_cast<size_t>(j)] = -inf;
  bias[9 + 4] = std::numeric_limits<float>::quiet_NaN();
  bias[18 + 2] = inf;
  in[3] = HostTensor::from_vector<float>(bias, {4, 9});
  expect_same(text, in, Tol{0, 1e-5, 8});
}

// ---- shapes that change the schedule -----------------------------------------------------

TEST(DeviceShapes, ScalarsOfRankZero) {
  expect_same(
      "graph @s(%s: f32[], %x: f32[37], %i: i32[], %b: bool[]) -> (f32[], f32[37], i32[], f64[], "
      "bool[], f32[], i64[], f32[37]) {\n"
      "  %e = floor %s : f32[]\n"
      "  %a = add %s, %x : f32[37]\n"
      "  %n = neg %i : i32[]\n"
      "  %c = cast %i : f64[]\n"
      "  %nb = not %b : bool[]\n  %w = where %b, %s, %e : f32[]\n"
      "  %r0 = reshape %i : i32[1]\n"
      "  %r = reduce_sum %r0 {axes = [0]} : i64[]\n"
      "  %ex = expand %s : f32[37]\n"
      "  return %e, %a, %n, %c, %nb, %w, %r, %ex\n}\n");
}

TEST(DeviceShapes, LargeKernelsAreSplitAcrossCores) {
  // Enough work for the engine to split kernels into ranges run in parallel (and the GEMM
  // into row blocks); odd extents leave partial vectors and tiles at the ends of ranges.
  const std::string text =
      "graph @big(%x: f32[300,257], %w: f32[257,64], %i: i32[300,257]) -> "
      "(f32[300,257], f32[300], f32[257], i64[257], i64[300], i64[257], i32[300], f32[300,64]) {\n"
      "  %c15 = constant {value = 1.5} : f32[]\n"
      "  %a = mul %x, %c15 : f32[300,257]\n"
      "  %t = floor %a : f32[300,257]\n"
      "  %y = mul %t, %x : f32[300,257]\n"
      "  %s = reduce_sum %x {axes = [1]} : f32[300]\n"
      "  %c = reduce_max %x {axes = [0]} : f32[257]\n"
      "  %am = argmax %x {axes = [0]} : i64[257]\n"
      "  %ai = argmin %x {axes = [1]} : i64[300]\n"
      "  %is = reduce_sum %i {axes = [0]} : i64[257]\n"
      "  %im = reduce_min %i {axes = [1]} : i32[300]\n"
      "  %m = matmul %x, %w : f32[300,64]\n"
      "  return %y, %s, %c, %am, %ai, %is, %im, %m\n}\n";
  const Tol sum{0, 1e-5, 257};
  expect_same(text, inputs_for(parse_or_fail(text), {Data::Unit, Data::Unit, Data::General}),
              {kExact, sum, kExact, kExact, kExact, kExact, kExact, sum});
}

TEST(DeviceShapes, LargeReductionsToFewValues) {
  // Reductions to a few values over many elements are split into blocks (split-reductions):
  // max and min must keep their exact semantics (NaN wins, +0.0 beats -0.0), sums their
  // tolerance, integer sums and products stay exact.
  const std::string text =
      "graph @few(%x: f32[262144], %c: f32[65536,4], %i: i32[512,512]) -> (f32[], f32[], f32[], "
      "f32[4], f32[1,4], i64[], i64[], i32[]) {\n"
      "  %s = reduce_sum %x {axes = [0]} : f32[]\n"
      "  %mx = reduce_max %x {axes = [0]} : f32[]\n"
      "  %mn = reduce_min %x {axes = [0]} : f32[]\n"
      "  %cs = reduce_max %c {axes = [0]} : f32[4]\n"
      "  %cm = reduce_min %c {axes = [0], keepdim} : f32[1,4]\n"
      "  %is = reduce_sum %i {axes = [0, 1]} : i64[]\n"
      "  %ip = reduce_prod %i {axes = [0, 1]} : i64[]\n"
      "  %im = reduce_max %i {axes = [0, 1]} : i32[]\n"
      "  return %s, %mx, %mn, %cs, %cm, %is, %ip, %im\n}\n";
  const Graph g = parse_or_fail(text);
  std::vector<HostTensor> in = inputs_for(g, {Data::Unit, Data::Unit, Data::General});
  const std::vector<Tol> tols = {Tol{0, 1e-5, 262144}, kExact};
  expect_same(text, in, tols);
  // Signed zeros everywhere, then one NaN deep inside a block: the same kernels, new data.
  for (int t = 0; t < 2; ++t) {
    for (int64_t k = 0; k < in[t].numel(); ++k) in[t].set_double(k, (k * 7 % 5) < 2 ? -0.0 : 0.0);
  }
  expect_same(text, in, tols);
  in[0].set_double(200001, kNaN);
  in[1].set_double(4 * 40000 + 2, kNaN);
  expect_same(text, in, tols);
}

// ---- meta ---------------------------------------------------------------------------------

TEST(DeviceOps, EveryOpIsCovered) {
  // The every-device suites and the cpu's own (its math, JIT and caches), not the disk
  // cache's processes.
  const std::set<std::string> ran = test::ops_exercised_by("Device*:Cpu*:-DeviceOps.EveryOpIsCovered:DeviceDiskCache.*");
  for (const OpInfo& info : all_ops())
    EXPECT_TRUE(ran.count(std::string(info.name))) << "op '" << info.name << "' has no cpu test in device_ops_test.cpp";
}

}  // namespace
}  // namespace kiln
