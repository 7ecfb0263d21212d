// ir/scalar_semantics.cpp - the scalar meaning of every elementwise op.
#include "kiln/ir/scalar_semantics.h"

#include <cmath>
#include <limits>

namespace kiln::scalar {

namespace {

// IEEE binary16 (mantissa 10 bits, bias 15) and bfloat16 (mantissa 7 bits, bias 127): both
// 16 bits with the sign on top, so one encoder serves both. Rounds once, from double, to
// nearest even, as NumPy's float16 conversion does.
uint16_t encode_small_float(double v, int mant, int bias) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const auto inf = static_cast<uint16_t>(((1 << (15 - mant)) - 1) << mant);
  if (std::isnan(v)) return static_cast<uint16_t>(sign | inf | (1 << (mant - 1)));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  const int emin = 1 - bias;
  if (a < std::ldexp(1.0, emin))  // subnormal: a multiple of 2^(emin - mant); 2^mant is the least normal
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, mant - emin))));
  int e = 0;
  std::frexp(a, &e);
  int exponent = e - 1;
  double q = std::nearbyint(std::ldexp(a, mant - exponent));  // in [2^mant, 2^(mant+1)]
  if (q == std::ldexp(1.0, mant + 1)) {
    q /= 2;
    ++exponent;
  }
  if (exponent > bias) return sign | inf;
  return static_cast<uint16_t>(sign | ((exponent + bias) << mant) | (static_cast<int>(q) - (1 << mant)));
}

double decode_small_float(uint16_t b, int mant, int bias) {
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  const int emask = (1 << (15 - mant)) - 1;
  const int e = (b >> mant) & emask, f = b & ((1 << mant) - 1);
  if (e == emask) return f ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(f, 1 - bias - mant);
  return sign * std::ldexp(f + (1 << mant), e - bias - mant);
}

}  // namespace

uint16_t f16_bits(double v) { return encode_small_float(v, 10, 15); }
double f16_value(uint16_t bits) { return decode_small_float(bits, 10, 15); }
uint16_t bf16_bits(double v) { return encode_small_float(v, 7, 127); }
double bf16_value(uint16_t bits) { return decode_small_float(bits, 7, 127); }

double store_float(DType t, double v) {
  switch (t) {
    case DType::F32: return static_cast<double>(static_cast<float>(v));
    case DType::F16: return f16_value(f16_bits(v));
    case DType::BF16: return bf16_value(bf16_bits(v));
    default: return v;
  }
}

int64_t store_int(DType t, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::I8: return static_cast<int8_t>(static_cast<uint8_t>(u));
    case DType::I16: return static_cast<int16_t>(static_cast<uint16_t>(u));
    case DType::I32: return static_cast<int32_t>(static_cast<uint32_t>(u));
    case DType::U8: return static_cast<uint8_t>(u);
    case DType::U16: return static_cast<uint16_t>(u);
    case DType::U32: return static_cast<uint32_t>(u);
    default: return v;  // i64, and u64's bits
  }
}

int64_t float_to_int(DType t, double v) {
  if (t == DType::Bool) return v != 0;  // NaN != 0 is true, as in C and NumPy
  if (std::isnan(v)) return 0;
  if (t == DType::U64) {
    if (v <= 0) return 0;
    if (v >= 18446744073709551616.0) return -1;  // all bits set: the u64 maximum
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  const auto lo = static_cast<double>(int_min(t)), hi = static_cast<double>(int_max(t));
  if (v <= lo) return int_min(t);
  if (v >= hi) return int_max(t);  // for i64, 2^63 and above: hi is 2^63 as a double
  return static_cast<int64_t>(v);  // truncates toward zero
}

int64_t binary_u64(OpKind op, int64_t a, int64_t b) {
  const auto x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
  switch (op) {
    case OpKind::Mod:
    case OpKind::Fmod: return y == 0 ? 0 : static_cast<int64_t>(x % y);  // by 0: 0, as every integer
    case OpKind::Shr: return y >= 64 ? 0 : static_cast<int64_t>(x >> y);
    default: KILN_ASSERT(false, "binary_u64: an op whose u64 result is int64's");
  }
}

double int_to_float(DType from, int64_t v) {
  return from == DType::U64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
}

double unary_float(OpKind op, double x) {
  switch (op) {
    case OpKind::Neg: return -x;
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Exp: return std::exp(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Asin: return std::asin(x);
    case OpKind::Acos: return std::acos(x);
    case OpKind::Atan: return std::atan(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::Relu: return x < 0 ? 0.0 : x;  // NaN and -0.0 pass through
    case OpKind::Erf: return std::erf(x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);  // the default rounding: ties to even
    case OpKind::Sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    default: break;
  }
  KILN_ASSERT(false, "unary_float called with a non-unary or non-float op");
}

int64_t unary_int(OpKind op, int64_t x) {
  const auto u = static_cast<uint64_t>(x);
  switch (op) {
    case OpKind::Neg: return static_cast<int64_t>(0 - u);  // wraps at the minimum
    case OpKind::Abs: return x < 0 ? static_cast<int64_t>(0 - u) : x;
    case OpKind::Relu: return x < 0 ? 0 : x;
    case OpKind::Not: return x == 0;
    case OpKind::Sign: return (x > 0) - (x < 0);
    default: break;
  }
  KILN_ASSERT(false, "unary_int called with an op that has no integer meaning");
}

bool predicate_float(OpKind op, double x) {
  switch (op) {
    case OpKind::IsNan: return std::isnan(x);
    case OpKind::IsInf: return std::isinf(x);
    default: break;
  }
  KILN_ASSERT(false, "predicate_float called with an op that is no predicate");
}

double binary_float(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return a / b;
    // Squares and cubes are products (of doubles), so that pow(x, 2) and pow(x, 3) are the
    // multiplications the simplifier makes of them, on every backend that computes in double.
    case OpKind::Pow: return b == 2 ? a * a : b == 3 ? a * a * a : std::pow(a, b);
    case OpKind::Atan2: return std::atan2(a, b);
    case OpKind::Fmod: return std::fmod(a, b);
    case OpKind::Mod: {
      const double r = std::fmod(a, b);
      if (r == 0) return std::copysign(0.0, b);
      return (b < 0) != (r < 0) ? r + b : r;
    }
    // IEEE 754-2019 maximum/minimum: NaN wins, and +0.0 > -0.0, so both are commutative
    // bit for bit (LLVM's llvm.maximum/llvm.minimum).
    case OpKind::Max:
      if (std::isnan(a) || std::isnan(b)) return NAN;
      if (a == b) return std::signbit(a) ? b : a;
      return a > b ? a : b;
    case OpKind::Min:
      if (std::isnan(a) || std::isnan(b)) return NAN;
      if (a == b) return std::signbit(a) ? a : b;
      return a < b ? a : b;
    default: break;
  }
  KILN_ASSERT(false, "binary_float called with a non-arithmetic op");
}

static int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

int64_t binary_int(OpKind op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case OpKind::Add: return static_cast<int64_t>(ua + ub);
    case OpKind::Sub: return static_cast<int64_t>(ua - ub);
    case OpKind::Mul: return static_cast<int64_t>(ua * ub);
    case OpKind::Pow: return int_pow(a, b);
    case OpKind::Fmod:
    case OpKind::Mod: {
      if (b == 0 || b == -1) return 0;  // -1: the minimum's quotient would overflow
      const int64_t r = a % b;
      return op == OpKind::Mod && r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case OpKind::Max: return a > b ? a : b;
    case OpKind::Min: return a < b ? a : b;
    // A count outside [0, 64) shifts every bit out; the result's type then wraps what is left.
    case OpKind::Shl: return b < 0 || b >= 64 ? 0 : static_cast<int64_t>(ua << b);
    case OpKind::Shr: return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b;
    case OpKind::And: return (a != 0) && (b != 0);
    case OpKind::Or: return (a != 0) || (b != 0);
    default: break;
  }
  KILN_ASSERT(false, "binary_int called with an op that has no integer meaning");
}

template <class T>
static bool compare(OpKind op, T a, T b) {
  switch (op) {
    case OpKind::Eq: return a == b;
    case OpKind::Ne: return a != b;
    case OpKind::Lt: return a < b;
    case OpKind::Le: return a <= b;
    case OpKind::Gt: return a > b;
    case OpKind::Ge: return a >= b;
    default: break;
  }
  KILN_ASSERT(false, "compare called with a non-comparison op");
}

bool compare_float(OpKind op, double a, double b) { return compare(op, a, b); }
bool compare_int(OpKind op, int64_t a, int64_t b) { return compare(op, a, b); }

// "lowbias32" by Chris Wellons: a well-mixed 32-bit permutation.
static uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

uint32_t rand_key(int64_t seed) {
  const auto s = static_cast<uint64_t>(seed);
  return hash32(static_cast<uint32_t>(s) ^ hash32(static_cast<uint32_t>(s >> 32) ^ 0x9e3779b9U));
}

double rand_uniform(int64_t seed, uint64_t index) {
  const uint32_t key = rand_key(seed);
  const uint32_t r = hash32(static_cast<uint32_t>(index) ^ hash32(static_cast<uint32_t>(index >> 32) ^ key));
  // (2m + 1) / 2^24 with m < 2^23: odd numerators below 2^24 are exact in f32.
  return static_cast<double>(2 * (r >> 9) + 1) * (1.0 / 16777216.0);
}

}  // namespace kiln::scalar
