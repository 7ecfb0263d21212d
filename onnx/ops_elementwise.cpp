// onnx/ops_elementwise.cpp - ONNX's elementwise ops (math, activations, logic, casts).
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

// An activation's coefficient: ONNX writes them as float attributes, which act in the
// input's own dtype.
Tensor coef(NodeContext& c, std::string_view name, double fallback, const Tensor& like) {
  return c.scalar_like(c.attr_float(name, fallback), like);
}

void require_float(NodeContext& c, const Tensor& x) {
  if (!is_float(x.dtype()))
    c.unsupported(fmt::format("{} of {} is not supported (kiln computes it on float and double)",
                              c.node().op_type(), dtype_name(x.dtype())));
}

// log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow where exp(x) is infinite
// (softplus(100) is 100, not inf), as ONNX Runtime computes it.
Tensor softplus(NodeContext& c, const Tensor& x) {
  return x.maximum(c.scalar_like(0, x)) + ((c.scalar_like(0, x) - x.abs()).exp() + c.scalar_like(1, x)).log();
}

#define UNARY(Name, expr)                                  \
  std::vector<Tensor> Name(NodeContext& c) {               \
    Tensor x = c.input(0);                                 \
    return {expr};                                         \
  }
#define FLOAT_UNARY(Name, expr)                            \
  std::vector<Tensor> Name(NodeContext& c) {               \
    Tensor x = c.input(0);                                 \
    require_float(c, x);                                   \
    return {expr};                                         \
  }

UNARY(Abs, x.abs())
UNARY(Neg, x.neg())
UNARY(Identity, x)
UNARY(Not, x.logical_not())
FLOAT_UNARY(Exp, x.exp())
FLOAT_UNARY(Log, x.log())
FLOAT_UNARY(Sqrt, x.sqrt())
FLOAT_UNARY(Sin, x.sin())
FLOAT_UNARY(Cos, x.cos())
FLOAT_UNARY(Tan, x.sin() / x.cos())
FLOAT_UNARY(Asin, x.asin())
FLOAT_UNARY(Acos, x.acos())
FLOAT_UNARY(Atan, x.atan())
FLOAT_UNARY(Tanh, x.tanh())
FLOAT_UNARY(Sigmoid, x.sigmoid())
FLOAT_UNARY(Erf, x.erf())
FLOAT_UNARY(Floor, x.floor())
FLOAT_UNARY(Ceil, x.ceil())
FLOAT_UNARY(Reciprocal, c.scalar_like(1, x) / x)
FLOAT_UNARY(Sinh, (x.exp() - x.neg().exp()) * c.scalar_like(0.5, x))
FLOAT_UNARY(Cosh, (x.exp() + x.neg().exp()) * c.scalar_like(0.5, x))
FLOAT_UNARY(Asinh, (x + (x * x + c.scalar_like(1, x)).sqrt()).log())
FLOAT_UNARY(Acosh, (x + (x * x - c.scalar_like(1, x)).sqrt()).log())
FLOAT_UNARY(Atanh, ((c.scalar_like(1, x) + x) / (c.scalar_like(1, x) - x)).log() * c.scalar_like(0.5, x))
FLOAT_UNARY(Softsign, x / (c.scalar_like(1, x) + x.abs()))
FLOAT_UNARY(IsNaN, x.isnan())
FLOAT_UNARY(Round, x.round())

std::vector<Tensor> Relu(NodeContext& c) { return {c.input(0).relu()}; }

std::vector<Tensor> Sign(NodeContext& c) { return {c.input(0).sign()}; }

std::vector<Tensor> IsInf(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  const bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  if (pos && neg) return {x.isinf()};
  Tensor p = x.eq(c.scalar_like(inf, x)), n = x.eq(c.scalar_like(-inf, x));
  if (pos) return {p};
  if (neg) return {n};
  return {kiln::zeros(x.shape(), DType::Bool, c.device())};
}

// ---- activations with coefficients ---------------------------------------------------------

std::vector<Tensor> LeakyRelu(NodeContext& c) {
  Tensor x = c.input(0);
  return {where(x.lt(c.scalar_like(0, x)), x * coef(c, "alpha", 0.01, x), x)};
}
std::vector<Tensor> Elu(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  return {where(x.lt(c.scalar_like(0, x)), coef(c, "alpha", 1.0, x) * (x.exp() - c.scalar_like(1, x)), x)};
}
std::vector<Tensor> Celu(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  Tensor a = coef(c, "alpha", 1.0, x), zero = c.scalar_like(0, x);
  return {x.maximum(zero) + zero.minimum(a * ((x / a).exp() - c.scalar_like(1, x)))};
}
std::vector<Tensor> Selu(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  Tensor a = coef(c, "alpha", 1.67326319217681884765625, x), g = coef(c, "gamma", 1.05070102214813232421875, x);
  return {g * where(x.le(c.scalar_like(0, x)), a * x.exp() - a, x)};
}
std::vector<Tensor> ThresholdedRelu(NodeContext& c) {
  Tensor x = c.input(0);
  return {where(x.gt(coef(c, "alpha", 1.0, x)), x, c.scalar_like(0, x))};
}
std::vector<Tensor> HardSigmoid(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  Tensor y = coef(c, "alpha", 0.2, x) * x + coef(c, "beta", 0.5, x);
  return {y.maximum(c.scalar_like(0, x)).minimum(c.scalar_like(1, x))};
}
// Gelu-20: 0.5 x (1 + erf(x / sqrt 2)), or its tanh approximation; the frontend's own
// decompositions of both.
std::vector<Tensor> Gelu(NodeContext& c) {
  const std::string a = c.attr_string("approximate", "none");
  if (a != "none" && a != "tanh") c.invalid(fmt::format("approximate '{}' is none of none, tanh", a));
  return {rounded_once(c.input(0), [&](const Tensor& x) {
    return x.gelu(a == "tanh" ? GeluApproximation::Tanh : GeluApproximation::Erf);
  })};
}

// Mish-18: x tanh(softplus(x)), softplus as Softplus computes it.
std::vector<Tensor> Mish(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  return {rounded_once(x, [&](const Tensor& t) { return t * softplus(c, t).tanh(); })};
}

std::vector<Tensor> HardSwish(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  Tensor y = x * c.scalar_like(1.0 / 6, x) + c.scalar_like(0.5, x);
  return {x * y.maximum(c.scalar_like(0, x)).minimum(c.scalar_like(1, x))};
}
std::vector<Tensor> Softplus(NodeContext& c) {
  Tensor x = c.input(0);
  require_float(c, x);
  return {rounded_once(x, [&](const Tensor& t) { return softplus(c, t); })};
}
std::vector<Tensor> Shrink(NodeContext& c) {
  Tensor x = c.input(0);
  Tensor l = coef(c, "lambd", 0.5, x), b = coef(c, "bias", 0.0, x);
  return {where(x.lt(l.neg()), x + b, where(x.gt(l), x - b, c.scalar_like(0, x)))};
}
std::vector<Tensor> PRelu(NodeContext& c) {
  Tensor x = c.input(0), slope = c.input(1);
  // Before opset 7 a [C] slope is per channel: axis 1, not the last.
  if (c.version() < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.size(0) == x.size(1) && slope.size(0) != 1)
    slope = along_axis(slope, 1, x.rank());
  return {where(x.lt(c.scalar_like(0, x)), x * slope, x)};
}

// Clip: bounds are attributes before opset 11 and optional inputs from 11 on.
std::vector<Tensor> Clip(NodeContext& c) {
  Tensor x = c.input(0);
  if (c.version() < 11) {
    const double lo = c.attr_float("min", -std::numeric_limits<double>::infinity());
    const double hi = c.attr_float("max", std::numeric_limits<double>::infinity());
    return {x.maximum(c.scalar_like(lo, x)).minimum(c.scalar_like(hi, x))};
  }
  if (c.has_input(1)) x = x.maximum(c.input(1));
  if (c.has_input(2)) x = x.minimum(c.input(2));
  return {x};
}

// ---- binary ----------------------------------------------------------------------------------

void same_dtype(NodeContext& c, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    c.invalid(fmt::format("its operands are {} and {}; ONNX requires one type", dtype_name(a.dtype()),
                          dtype_name(b.dtype())));
}

// Before opset 7 a binary op broadcast only when its `broadcast` attribute said so, and then
// B's dims lined up with A's from `axis` on (from the end when no axis is given).
Tensor second_operand(NodeContext& c, const Tensor& a) {
  Tensor b = c.input(1);
  if (c.version() >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return b;
  const int64_t axis = normalize_axis(c, c.attr_int("axis"), a.rank(), "axis");
  if (axis + b.rank() > a.rank()) c.invalid(fmt::format("B {} does not fit A {} from axis {}", b.shape().str(), a.shape().str(), axis));
  std::vector<int64_t> dims(static_cast<size_t>(a.rank()), 1);
  for (int64_t d = 0; d < b.rank(); ++d) dims[static_cast<size_t>(axis + d)] = b.size(d);
  return b.reshape(dims);
}

#define BINARY(Name, expr)                                  \
  std::vector<Tensor> Name(NodeContext& c) {                \
    Tensor a = c.input(0), b = second_operand(c, a);        \
    same_dtype(c, a, b);                                    \
    return {expr};                                          \
  }
BINARY(Add, a + b)
BINARY(Sub, a - b)
BINARY(Mul, a * b)
BINARY(Equal, a.eq(b))
BINARY(Less, a.lt(b))
BINARY(LessOrEqual, a.le(b))
BINARY(Greater, a.gt(b))
BINARY(GreaterOrEqual, a.ge(b))
BINARY(And, a.logical_and(b))
BINARY(Or, a.logical_or(b))
BINARY(Xor, a.ne(b))

// Integer division truncates toward zero (through double: exact for |values| < 2^53).
std::vector<Tensor> Div(NodeContext& c) {
  Tensor a = c.input(0), b = second_operand(c, a);
  same_dtype(c, a, b);
  Tensor q = a / b;
  return {q.dtype() == a.dtype() ? q : q.to(a.dtype())};
}

// The result has the base's type; the exponent may be of another numeric type. A float
// base takes the exponent in its own type (as ONNX Runtime computes it), rather than kiln's
// promotion of f32 with an integer to f64.
std::vector<Tensor> Pow(NodeContext& c) {
  Tensor a = c.input(0), b = second_operand(c, a);
  if (is_float(a.dtype()) && b.dtype() != a.dtype()) b = b.to(a.dtype());
  Tensor p = a.pow(b);
  return {p.dtype() == a.dtype() ? p : p.to(a.dtype())};
}

// Max, Min, Sum, Mean: any number of operands, broadcast together.
template <int Kind>
std::vector<Tensor> variadic(NodeContext& c) {
  Tensor acc = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    Tensor b = c.input(i);
    same_dtype(c, acc, b);
    acc = Kind == 0 ? acc.maximum(b) : Kind == 1 ? acc.minimum(b) : acc + b;
  }
  if (Kind == 3) {
    require_float(c, acc);
    acc = acc / c.scalar_like(static_cast<double>(c.num_inputs()), acc);
  }
  return {acc};
}

// fmod = 0: the remainder takes the divisor's sign (Python's %), integers only;
// fmod = 1: the dividend's (C's fmod).
std::vector<Tensor> Mod(NodeContext& c) {
  Tensor a = c.input(0), b = c.input(1);
  same_dtype(c, a, b);
  const bool fmod = c.attr_int("fmod", 0) != 0;
  if (is_float(a.dtype()) && !fmod) c.invalid("fmod must be 1 for floating-point operands");
  return {fmod ? a.fmod(b) : a.remainder(b)};
}

std::vector<Tensor> BitShift(NodeContext& c) {
  Tensor a = c.input(0), b = c.input(1);
  same_dtype(c, a, b);
  if (!is_unsigned(a.dtype()))
    c.invalid(fmt::format("BitShift takes unsigned integers, got {}", dtype_name(a.dtype())));
  const std::string direction = c.attr_string("direction", "");
  if (direction == "LEFT") return {a.shift_left(b)};
  if (direction == "RIGHT") return {a.shift_right(b)};
  c.invalid(fmt::format("direction must be LEFT or RIGHT, got '{}'", direction));
}

std::vector<Tensor> Where(NodeContext& c) {
  Tensor a = c.input(1), b = c.input(2);
  same_dtype(c, a, b);
  return {where(c.input(0), a, b)};
}

std::vector<Tensor> Cast(NodeContext& c) {
  const DType to = dtype_from_onnx(static_cast<int>(c.attr_int("to")), "the target of Cast");
  Tensor x = c.input(0);
  return {x.dtype() == to ? x : x.to(to)};
}
std::vector<Tensor> CastLike(NodeContext& c) {
  Tensor x = c.input(0);
  const DType to = c.dtype(1);
  return {x.dtype() == to ? x : x.to(to)};
}

// Inference: the identity, with an all-true mask when asked for.
std::vector<Tensor> Dropout(NodeContext& c) {
  if (c.version() >= 12 && c.has_input(2) && c.value(2, "training_mode").get_int(0) != 0) {
    // Training drops elements at random, except at ratio 0, where it is the identity.
    const double ratio = c.has_input(1) ? c.value(1, "ratio").get_double(0) : 0.5;
    if (ratio != 0) c.unsupported("Dropout in training mode is not supported (it is random)");
  }
  Tensor x = c.input(0);
  Tensor mask = kiln::ones(x.shape(), DType::Bool, c.device());
  return {x, mask};
}

constexpr std::string_view kActivation[] = {"alpha"};
constexpr std::string_view kAlphaBeta[] = {"alpha", "beta"};
constexpr std::string_view kAlphaGamma[] = {"alpha", "gamma"};
constexpr std::string_view kShrink[] = {"lambd", "bias"};
constexpr std::string_view kClip[] = {"min", "max"};
constexpr std::string_view kIsInf[] = {"detect_positive", "detect_negative"};
// Cast-19's saturate applies to float8 results only, which kiln refuses by their type.
constexpr std::string_view kCast[] = {"to", "saturate"};
constexpr std::string_view kSaturate[] = {"saturate"};
constexpr std::string_view kGelu[] = {"approximate"};
constexpr std::string_view kMod[] = {"fmod"};
constexpr std::string_view kBitShift[] = {"direction"};
constexpr std::string_view kLegacyBroadcast[] = {"broadcast", "axis", "consumed_inputs"};
constexpr std::string_view kConsumed[] = {"consumed_inputs"};
constexpr std::string_view kDropout[] = {"seed", "ratio", "is_test"};

}  // namespace

const ConverterRow kElementwiseRows[] = {
    {"Abs", 6, 13, Abs, {}},
    {"Neg", 6, 13, Neg, {}},
    {"Identity", 1, 25, Identity, {}},
    {"Not", 1, 1, Not, {}},
    {"Exp", 6, 13, Exp, {}},
    {"Log", 6, 13, Log, {}},
    {"Sqrt", 6, 13, Sqrt, {}},
    {"Sin", 7, 22, Sin, {}},
    {"Cos", 7, 22, Cos, {}},
    {"Tan", 7, 22, Tan, {}},
    {"Asin", 7, 22, Asin, {}},
    {"Acos", 7, 22, Acos, {}},
    {"Atan", 7, 22, Atan, {}},
    {"Tanh", 6, 13, Tanh, {}},
    {"Sigmoid", 6, 13, Sigmoid, {}},
    {"Erf", 9, 13, Erf, {}},
    {"Floor", 6, 13, Floor, {}},
    {"Ceil", 6, 13, Ceil, {}},
    {"Reciprocal", 6, 13, Reciprocal, {}},
    {"Sinh", 9, 22, Sinh, {}},
    {"Cosh", 9, 22, Cosh, {}},
    {"Asinh", 9, 22, Asinh, {}},
    {"Acosh", 9, 22, Acosh, {}},
    {"Atanh", 9, 22, Atanh, {}},
    {"Softsign", 1, 22, Softsign, {}},
    {"IsNaN", 9, 20, IsNaN, {}},
    {"IsInf", 10, 20, IsInf, kIsInf},
    {"Relu", 6, 14, Relu, {}},
    {"Sign", 9, 13, Sign, {}},
    {"Round", 11, 22, Round, {}},
    {"LeakyRelu", 6, 16, LeakyRelu, kActivation},
    {"Elu", 6, 22, Elu, kActivation},
    {"Celu", 12, 12, Celu, kActivation},
    {"Selu", 6, 22, Selu, kAlphaGamma},
    {"ThresholdedRelu", 10, 22, ThresholdedRelu, kActivation},
    {"HardSigmoid", 6, 22, HardSigmoid, kAlphaBeta},
    {"HardSwish", 14, 22, HardSwish, {}},
    {"Gelu", 20, 20, Gelu, kGelu},
    {"Mish", 18, 22, Mish, {}},
    {"Softplus", 1, 22, Softplus, {}},
    {"Shrink", 9, 9, Shrink, kShrink},
    {"PRelu", 1, 16, PRelu, kConsumed},
    {"Clip", 6, 13, Clip, kClip},
    {"Add", 1, 14, Add, kLegacyBroadcast},
    {"Sub", 1, 14, Sub, kLegacyBroadcast},
    {"Mul", 1, 14, Mul, kLegacyBroadcast},
    {"Div", 1, 14, Div, kLegacyBroadcast},
    {"Pow", 1, 15, Pow, kLegacyBroadcast},
    {"Equal", 1, 19, Equal, kLegacyBroadcast},
    {"Less", 1, 13, Less, kLegacyBroadcast},
    {"LessOrEqual", 12, 16, LessOrEqual, {}},
    {"Greater", 1, 13, Greater, kLegacyBroadcast},
    {"GreaterOrEqual", 12, 16, GreaterOrEqual, {}},
    {"And", 1, 7, And, kLegacyBroadcast},
    {"Or", 1, 7, Or, kLegacyBroadcast},
    {"Xor", 1, 7, Xor, kLegacyBroadcast},
    {"Max", 1, 13, variadic<0>, kConsumed},
    {"Min", 1, 13, variadic<1>, kConsumed},
    {"Sum", 1, 13, variadic<2>, kConsumed},
    {"Mean", 1, 13, variadic<3>, kConsumed},
    {"Mod", 10, 28, Mod, kMod},
    {"BitShift", 11, 28, BitShift, kBitShift},
    {"Where", 9, 16, Where, {}},
    {"Cast", 6, 23, Cast, kCast},
    {"CastLike", 15, 23, CastLike, kSaturate},
    {"Dropout", 7, 22, Dropout, kDropout},
};
const std::span<const ConverterRow> elementwise_rows = kElementwiseRows;

}  // namespace kiln::onnx::detail
