// Every op on the reference interpreter against hand-computed values.
//
// The interpreter is the oracle for every backend, so it is checked here by hand.
// EveryOpIsCovered runs the other tests of this file and fails until every op of ops.def
// appears in a graph one of them ran (coverage derived from the cases, not a list).
#include <cmath>
#include <limits>
#include <set>

#include <gmock/gmock.h>

#include "test_util.h"

namespace kiln {
namespace {

using test::eval;
using test::run;


constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Element-wise comparison that treats NaN == NaN and checks the type.
void expect_values(const HostTensor& t, const TensorType& type, const std::vector<double>& want,
                   double tol = 0) {
  ASSERT_EQ(t.type(), type) << "got " << t.type().str();
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const double got = t.get_double(static_cast<int64_t>(k));
    if (std::isnan(want[k])) EXPECT_TRUE(std::isnan(got)) << "element " << k;
    else if (tol == 0) EXPECT_EQ(got, want[k]) << "element " << k;
    else EXPECT_NEAR(got, want[k], tol * std::max(1.0, std::fabs(want[k]))) << "element " << k;
  }
}

void expect_ints(const HostTensor& t, const TensorType& type, const std::vector<int64_t>& want) {
  ASSERT_EQ(t.type(), type) << "got " << t.type().str();
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(t.get_int(static_cast<int64_t>(k)), want[k]) << "element " << k;
}

const TensorType F32(Shape s) { return {DType::F32, s}; }
const TensorType F64(Shape s) { return {DType::F64, s}; }
const TensorType I32(Shape s) { return {DType::I32, s}; }
const TensorType I64(Shape s) { return {DType::I64, s}; }
const TensorType B(Shape s) { return {DType::Bool, s}; }

// ---- sources ---------------------------------------------------------------------------


TEST(InterpreterSources, ConstantSplatAndData) {
  expect_values(eval("f32[2,2]", "%c = constant {value = 1.5} : f32[2,2]\nreturn %c"), F32({2, 2}), {1.5, 1.5, 1.5, 1.5});
  expect_values(eval("f64[3]", "%c = constant {data = [1.0, -2.5, inf]} : f64[3]\nreturn %c"), F64({3}), {1, -2.5, kInf});
  expect_ints(eval("bool[2]", "%c = constant {data = [true, false]} : bool[2]\nreturn %c"), B({2}), {1, 0});
  expect_ints(eval("i64[]", "%c = constant {value = 9007199254740993} : i64[]\nreturn %c"), I64({}),
              {9007199254740993});  // 2^53 + 1 survives: integers are not stored as double
  // An f32 constant holds the float nearest the literal.
  expect_values(eval("f32[]", "%c = constant {value = 0.1} : f32[]\nreturn %c"), F32({}),
                {static_cast<double>(0.1f)});
}

TEST(InterpreterSources, LaunchScalarSplatsItsValue) {
  const auto out = run("graph @s() -> (f32[], i32[3], f64[2,2]) {\n"
                       "  %a = scalar {slot = 0, value = 0.25} : f32[]\n"
                       "  %b = scalar {slot = 1, value = -7} : i32[3]\n"
                       "  %c = scalar {slot = 2, value = 1e300} : f64[2,2]\n"
                       "  return %a, %b, %c\n}");
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>{0.25f});
  EXPECT_EQ(out[1].to_vector<int32_t>(), (std::vector<int32_t>{-7, -7, -7}));
  EXPECT_EQ(out[2].to_vector<double>(), (std::vector<double>(4, 1e300)));
}

TEST(InterpreterSources, Input) {
  const auto out = run("graph @id(%x: i32[3]) -> i32[3] {\n return %x\n}",
                       {HostTensor::from_vector<int32_t>({7, -1, 3}, {3})});
  expect_ints(out[0], I32({3}), {7, -1, 3});
  EXPECT_THROW(run("graph @id(%x: i32[3]) -> i32[3] {\n return %x\n}",
                   {HostTensor::from_vector<float>({7, -1, 3}, {3})}),
               Error);
  EXPECT_THROW(run("graph @id(%x: i32[3]) -> i32[3] {\n return %x\n}", {}), Error);
}

TEST(InterpreterSources, Arange) {
  expect_values(eval("f32[4]", "%a = arange {start = 0.5, step = 0.25} : f32[4]\nreturn %a"), F32({4}),
                {0.5, 0.75, 1.0, 1.25});
  expect_ints(eval("i64[3]", "%a = arange {start = 10, step = -3} : i64[3]\nreturn %a"), I64({3}), {10, 7, 4});
  expect_ints(eval("i32[0]", "%a = arange {start = 0, step = 1} : i32[0]\nreturn %a"), I32({0}), {});
}

TEST(InterpreterSources, RandIsSeededUniformAndIdenticalAcrossFloatTypes) {
  const HostTensor a = eval("f32[10000]", "%r = rand {seed = 42} : f32[10000]\nreturn %r");
  const HostTensor b = eval("f32[10000]", "%r = rand {seed = 42} : f32[10000]\nreturn %r");
  const HostTensor c = eval("f64[10000]", "%r = rand {seed = 42} : f64[10000]\nreturn %r");
  const HostTensor d = eval("f32[10000]", "%r = rand {seed = 43} : f32[10000]\nreturn %r");
  double sum = 0;
  int differ = 0;
  for (int64_t k = 0; k < a.numel(); ++k) {
    const double v = a.get_double(k);
    ASSERT_GT(v, 0.0);
    ASSERT_LT(v, 1.0);
    EXPECT_EQ(v, b.get_double(k));
    EXPECT_EQ(v, c.get_double(k)) << "24-bit values are exact in f32 and f64";
    differ += v != d.get_double(k);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
  EXPECT_GT(differ, 9900);
}

// ---- elementwise unary -----------------------------------------------------------------


HostTensor unary(std::string_view op, const std::string& type, const std::string& data) {
  return eval(type, "%x = constant {data = " + data + "} : " + type + "\n%y = " + std::string(op) +
                        " %x : " + type + "\nreturn %y");
}

TEST(InterpreterUnary, FloatMath) {
  const std::string x = "[-1.5, 0.0, 0.25, 4.0]";
  const std::vector<double> xs = {-1.5, 0.0, 0.25, 4.0};
  struct Case { const char* op; double (*f)(double); };
  const Case cases[] = {
      {"neg", [](double v) { return -v; }},
      {"abs", [](double v) { return std::fabs(v); }},
      {"exp", [](double v) { return std::exp(v); }},
      {"log", [](double v) { return std::log(v); }},
      {"sqrt", [](double v) { return std::sqrt(v); }},
      {"rsqrt", [](double v) { return 1 / std::sqrt(v); }},
      {"sin", [](double v) { return std::sin(v); }},
      {"cos", [](double v) { return std::cos(v); }},
      {"asin", [](double v) { return std::asin(v); }},
      {"acos", [](double v) { return std::acos(v); }},
      {"atan", [](double v) { return std::atan(v); }},
      {"tanh", [](double v) { return std::tanh(v); }},
      {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"relu", [](double v) { return v < 0 ? 0.0 : v; }},
      {"erf", [](double v) { return std::erf(v); }},
      {"floor", [](double v) { return std::floor(v); }},
      {"ceil", [](double v) { return std::ceil(v); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<double> want64, want32;
    for (double v : xs) {
      want64.push_back(c.f(v));
      want32.push_back(static_cast<float>(c.f(v)));  // computed in double, rounded once
    }
    expect_values(unary(c.op, "f64[4]", x), F64({4}), want64);
    expect_values(unary(c.op, "f32[4]", x), F32({4}), want32);
  }
}

TEST(InterpreterUnary, SpecialValues) {
  expect_values(unary("log", "f32[3]", "[0.0, -1.0, inf]"), F32({3}), {-kInf, kNaN, kInf});
  expect_values(unary("relu", "f32[2]", "[nan, -inf]"), F32({2}), {kNaN, 0});
  expect_values(unary("sigmoid", "f64[2]", "[-inf, inf]"), F64({2}), {0, 1});
  expect_values(unary("tanh", "f32[1]", "[nan]"), F32({1}), {kNaN});
  expect_values(unary("rsqrt", "f32[1]", "[0.0]"), F32({1}), {kInf});
}

TEST(InterpreterUnary, Integers) {
  expect_ints(unary("neg", "i32[3]", "[5, -2147483648, 0]"), I32({3}), {-5, -2147483648LL, 0});  // wraps
  expect_ints(unary("abs", "i32[2]", "[-7, -2147483648]"), I32({2}), {7, -2147483648LL});
  expect_ints(unary("relu", "i64[3]", "[-3, 0, 3]"), I64({3}), {0, 0, 3});
  expect_ints(unary("not", "bool[2]", "[true, false]"), B({2}), {0, 1});
}

// ---- cast ------------------------------------------------------------------------------


HostTensor cast(const std::string& from, const std::string& data, const std::string& to) {
  return eval(to, "%x = constant {data = " + data + "} : " + from + "\n%y = cast %x : " + to + "\nreturn %y");
}

TEST(InterpreterCast, FloatToIntTruncatesSaturatesAndZeroesNaN) {
  expect_ints(cast("f32[6]", "[2.7, -2.7, nan, inf, -inf, 3000000000.0]", "i32[6]"), I32({6}),
              {2, -2, 0, 2147483647, -2147483648LL, 2147483647});
  expect_ints(cast("f64[2]", "[1e300, -0.5]", "i64[2]"), I64({2}), {INT64_MAX, 0});
}

TEST(InterpreterCast, ToAndFromBoolAndBetweenWidths) {
  expect_ints(cast("f64[3]", "[0.0, -0.0, nan]", "bool[3]"), B({3}), {0, 0, 1});
  expect_values(cast("bool[2]", "[true, false]", "f32[2]"), F32({2}), {1, 0});
  expect_ints(cast("i64[2]", "[4294967297, -1]", "i32[2]"), I32({2}), {1, -1});  // wraps
  expect_values(cast("i64[1]", "[16777217]", "f32[1]"), F32({1}), {16777216});    // rounds
  expect_values(cast("f64[1]", "[0.1]", "f32[1]"), F32({1}), {static_cast<double>(0.1f)});
}

// ---- binary ----------------------------------------------------------------------------


HostTensor binary(std::string_view op, const std::string& ta, const std::string& a, const std::string& tb,
                  const std::string& b, const std::string& tr) {
  return eval(tr, "%a = constant {data = " + a + "} : " + ta + "\n%b = constant {data = " + b + "} : " + tb +
                      "\n%y = " + std::string(op) + " %a, %b : " + tr + "\nreturn %y");
}

TEST(InterpreterBinary, ArithmeticWithBroadcasting) {
  // [2,1] op [3] -> [2,3]: size-1 dim and rank mismatch at once.
  const std::string a = "[1.0, 2.0]", b = "[10.0, 20.0, 40.0]";
  expect_values(binary("add", "f32[2,1]", a, "f32[3]", b, "f32[2,3]"), F32({2, 3}), {11, 21, 41, 12, 22, 42});
  expect_values(binary("sub", "f32[2,1]", a, "f32[3]", b, "f32[2,3]"), F32({2, 3}), {-9, -19, -39, -8, -18, -38});
  expect_values(binary("mul", "f32[2,1]", a, "f32[3]", b, "f32[2,3]"), F32({2, 3}), {10, 20, 40, 20, 40, 80});
  expect_values(binary("div", "f32[2,1]", a, "f32[3]", b, "f32[2,3]"), F32({2, 3}),
                {0.1f, 0.05f, 0.025f, 0.2f, 0.1f, 0.05f});
  expect_values(binary("pow", "f64[2,1]", "[2.0, 3.0]", "f64[2]", "[2.0, 0.5]", "f64[2,2]"), F64({2, 2}),
                {4, std::sqrt(2.0), 9, std::sqrt(3.0)}, 1e-15);
  expect_values(binary("max", "f32[3]", "[1.0, nan, -1.0]", "f32[3]", "[2.0, 0.0, -2.0]", "f32[3]"), F32({3}),
                {2, kNaN, -1});
  // atan2(y, x): the quadrant from both signs.
  expect_values(binary("atan2", "f64[4]", "[1.0, 1.0, -1.0, 0.0]", "f64[4]", "[1.0, -1.0, -1.0, -1.0]", "f64[4]"), F64({4}),
                {M_PI / 4, 3 * M_PI / 4, -3 * M_PI / 4, M_PI}, 1e-15);
  expect_values(binary("atan2", "i32[1]", "[1]", "i32[1]", "[0]", "f64[1]"), F64({1}), {M_PI / 2}, 1e-15);
  expect_values(binary("min", "f32[3]", "[1.0, 5.0, -1.0]", "f32[3]", "[2.0, nan, -2.0]", "f32[3]"), F32({3}),
                {1, kNaN, -2});
}

TEST(InterpreterBinary, ScalarAndZeroSizeOperands) {
  expect_values(binary("mul", "f32[]", "[3.0]", "f32[2]", "[1.0, 2.0]", "f32[2]"), F32({2}), {3, 6});
  expect_values(binary("add", "f32[0,3]", "[]", "f32[3]", "[1.0, 2.0, 3.0]", "f32[0,3]"), F32({0, 3}), {});
  expect_values(binary("add", "f32[1]", "[1.0]", "f32[0]", "[]", "f32[0]"), F32({0}), {});
}

TEST(InterpreterBinary, IntegerSemanticsAndPromotion) {
  expect_ints(binary("add", "i32[2]", "[2147483647, 1]", "i32[2]", "[1, 2]", "i32[2]"), I32({2}),
              {-2147483648LL, 3});  // wraps
  expect_ints(binary("mul", "i64[1]", "[4611686018427387904]", "i64[1]", "[4]", "i64[1]"), I64({1}), {0});
  expect_ints(binary("pow", "i32[4]", "[2, 2, -1, 1]", "i32[4]", "[10, -1, -3, -5]", "i32[4]"), I32({4}),
              {1024, 0, -1, 1});
  expect_ints(binary("max", "i32[2]", "[3, -9]", "i64[2]", "[-4, 2]", "i64[2]"), I64({2}), {3, 2});
  // NumPy: int / int is true division in f64; i32 + f32 is f64.
  expect_values(binary("div", "i32[2]", "[7, -7]", "i32[2]", "[2, 2]", "f64[2]"), F64({2}), {3.5, -3.5});
  expect_values(binary("add", "i32[1]", "[16777217]", "f32[1]", "[0.0]", "f64[1]"), F64({1}), {16777217});
  expect_values(binary("add", "bool[2]", "[true, false]", "f32[2]", "[0.5, 0.5]", "f32[2]"), F32({2}), {1.5, 0.5});
}


TEST(InterpreterCompare, AllSixWithNaNAndMixedTypes) {
  const std::string a = "[1.0, 2.0, nan]", b = "[2.0, 2.0, nan]";
  expect_ints(binary("eq", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {0, 1, 0});
  expect_ints(binary("ne", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {1, 0, 1});
  expect_ints(binary("lt", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {1, 0, 0});
  expect_ints(binary("le", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {1, 1, 0});
  expect_ints(binary("gt", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {0, 0, 0});
  expect_ints(binary("ge", "f32[3]", a, "f32[3]", b, "bool[3]"), B({3}), {0, 1, 0});
  // i64 against f32 compares in f64: 2^24 + 1 is not equal to the float 2^24.
  expect_ints(binary("eq", "i64[1]", "[16777217]", "f32[1]", "[16777216.0]", "bool[1]"), B({1}), {0});
  expect_ints(binary("lt", "i32[2,1]", "[1, 5]", "i32[2]", "[3, 4]", "bool[2,2]"), B({2, 2}), {1, 1, 0, 0});
}


TEST(InterpreterLogic, AndOrWhere) {
  const std::string a = "[true, true, false, false]", b = "[true, false, true, false]";
  expect_ints(binary("and", "bool[4]", a, "bool[4]", b, "bool[4]"), B({4}), {1, 0, 0, 0});
  expect_ints(binary("or", "bool[4]", a, "bool[4]", b, "bool[4]"), B({4}), {1, 1, 1, 0});
  // where with a broadcast condition and promoted branches (i32 and f32 -> f64).
  expect_values(eval("f64[2,2]",
                     "%c = constant {data = [true, false]} : bool[2]\n"
                     "%a = constant {data = [1, 2, 3, 4]} : i32[2,2]\n"
                     "%b = constant {value = -0.5} : f32[]\n"
                     "%y = where %c, %a, %b : f64[2,2]\nreturn %y"),
                F64({2, 2}), {1, -0.5, 3, -0.5});
}

// ---- reductions ------------------------------------------------------------------------


HostTensor reduce(std::string_view op, const std::string& type, const std::string& data, const std::string& attrs,
                  const std::string& result) {
  return eval(result, "%x = constant {data = " + data + "} : " + type + "\n%y = " + std::string(op) + " %x {" +
                          attrs + "} : " + result + "\nreturn %y");
}

TEST(InterpreterBinary, MaxMinAreCommutativeOnSignedZeros) {
  // IEEE 754-2019 maximum/minimum: +0.0 > -0.0 in either operand order (CSE relies on it).
  for (const char* order : {"[-0.0, 0.0]", "[0.0, -0.0]"}) {
    SCOPED_TRACE(order);
    const std::string a = order[1] == '-' ? "[-0.0]" : "[0.0]", b = order[1] == '-' ? "[0.0]" : "[-0.0]";
    const HostTensor mx = binary("max", "f64[1]", a, "f64[1]", b, "f64[1]");
    const HostTensor mn = binary("min", "f64[1]", a, "f64[1]", b, "f64[1]");
    EXPECT_FALSE(std::signbit(mx.get_double(0)));
    EXPECT_TRUE(std::signbit(mn.get_double(0)));
    EXPECT_FALSE(std::signbit(reduce("reduce_max", "f32[2]", order, "axes = [0]", "f32[]").get_double(0)));
    EXPECT_TRUE(std::signbit(reduce("reduce_min", "f32[2]", order, "axes = [0]", "f32[]").get_double(0)));
  }
  expect_ints(reduce("argmax", "f32[2]", "[-0.0, 0.0]", "axes = [0]", "i64[]"), I64({}), {0});
}

TEST(InterpreterReduce, SumOverAxesWithAndWithoutKeepdim) {
  const std::string x = "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]";  // [[1,2,3],[4,5,6]]
  expect_values(reduce("reduce_sum", "f32[2,3]", x, "axes = [1], keepdim", "f32[2,1]"), F32({2, 1}), {6, 15});
  expect_values(reduce("reduce_sum", "f32[2,3]", x, "axes = [0]", "f32[3]"), F32({3}), {5, 7, 9});
  expect_values(reduce("reduce_sum", "f32[2,3]", x, "axes = [0, 1]", "f32[]"), F32({}), {21});
  expect_values(reduce("reduce_sum", "f32[2,3]", x, "axes = [0, 1], keepdim", "f32[1,1]"), F32({1, 1}), {21});
  expect_values(reduce("reduce_sum", "f32[2,0]", "[]", "axes = [1]", "f32[2]"), F32({2}), {0, 0});
}

TEST(InterpreterReduce, SumAccumulatesInDoubleWithCompensation) {
  // In f32 arithmetic 2^24 + 1 + 1 stays 2^24; the oracle gets the exact 2^24 + 2.
  expect_values(reduce("reduce_sum", "f32[3]", "[16777216.0, 1.0, 1.0]", "axes = [0]", "f32[]"), F32({}),
                {16777218});
  // Plain double summation loses the 1.0 here; Neumaier's compensation keeps it.
  expect_values(reduce("reduce_sum", "f64[4]", "[1e100, 1.0, -1e100, 0.0]", "axes = [0]", "f64[]"), F64({}), {1});
}

TEST(InterpreterReduce, SumsWithInfinitiesAndOverflow) {
  // The compensation term must not turn an infinite sum into nan (inf - inf).
  expect_values(reduce("reduce_sum", "f32[2]", "[1.0, inf]", "axes = [0]", "f32[]"), F32({}), {kInf});
  expect_values(reduce("reduce_sum", "f64[3]", "[-inf, 2.0, 1.0]", "axes = [0]", "f64[]"), F64({}), {-kInf});
  expect_values(reduce("reduce_sum", "f64[2]", "[1e308, 1e308]", "axes = [0]", "f64[]"), F64({}), {kInf});
  expect_values(reduce("reduce_sum", "f32[2]", "[inf, -inf]", "axes = [0]", "f32[]"), F32({}), {kNaN});
  expect_values(reduce("reduce_sum", "f32[2]", "[3e38, 3e38]", "axes = [0]", "f32[]"), F32({}), {kInf});
}

TEST(InterpreterReduce, IntegerAndBoolSumsWidenToI64) {
  expect_ints(reduce("reduce_sum", "i32[2]", "[2147483647, 2147483647]", "axes = [0]", "i64[]"), I64({}),
              {4294967294LL});
  expect_ints(reduce("reduce_sum", "bool[3]", "[true, true, false]", "axes = [0]", "i64[]"), I64({}), {2});
  expect_ints(reduce("reduce_prod", "i32[3]", "[-2, 3, 4]", "axes = [0]", "i64[]"), I64({}), {-24});
}

TEST(InterpreterReduce, ProdMaxMin) {
  const std::string x = "[1.0, -2.0, 3.0, 4.0, 0.5, -6.0]";
  expect_values(reduce("reduce_prod", "f64[2,3]", x, "axes = [1]", "f64[2]"), F64({2}), {-6, -12});
  expect_values(reduce("reduce_prod", "f64[0]", "[]", "axes = [0]", "f64[]"), F64({}), {1});
  expect_values(reduce("reduce_max", "f64[2,3]", x, "axes = [1]", "f64[2]"), F64({2}), {3, 4});
  expect_values(reduce("reduce_min", "f64[2,3]", x, "axes = [0], keepdim", "f64[1,3]"), F64({1, 3}), {1, -2, -6});
  expect_values(reduce("reduce_max", "f32[3]", "[1.0, nan, 5.0]", "axes = [0]", "f32[]"), F32({}), {kNaN});
  expect_ints(reduce("reduce_min", "i32[3]", "[4, -7, 2]", "axes = [0]", "i32[]"), I32({}), {-7});
}

TEST(InterpreterReduce, ArgMaxArgMinTakeTheFirstExtremeAndNaN) {
  expect_ints(reduce("argmax", "f32[2,3]", "[1.0, 3.0, 3.0, 7.0, 7.0, 0.0]", "axes = [1]", "i64[2]"), I64({2}),
              {1, 0});
  expect_ints(reduce("argmin", "f32[2,3]", "[1.0, 3.0, 0.0, 7.0, -7.0, 0.0]", "axes = [0]", "i64[3]"), I64({3}),
              {0, 1, 0});
  expect_ints(reduce("argmax", "f32[4]", "[1.0, nan, 9.0, nan]", "axes = [0]", "i64[]"), I64({}), {1});
  expect_ints(reduce("argmin", "i64[3]", "[5, 2, 2]", "axes = [0], keepdim", "i64[1]"), I64({1}), {1});
}

// ---- movement --------------------------------------------------------------------------


const char* kIota6 = "%x = arange {start = 0, step = 1} : i32[6]\n";

TEST(InterpreterMovement, ReshapePermuteExpand) {
  expect_ints(eval("i32[3,2]", std::string(kIota6) + "%y = reshape %x : i32[3,2]\nreturn %y"), I32({3, 2}),
              {0, 1, 2, 3, 4, 5});
  expect_ints(eval("i32[3,2]", std::string(kIota6) +
                                   "%r = reshape %x : i32[2,3]\n%y = permute %r {perm = [1, 0]} : i32[3,2]\nreturn %y"),
              I32({3, 2}), {0, 3, 1, 4, 2, 5});
  expect_ints(eval("i32[2,1,3]", std::string(kIota6) +
                                     "%r = reshape %x : i32[1,2,3]\n%y = permute %r {perm = [1, 0, 2]} : i32[2,1,3]\nreturn %y"),
              I32({2, 1, 3}), {0, 1, 2, 3, 4, 5});
  expect_ints(eval("i32[2,2,3]", std::string(kIota6) +
                                     "%r = reshape %x : i32[2,1,3]\n%y = expand %r : i32[2,2,3]\nreturn %y"),
              I32({2, 2, 3}), {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  expect_ints(eval("i32[2,3]", "%x = constant {value = 7} : i32[]\n%y = expand %x : i32[2,3]\nreturn %y"),
              I32({2, 3}), {7, 7, 7, 7, 7, 7});
}

TEST(InterpreterMovement, SliceWithSteps) {
  const std::string base = std::string(kIota6) + "%r = reshape %x : i32[2,3]\n";
  expect_ints(eval("i32[2,2]", base + "%y = slice %r {start = [0, 0], stop = [2, 3], step = [1, 2]} : i32[2,2]\nreturn %y"),
              I32({2, 2}), {0, 2, 3, 5});
  expect_ints(eval("i32[1,2]", base + "%y = slice %r {start = [1, 1], stop = [2, 3]} : i32[1,2]\nreturn %y"),
              I32({1, 2}), {4, 5});
  expect_ints(eval("i32[0,3]", base + "%y = slice %r {start = [1, 0], stop = [1, 3]} : i32[0,3]\nreturn %y"),
              I32({0, 3}), {});
}

TEST(InterpreterOps, RoundSignAndFloatTests) {
  const std::string x = "%x = constant {data = [0.5, 1.5, 2.5, -0.5, -2.5, 2.6, -0.0, nan, inf, -3.0]} : f32[10]\n";
  expect_values(eval("f32[10]", x + "%y = round %x : f32[10]\nreturn %y"), F32({10}),
                {0, 2, 2, -0.0, -2, 3, -0.0, kNaN, kInf, -3});
  expect_values(eval("f32[10]", x + "%y = sign %x : f32[10]\nreturn %y"), F32({10}),
                {1, 1, 1, -1, -1, 1, -0.0, kNaN, 1, -1});
  EXPECT_TRUE(std::signbit(eval("f32[10]", x + "%y = round %x : f32[10]\nreturn %y").get_double(3)));
  expect_ints(eval("bool[10]", x + "%y = isnan %x : bool[10]\nreturn %y"), TensorType{DType::Bool, {10}},
              {0, 0, 0, 0, 0, 0, 0, 1, 0, 0});
  expect_ints(eval("bool[10]", x + "%y = isinf %x : bool[10]\nreturn %y"), TensorType{DType::Bool, {10}},
              {0, 0, 0, 0, 0, 0, 0, 0, 1, 0});
  expect_ints(eval("i32[3]", "%x = constant {data = [-7, 0, 9]} : i32[3]\n%y = sign %x : i32[3]\nreturn %y"), I32({3}),
              {-1, 0, 1});
}

TEST(InterpreterOps, RemaindersTakeTheDivisorsOrTheDividendsSign) {
  const std::string ab = "%a = constant {data = [7, -7, 7, -7, 5, -2147483648]} : i32[6]\n"
                         "%b = constant {data = [3, 3, -3, -3, 0, -1]} : i32[6]\n";
  expect_ints(eval("i32[6]", ab + "%y = mod %a, %b : i32[6]\nreturn %y"), I32({6}), {1, 2, -2, -1, 0, 0});
  expect_ints(eval("i32[6]", ab + "%y = fmod %a, %b : i32[6]\nreturn %y"), I32({6}), {1, -1, 1, -1, 0, 0});
  const std::string fab = "%a = constant {data = [7.5, -7.5, 7.5, 6.0, -6.0, 1.0, 1.0, -1.0]} : f64[8]\n"
                          "%b = constant {data = [2.0, 2.0, -2.0, 3.0, 3.0, 0.0, inf, inf]} : f64[8]\n";
  expect_values(eval("f64[8]", fab + "%y = mod %a, %b : f64[8]\nreturn %y"), F64({8}),
                {1.5, 0.5, -0.5, 0, 0, kNaN, 1, kInf});
  expect_values(eval("f64[8]", fab + "%y = fmod %a, %b : f64[8]\nreturn %y"), F64({8}),
                {1.5, -1.5, 1.5, 0, -0.0, kNaN, 1, -1});
  // A zero remainder of mod takes the divisor's sign; fmod's the dividend's.
  EXPECT_FALSE(std::signbit(eval("f64[8]", fab + "%y = mod %a, %b : f64[8]\nreturn %y").get_double(4)));
  EXPECT_TRUE(std::signbit(eval("f64[8]", fab + "%y = fmod %a, %b : f64[8]\nreturn %y").get_double(4)));
}

TEST(InterpreterOps, ShiftsWrapIntoTheResultType) {
  const std::string ab = "%a = constant {data = [1, 200, -128, -1, 5, 5, -7, 3]} : i16[8]\n"
                         "%b = constant {data = [3, 1, 1, 15, 16, -1, 1, 64]} : i16[8]\n";
  expect_ints(eval("i16[8]", ab + "%y = shl %a, %b : i16[8]\nreturn %y"), {DType::I16, {8}}, {8, 400, -256, -32768, 0, 0, -14, 0});
  expect_ints(eval("i16[8]", ab + "%y = shr %a, %b : i16[8]\nreturn %y"), {DType::I16, {8}}, {0, 100, -64, -1, 0, 0, -4, 0});
  // Unsigned values are never negative: shr shifts in zeros.
  const std::string u = "%a = constant {data = [255, 128, 1]} : u8[3]\n%b = constant {data = [1, 7, 8]} : u8[3]\n";
  expect_ints(eval("u8[3]", u + "%y = shl %a, %b : u8[3]\nreturn %y"), {DType::U8, {3}}, {254, 0, 0});
  expect_ints(eval("u8[3]", u + "%y = shr %a, %b : u8[3]\nreturn %y"), {DType::U8, {3}}, {127, 1, 0});
}

TEST(InterpreterOps, StorageTypesWrapAndRoundAfterEveryOp) {
  // u8 wraps modulo 256 after the add, before the mod sees it: (200 + 100) mod 7 = 44 mod 7.
  const std::string u = "%a = constant {data = [200, 255, 0]} : u8[3]\n%b = constant {data = [100, 1, 255]} : u8[3]\n"
                        "%c = constant {value = 7} : u8[3]\n";
  expect_ints(eval("u8[3]", u + "%s = add %a, %b : u8[3]\n%y = mod %s, %c : u8[3]\nreturn %y"), {DType::U8, {3}},
              {44 % 7, 0, 255 % 7});
  expect_ints(eval("u8[3]", u + "%y = sub %c, %a : u8[3]\nreturn %y"), {DType::U8, {3}}, {63, 8, 7});
  // i8 wraps into [-128, 127]; abs of the minimum is the minimum.
  expect_ints(eval("i8[3]", "%a = constant {data = [100, -128, 127]} : i8[3]\n%s = add %a, %a : i8[3]\n"
                            "%y = abs %s : i8[3]\nreturn %y"),
              {DType::I8, {3}}, {56, 0, 2});
  // Casts wrap between integers and saturate from floats.
  expect_ints(eval("u8[4]", "%a = constant {data = [-1, 256, 300.5, -5.5]} : f64[4]\n%y = cast %a : u8[4]\nreturn %y"),
              {DType::U8, {4}}, {0, 255, 255, 0});
  expect_ints(eval("u16[2]", "%a = constant {data = [-1, 65537]} : i32[2]\n%y = cast %a : u16[2]\nreturn %y"),
              {DType::U16, {2}}, {65535, 1});
  // u32 holds what i32 cannot; u64 keeps its bits.
  expect_ints(eval("u32[1]", "%a = constant {value = 4294967295} : u32[1]\n%b = constant {value = 1} : u32[1]\n"
                             "%y = add %a, %b : u32[1]\nreturn %y"),
              {DType::U32, {1}}, {0});
  expect_ints(eval("u64[1]", "%a = constant {value = 9223372036854775807} : u64[1]\n%b = constant {value = 2} : u64[1]\n"
                             "%y = mul %a, %b : u64[1]\nreturn %y"),
              {DType::U64, {1}}, {-2});  // 2^64 - 2, as its bits
  // u64 orders its values from 0 to 2^64 - 1: its bits 2^63 and up are not negative.
  const std::string big = "%a = constant {data = [-1, 5, -9223372036854775808]} : u64[3]\n"
                          "%b = constant {data = [7, 9223372036854775807, 3]} : u64[3]\n";
  expect_ints(eval("u64[3]", big + "%y = max %a, %b : u64[3]\nreturn %y"), {DType::U64, {3}}, {-1, INT64_MAX, INT64_MIN});
  expect_ints(eval("bool[3]", big + "%y = lt %a, %b : bool[3]\nreturn %y"), B({3}), {0, 1, 0});
  expect_ints(eval("i64[]", big + "%y = argmax %a {axes = [0]} : i64[]\nreturn %y"), I64({}), {0});
  // f16 rounds to nearest even after the op: 2048 + 1 is a tie between 2048 and 2050.
  expect_values(eval("f16[3]", "%a = constant {data = [2048, 0.1, 65504]} : f16[3]\n"
                               "%b = constant {data = [1, 0, 65504]} : f16[3]\n%y = add %a, %b : f16[3]\nreturn %y"),
                {DType::F16, {3}}, {2048, 0.0999755859375, kInf});
  expect_values(eval("bf16[2]", "%a = constant {data = [1, 3.14159]} : f32[2]\n%y = cast %a : bf16[2]\nreturn %y"),
                {DType::BF16, {2}}, {1, 3.140625});
  // Sums of narrow integers are i64; an f16 sum is f16.
  expect_ints(eval("i64[]", "%a = constant {data = [255, 255, 255]} : u8[3]\n%y = reduce_sum %a {axes = [0]} : i64[]\nreturn %y"),
              I64({}), {765});
}

TEST(InterpreterOps, StorageTypesPromoteAsNumPy) {
  expect_ints(eval("i16[1]", "%a = constant {value = 200} : u8[1]\n%b = constant {value = -1} : i8[1]\n"
                             "%y = add %a, %b : i16[1]\nreturn %y"),
              {DType::I16, {1}}, {199});
  expect_values(eval("f16[1]", "%a = constant {value = 3} : u8[1]\n%b = constant {value = 0.5} : f16[1]\n"
                               "%y = mul %a, %b : f16[1]\nreturn %y"),
                {DType::F16, {1}}, {1.5});
}

TEST(InterpreterMovement, CumsumSumsAlongTheAxisInOrder) {
  expect_ints(eval("i64[2,3]", "%x = constant {data = [1, 2, 3, 4, 5, 6]} : i32[2,3]\n"
                               "%y = cumsum %x {axis = 1} : i64[2,3]\nreturn %y"),
              I64({2, 3}), {1, 3, 6, 4, 9, 15});
  expect_ints(eval("i64[2,3]", "%x = constant {data = [1, 2, 3, 4, 5, 6]} : i32[2,3]\n"
                               "%y = cumsum %x {axis = 0} : i64[2,3]\nreturn %y"),
              I64({2, 3}), {1, 2, 3, 5, 7, 9});
  // Each sum rounds as it is made: 2^24 + 1 + 1 in f32 stays 2^24 (the order's result).
  expect_values(eval("f32[3]", "%x = constant {data = [16777216.0, 1.0, 1.0]} : f32[3]\n"
                               "%y = cumsum %x {axis = 0} : f32[3]\nreturn %y"),
                F32({3}), {16777216.0, 16777216.0, 16777216.0});
  // u64 sums wrap as its bits.
  expect_ints(eval("u64[2]", "%x = constant {data = [9223372036854775807, 3]} : u64[2]\n"
                             "%y = cumsum %x {axis = 0} : u64[2]\nreturn %y"),
              {DType::U64, {2}}, {INT64_MAX, INT64_MIN + 2});
}

TEST(InterpreterMovement, ArgsortIsStableWithNanLast) {
  const std::string x = "%x = constant {data = [3, nan, 1, 3, -0.0, 0.0, nan, -1]} : f32[2,4]\n";
  expect_ints(eval("i64[2,4]", x + "%y = argsort %x {axis = 1} : i64[2,4]\nreturn %y"), I64({2, 4}),
              {2, 0, 3, 1, 3, 0, 1, 2});
  // Descending: NaN first; equal elements (3 and 3, -0.0 and 0.0) still in their order.
  expect_ints(eval("i64[2,4]", x + "%y = argsort %x {axis = 1, descending} : i64[2,4]\nreturn %y"), I64({2, 4}),
              {1, 0, 3, 2, 2, 0, 1, 3});
  expect_ints(eval("i64[2,3]", "%x = constant {data = [5, 1, 7, 2, 1, 9]} : i32[2,3]\n"
                               "%y = argsort %x {axis = 0} : i64[2,3]\nreturn %y"),
              I64({2, 3}), {1, 0, 0, 0, 1, 1});
  // u64 in its order: 2^63 + 1 (written as its i64 bits) is the largest.
  expect_ints(eval("i64[3]", "%x = constant {data = [-9223372036854775807, 7, 0]} : u64[3]\n"
                             "%y = argsort %x {axis = 0} : i64[3]\nreturn %y"),
              I64({3}), {2, 1, 0});
}

TEST(InterpreterMovement, SliceWithNegativeStepsWalksDown) {
  const std::string base = std::string(kIota6) + "%r = reshape %x : i32[2,3]\n";
  // Both axes reversed: stop = -1 reaches index 0.
  expect_ints(eval("i32[2,3]", base + "%y = slice %r {start = [1, 2], stop = [-1, -1], step = [-1, -1]} : i32[2,3]\nreturn %y"),
              I32({2, 3}), {5, 4, 3, 2, 1, 0});
  // Every second column from the last, rows kept.
  expect_ints(eval("i32[2,2]", base + "%y = slice %r {start = [0, 2], stop = [2, -1], step = [1, -2]} : i32[2,2]\nreturn %y"),
              I32({2, 2}), {2, 0, 5, 3});
  expect_ints(eval("i32[2,0]", base + "%y = slice %r {start = [0, 1], stop = [2, 1], step = [1, -1]} : i32[2,0]\nreturn %y"),
              I32({2, 0}), {});
}

TEST(InterpreterMovement, UnfoldMakesOverlappingWindows) {
  const std::string base = std::string(kIota6) + "%r = reshape %x : i32[2,3]\n";
  // Windows of 2 along axis 1, 1 apart: [[0,1],[1,2]] per row.
  expect_ints(eval("i32[2,2,2]", base + "%y = unfold %r {axis = 1, size = 2, step = 1} : i32[2,2,2]\nreturn %y"),
              I32({2, 2, 2}), {0, 1, 1, 2, 3, 4, 4, 5});
  // Dilation 2: each window takes elements 0 and 2 of its row.
  expect_ints(eval("i32[2,1,2]", base + "%y = unfold %r {axis = 1, size = 2, step = 1, dilation = 2} : i32[2,1,2]\nreturn %y"),
              I32({2, 1, 2}), {0, 2, 3, 5});
  // Along axis 0, step 1: one window of both rows, column by column.
  expect_ints(eval("i32[1,3,2]", base + "%y = unfold %r {axis = 0, size = 2, step = 1} : i32[1,3,2]\nreturn %y"),
              I32({1, 3, 2}), {0, 3, 1, 4, 2, 5});
}

TEST(InterpreterMovement, GatherReadsAlongAnAxisAtIndices) {
  const std::string base = std::string(kIota6) + "%r = reshape %x : i32[2,3]\n";
  // Along axis 1: a negative index counts from the end; 3 and -4 are outside and read 0.
  expect_ints(eval("i32[2,3]", base +
                                   "%i = constant {data = [2, 0, -1, 3, -4, 1]} : i64[2,3]\n"
                                   "%y = gather %r, %i {axis = 1} : i32[2,3]\nreturn %y"),
              I32({2, 3}), {2, 0, 2, 0, 0, 4});
  // Along axis 0 with i32 indices shorter than the data on the other axis.
  expect_ints(eval("i32[1,2]", base +
                                   "%i = constant {data = [1, 0]} : i32[1,2]\n"
                                   "%y = gather %r, %i {axis = 0} : i32[1,2]\nreturn %y"),
              I32({1, 2}), {3, 1});
  // Floats keep their bits, an out-of-range read is +0.0; an empty axis reads only zeros.
  expect_values(eval("f32[3]",
                     "%d = constant {data = [-0.0, 2.5]} : f32[2]\n%i = constant {data = [0, 1, 2]} : i32[3]\n"
                     "%y = gather %d, %i {axis = 0} : f32[3]\nreturn %y"),
                F32({3}), {-0.0, 2.5, 0.0});
  EXPECT_TRUE(std::signbit(eval("f32[3]",
                                "%d = constant {data = [-0.0, 2.5]} : f32[2]\n%i = constant {data = [0, 1, 2]} : i32[3]\n"
                                "%y = gather %d, %i {axis = 0} : f32[3]\nreturn %y")
                               .get_double(0)));
  expect_ints(eval("i32[2]",
                   "%d = constant {value = 7} : i32[0]\n%i = constant {data = [0, -1]} : i32[2]\n"
                   "%y = gather %d, %i {axis = 0} : i32[2]\nreturn %y"),
              I32({2}), {0, 0});
}

TEST(InterpreterMovement, ScatterWritesUpdatesInOrder) {
  const std::string base = std::string(kIota6) + "%r = reshape %x : i32[2,3]\n"
                           "%i = constant {data = [2, 0, -1, 3]} : i64[2,2]\n"
                           "%u = constant {data = [10, 20, 30, 40]} : i32[2,2]\n";
  // Row 0: 10 at 2, 20 at 0; row 1: 30 at -1 (2), 40 at 3 (outside: dropped).
  expect_ints(eval("i32[2,3]", base + "%y = scatter %r, %i, %u {axis = 1} : i32[2,3]\nreturn %y"), I32({2, 3}),
              {20, 1, 10, 3, 4, 30});
  expect_ints(eval("i32[2,3]", base + "%y = scatter %r, %i, %u {axis = 1, add} : i32[2,3]\nreturn %y"), I32({2, 3}),
              {20, 1, 12, 3, 4, 35});
  // A repeated index: replace keeps the last update, the combining ones fold them all in.
  const std::string rep = "%d = constant {value = 1.0} : f32[3]\n%i = constant {data = [1, 1, 1]} : i32[3]\n"
                          "%u = constant {data = [2.0, -5.0, 3.0]} : f32[3]\n";
  expect_values(eval("f32[3]", rep + "%y = scatter %d, %i, %u {axis = 0} : f32[3]\nreturn %y"), F32({3}), {1, 3, 1});
  expect_values(eval("f32[3]", rep + "%y = scatter %d, %i, %u {axis = 0, add} : f32[3]\nreturn %y"), F32({3}), {1, 1, 1});
  expect_values(eval("f32[3]", rep + "%y = scatter %d, %i, %u {axis = 0, mul} : f32[3]\nreturn %y"), F32({3}), {1, -30, 1});
  expect_values(eval("f32[3]", rep + "%y = scatter %d, %i, %u {axis = 0, max} : f32[3]\nreturn %y"), F32({3}), {1, 3, 1});
  expect_values(eval("f32[3]", rep + "%y = scatter %d, %i, %u {axis = 0, min} : f32[3]\nreturn %y"), F32({3}), {1, -5, 1});
}

TEST(InterpreterMovement, PadWithDefaultAndGivenValue) {
  expect_values(eval("f32[4]", "%x = constant {data = [1.0, 2.0]} : f32[2]\n%y = pad %x {low = [1], high = [1]} : f32[4]\nreturn %y"),
                F32({4}), {0, 1, 2, 0});
  expect_values(eval("f32[3,3]",
                     "%x = constant {value = 1.0} : f32[1,2]\n"
                     "%y = pad %x {low = [1, 0], high = [1, 1], value = -inf} : f32[3,3]\nreturn %y"),
                F32({3, 3}), {-kInf, -kInf, -kInf, 1, 1, -kInf, -kInf, -kInf, -kInf});
}

TEST(InterpreterMovement, ConcatPromotes) {
  expect_values(eval("f64[2,3]",
                     "%a = constant {data = [1, 2]} : i32[2,1]\n"
                     "%b = constant {data = [0.5, 1.5]} : f32[2,1]\n"
                     "%c = constant {data = [7.25, 8.25]} : f64[2,1]\n"
                     "%y = concat %a, %b, %c {axis = 1} : f64[2,3]\nreturn %y"),
                F64({2, 3}), {1, 0.5, 7.25, 2, 1.5, 8.25});
  expect_ints(eval("i32[4]", "%a = arange {start = 0, step = 1} : i32[3]\n%b = constant {value = 9} : i32[1]\n"
                             "%y = concat %a, %b {axis = 0} : i32[4]\nreturn %y"),
              I32({4}), {0, 1, 2, 9});
}

// ---- matmul ----------------------------------------------------------------------------


TEST(InterpreterMatmul, PlainBatchedAndBroadcast) {
  const std::string ab =
      "%a = constant {data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]} : f32[2,3]\n"
      "%b = constant {data = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]} : f32[3,2]\n";
  expect_values(eval("f32[2,2]", ab + "%y = matmul %a, %b : f32[2,2]\nreturn %y"), F32({2, 2}), {58, 64, 139, 154});
  // Batch dims broadcast: [2,1,2,3] @ [3,3,2] -> [2,3,2,2].
  const HostTensor y = eval("f32[2,3,2,2]",
                            "%a0 = arange {start = 0.0, step = 1.0} : f32[12]\n"
                            "%a = reshape %a0 : f32[2,1,2,3]\n"
                            "%b0 = arange {start = 0.0, step = 0.5} : f32[18]\n"
                            "%b = reshape %b0 : f32[3,3,2]\n"
                            "%y = matmul %a, %b : f32[2,3,2,2]\nreturn %y");
  ASSERT_EQ(y.type(), F32({2, 3, 2, 2}));
  // Batch (1, 2): a = [[6,7,8],[9,10,11]], b = [[6,6.5],[7,7.5],[8,8.5]].
  const int64_t base = (1 * 3 + 2) * 4;
  EXPECT_EQ(y.get_double(base + 0), 6 * 6 + 7 * 7 + 8 * 8.0);
  EXPECT_EQ(y.get_double(base + 3), 9 * 6.5 + 10 * 7.5 + 11 * 8.5);
  expect_ints(eval("i64[1,1]", "%a = constant {data = [3, 4]} : i32[1,2]\n%b = constant {data = [5, 6]} : i64[2,1]\n"
                               "%y = matmul %a, %b : i64[1,1]\nreturn %y"),
              I64({1, 1}), {39});
  expect_values(eval("f32[2,2]", "%a = constant {data = []} : f32[2,0]\n%b = constant {data = []} : f32[0,2]\n"
                                 "%y = matmul %a, %b : f32[2,2]\nreturn %y"),
                F32({2, 2}), {0, 0, 0, 0});
}

// ---- conv ------------------------------------------------------------------------------

TEST(InterpreterConv, WindowsPaddingStridesDilationsAndGroups) {
  // 1-D, padded by one at each end: y[i] = x[i - 1] - x[i + 1], zeros outside x.
  expect_values(eval("f32[1,1,5]",
                     "%x = constant {data = [1.0, 2.0, 3.0, 4.0, 5.0]} : f32[1,1,5]\n"
                     "%w = constant {data = [1.0, 0.0, -1.0]} : f32[1,1,3]\n"
                     "%y = conv %x, %w {strides = [1], low = [1], high = [1]} : f32[1,1,5]\nreturn %y"),
                F32({1, 1, 5}), {-2, -2, -2, -2, 4});
  // Two groups of one channel, windows of two elements two apart.
  expect_values(eval("f32[1,2,2]",
                     "%x = constant {data = [1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0]} : f32[1,2,4]\n"
                     "%w = constant {data = [1.0, 1.0, 1.0, -1.0]} : f32[2,1,2]\n"
                     "%y = conv %x, %w {strides = [1], dilations = [2], low = [0], high = [0], groups = 2} : f32[1,2,2]"
                     "\nreturn %y"),
                F32({1, 2, 2}), {4, 6, -20, -20});
  // 2-D, 2 x 2 windows 2 apart over 0..15, two filters; the high padding adds no window.
  expect_values(eval("f32[1,2,2,2]",
                     "%x0 = arange {start = 0.0, step = 1.0} : f32[16]\n%x = reshape %x0 : f32[1,1,4,4]\n"
                     "%w = constant {data = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 2.0]} : f32[2,1,2,2]\n"
                     "%y = conv %x, %w {strides = [2, 2], low = [0, 0], high = [1, 1]} : f32[1,2,2,2]\nreturn %y"),
                F32({1, 2, 2, 2}), {10, 18, 42, 50, 10, 14, 26, 30});
  // Integers wrap as matmul's do.
  expect_ints(eval("i32[1,1,1]",
                   "%x = constant {data = [2147483647]} : i32[1,1,1]\n%w = constant {data = [2]} : i32[1,1,1]\n"
                   "%y = conv %x, %w {strides = [1], low = [0], high = [0]} : i32[1,1,1]\nreturn %y"),
              I32({1, 1, 1}), {-2});
}

TEST(InterpreterConv, ShapesThatDoNotFitAreRefusedNamingThem) {
  const Expected<Graph> g = parse_graph(
      "graph @g(%x: f32[1,4,5,5], %w: f32[6,3,3,3]) -> f32[1,6,5,5] {\n"
      "  %y = conv %x, %w {strides = [1, 1], low = [1, 1], high = [1, 1], groups = 2} : f32[1,6,5,5]\n"
      "  return %y\n}\n");
  ASSERT_FALSE(g);
  EXPECT_THAT(g.error().str(), testing::HasSubstr("4 channels and 6 filters of 3 channels do not make 2 groups"));
}

// ---- attention -------------------------------------------------------------------------

TEST(InterpreterAttention, SoftmaxOfScaledScoresPlusBiasTimesV) {
  // Row 0's scores are [0, 0]: weights [1/2, 1/2]; row 1's are [0, ln 3]: [1/4, 3/4].
  const std::string qkv =
      "%q = constant {data = [0.0, 0.5]} : f32[2,1]\n"
      "%k = constant {data = [0.0, 1.0986123]} : f32[2,1]\n"
      "%v = constant {data = [4.0, 8.0, 0.0, 4.0]} : f32[2,2]\n";
  expect_values(eval("f32[2,2]", qkv + "%y = attention %q, %k, %v {scale = 2.0} : f32[2,2]\nreturn %y"),
                F32({2, 2}), {2, 6, 1, 5}, 1e-6);
  // A bias masking row 0 entirely and row 1's first key: row 0 is undefined (NaN, or zeros
  // with masked_zero), row 1 is v's second row.
  const std::string bias = "%b = constant {data = [-inf, -inf, -inf, 0.0]} : f32[2,2]\n";
  expect_values(eval("f32[2,2]", qkv + bias + "%y = attention %q, %k, %v, %b {scale = 2.0} : f32[2,2]\nreturn %y"),
                F32({2, 2}), {kNaN, kNaN, 0, 4});
  expect_values(
      eval("f32[2,2]", qkv + bias + "%y = attention %q, %k, %v, %b {scale = 2.0, masked_zero} : f32[2,2]\nreturn %y"),
      F32({2, 2}), {0, 0, 0, 4});
}

TEST(InterpreterAttention, OperandsThatDoNotFitAreRefusedNamingThem) {
  const Expected<Graph> depth = parse_graph(
      "graph @g(%q: f32[2,3,8], %k: f32[2,5,4], %v: f32[2,5,6]) -> f32[2,3,6] {\n"
      "  %y = attention %q, %k, %v {scale = 1.0} : f32[2,3,6]\n  return %y\n}\n");
  ASSERT_FALSE(depth);
  EXPECT_THAT(depth.error().str(), testing::HasSubstr("'attention' q f32[2,3,8] and k f32[2,5,4] differ in depth"));
  const Expected<Graph> type = parse_graph(
      "graph @g(%q: f64[3,4], %k: f64[5,4], %v: f64[5,6]) -> f64[3,6] {\n"
      "  %y = attention %q, %k, %v {scale = 1.0} : f64[3,6]\n  return %y\n}\n");
  ASSERT_FALSE(type);
  EXPECT_THAT(type.error().str(), testing::HasSubstr("'attention' needs f32 operands"));
  const Expected<Graph> bias = parse_graph(
      "graph @g(%q: f32[3,4], %k: f32[5,4], %v: f32[5,6], %b: f32[2,3,5]) -> f32[3,6] {\n"
      "  %y = attention %q, %k, %v, %b {scale = 1.0} : f32[3,6]\n  return %y\n}\n");
  ASSERT_FALSE(bias);
  EXPECT_THAT(bias.error().str(), testing::HasSubstr("bias f32[2,3,5] does not broadcast to the scores f32[3,5]"));
}

TEST(InterpreterOps, EveryOpIsCovered) {
  const std::set<std::string> ran = test::ops_exercised_by("Interpreter*:-InterpreterOps.EveryOpIsCovered");
  for (const OpInfo& info : all_ops())
    EXPECT_TRUE(ran.count(std::string(info.name))) << "op '" << info.name << "' has no interpreter test";
}

TEST(InterpreterOps, IntermediatesAreFreedButOutputsSurvive) {
  // A value used twice and also returned must still be intact at the end.
  const auto out = run(
      "graph @g(%x: f32[3]) -> (f32[3], f32[3]) {\n"
      "  %a = exp %x : f32[3]\n  %b = add %a, %a : f32[3]\n  %c = mul %b, %a : f32[3]\n  return %a, %c\n}",
      {HostTensor::from_vector<float>({0, 1, 2}, {3})});
  ASSERT_EQ(out.size(), 2u);
  for (int k = 0; k < 3; ++k) {
    const float a = static_cast<float>(std::exp(static_cast<double>(k)));
    EXPECT_EQ(out[0].get_double(k), a);
    EXPECT_FLOAT_EQ(static_cast<float>(out[1].get_double(k)), 2 * a * a);
  }
}

}  // namespace
}  // namespace kiln
