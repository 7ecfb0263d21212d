// codegen/glsl_dialect.cpp - the GLSL dialect of the C-family emitter: Vulkan compute shaders
// (GLSL 4.50, compiled to SPIR-V by shaderc).
//
// What differs from OpenCL C, and why:
// - One entry point per module (`main`): a program holds one kernel. Buffers are std430
//   storage blocks at bindings 0, 1... (Kernel::buffers order); scalars are push constants
//   (bool as a 32-bit uint there: 8-bit push constants are an optional feature), followed
//   by `kiln_zero`, a word the launch sets to 0 (zero_value says why); the
//   work-group size is specialization constant 0, so a pipeline sets it without recompiling.
// - `const` means compile-time in GLSL: variables assigned once are `precise` instead, which
//   also keeps the driver from contracting a * b + c into an fma (the interpreter rounds both
//   operations, as OpenCL's FP_CONTRACT OFF asks for).
// - Casts are constructors; int <-> uint constructors keep the bits (the emitter's bitcasts).
//   A bool converts to uint8_t through int: glslang turns uint8_t(bool) into an invalid
//   OpUConvert (SPIRV-Tools rejects it).
// - Float to integer is undefined out of range in GLSL: the saturation and NaN rule of the
//   cast op are spelled out.
// - i32 widens to i64 through packInt2x32, around a lavapipe folding fault (widen_i32).
// - Literals: floats in their shortest round-trip decimal form (`1.5`, `1.5lf`), NaN and the
//   infinities by their bits; 64-bit integers with `l`.
// - GLSL has no double-precision exp, log, tanh, sin, cos or pow, and no erf at all: erf on
//   f32 is a helper (kiln_erf, the cpu backend's rational approximation); the others on f64
//   are an error naming the function, and f32 versions are never computed through double.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "c_dialect.h"
#include "kiln/codegen/c_source.h"
#include "kiln/support/error.h"

namespace kiln::kir {
namespace {

bool is_double_only_in_opencl(std::string_view fn) {
  return fn == "exp" || fn == "log" || fn == "tanh" || fn == "sin" || fn == "cos" || fn == "pow" || fn == "erf" ||
         fn == "asin" || fn == "acos" || fn == "atan" || fn == "atan2";
}

// ---- f32 math of kiln's own (GlslDialect::math) ----
// log, tanh and erf: internal/kiln/codegen/f32_math.h's, as the cpu backend computes them
// (c_f32_math_helper), so the devices agree. Helpers have no loops: lavapipe counts a
// helper's loop iterations against the shader's budget of 65535
// (Capabilities::max_loop_iterations), which c_loop_iterations counts for the kernel's own
// loops and fmod's only. A 12-step loop in exp, run twice per element of W3's 4096-wide rows,
// ended the rows' loops early and silently.
// exp in double (kiln_exp_f64, shared with pow), rounded once: f32_math's exp lost up to 8
// ulp on lavapipe near |x| = 9.
constexpr const char* kExpF64 =
    "#ifndef KILN_EXP_F64\n"
    "#define KILN_EXP_F64\n"
    "double kiln_exp_f64(double z) {  // for z in [-104, 89]: Taylor to t^12 on |t| <= ln2/2\n"
    "  const double c[13] = double[13](1.0lf, 1.0lf, 0.5lf, 0.16666666666666666lf, 0.041666666666666664lf, 0.008333333333333333lf,\n"
    "                                  0.001388888888888889lf, 0.0001984126984126984lf, 2.48015873015873e-05lf, 2.7557319223985893e-06lf, 2.755731922398589e-07lf, 2.505210838544172e-08lf, 2.08767569878681e-09lf);\n"
    "  precise double n = roundEven(z * 1.4426950408889634lf);\n"
    "  precise double t = (z - n * 0.6931471803691238lf) - n * 1.9082149292705877e-10lf;\n"
    "  precise double p = c[12];\n"
    "  p = p * t + c[11];\n"
    "  p = p * t + c[10];\n"
    "  p = p * t + c[9];\n"
    "  p = p * t + c[8];\n"
    "  p = p * t + c[7];\n"
    "  p = p * t + c[6];\n"
    "  p = p * t + c[5];\n"
    "  p = p * t + c[4];\n"
    "  p = p * t + c[3];\n"
    "  p = p * t + c[2];\n"
    "  p = p * t + c[1];\n"
    "  p = p * t + c[0];\n"
    "  return p * ldexp(1.0lf, int(n));\n"
    "}\n"
    "#endif\n";
constexpr const char* kExpF32 =
    "float kiln_exp(float x) {\n"
    "  if (isnan(x)) return x;\n"
    "  if (x > 89.0) return uintBitsToFloat(0x7f800000u);\n"
    "  if (x < -104.0) return 0.0;\n"
    "  return float(kiln_exp_f64(double(x)));\n"
    "}\n";
// Round half to even on doubles from floor: x - floor(x) is exact except just below zero
// (-2^-60 gives 1, which rounds to the same zero), and so are the halves of the integers it
// compares. A zero keeps x's sign, as rint's does.
constexpr const char* kRoundEvenF64 =
    "double kiln_round_even_f64(double x) {\n"
    "  precise double r = floor(x);\n"
    "  precise double d = x - r;\n"
    "  precise double half_r = r * 0.5lf;\n"
    "  if (d > 0.5lf || (d == 0.5lf && floor(half_r) != half_r)) r = r + 1.0lf;\n"
    "  if (r == 0.0lf && int(unpackDouble2x32(x).y) < 0) return packDouble2x32(uvec2(0u, 0x80000000u));\n"
    "  return r;\n"
    "}\n";

// sin, cos and pow on f32 are computed in double and rounded once, as the interpreter
// computes them (GLSL's double has arithmetic but no transcendental functions).
// x * 2/pi modulo 4, exactly enough for every float: 2/pi in 28-bit chunks, so that each
// product with x's 24 bits is exact in double, and each product's multiples of 4 drop out
// exactly. Returns the remainder as an angle in [-pi/4, pi/4] and the quadrant in q.
constexpr const char* kRemPio2 =
    "#ifndef KILN_REM_PIO2\n"
    "#define KILN_REM_PIO2\n"
    "double kiln_rem_pio2(float x, out int q) {\n"
    "  const double c[8] = double[8](0.6366197690367699lf, 3.3308114738561656e-09lf, 2.276010047810136e-18lf,\n"
    "                                2.5268260189002822e-26lf, 1.6682867657019525e-34lf, 1.158871328288855e-43lf,\n"
    "                                7.053959174404295e-52lf, 8.910067885731021e-60lf);\n"
    "  precise double f = 0.0lf;\n"
    "  precise double t0 = double(x) * c[0];\n"
    "  f += t0 - 4.0lf * floor(t0 * 0.25lf);\n"
    "  precise double t1 = double(x) * c[1];\n"
    "  f += t1 - 4.0lf * floor(t1 * 0.25lf);\n"
    "  precise double t2 = double(x) * c[2];\n"
    "  f += t2 - 4.0lf * floor(t2 * 0.25lf);\n"
    "  precise double t3 = double(x) * c[3];\n"
    "  f += t3 - 4.0lf * floor(t3 * 0.25lf);\n"
    "  precise double t4 = double(x) * c[4];\n"
    "  f += t4 - 4.0lf * floor(t4 * 0.25lf);\n"
    "  precise double t5 = double(x) * c[5];\n"
    "  f += t5 - 4.0lf * floor(t5 * 0.25lf);\n"
    "  precise double t6 = double(x) * c[6];\n"
    "  f += t6 - 4.0lf * floor(t6 * 0.25lf);\n"
    "  precise double t7 = double(x) * c[7];\n"
    "  f += t7 - 4.0lf * floor(t7 * 0.25lf);\n"
    "  f -= 4.0lf * floor(f * 0.25lf);\n"
    "  precise double n = roundEven(f);\n"
    "  q = int(n) & 3;\n"
    "  return (f - n) * 1.5707963267948966lf;\n"
    "}\n"
    "#endif\n";
constexpr const char* kSinCosF64 =
    "#ifndef KILN_SIN_COS_F64\n"
    "#define KILN_SIN_COS_F64\n"
    "double kiln_sin_poly(double r) {  // |r| <= pi/4: Taylor series, error < 1e-14\n"
    "  precise double r2 = r * r;\n"
    "  precise double p = 1.6059043836821613e-10lf;\n"
    "  p = p * r2 - 2.505210838544172e-08lf; p = p * r2 + 2.7557319223985893e-06lf; p = p * r2 - 1.984126984126984e-04lf;\n"
    "  p = p * r2 + 8.333333333333333e-03lf; p = p * r2 - 1.6666666666666666e-01lf;\n"
    "  return r + r * r2 * p;\n"
    "}\n"
    "double kiln_cos_poly(double r) {\n"
    "  precise double r2 = r * r;\n"
    "  precise double p = -1.1470745597729725e-11lf;\n"
    "  p = p * r2 + 2.08767569878681e-09lf; p = p * r2 - 2.755731922398589e-07lf; p = p * r2 + 2.48015873015873e-05lf;\n"
    "  p = p * r2 - 1.388888888888889e-03lf; p = p * r2 + 4.1666666666666664e-02lf; p = p * r2 - 0.5lf;\n"
    "  return 1.0lf + r2 * p;\n"
    "}\n"
    "#endif\n";
constexpr const char* kSinF32 =
    "float kiln_sin(float x) {\n"
    "  if (x == 0.0 || isnan(x)) return x;\n"
    "  int q;\n"
    "  double r = kiln_rem_pio2(x, q);\n"
    "  double s = (q & 1) == 0 ? kiln_sin_poly(r) : kiln_cos_poly(r);\n"
    "  return float(q >= 2 ? -s : s);\n"
    "}\n";
constexpr const char* kCosF32 =
    "float kiln_cos(float x) {\n"
    "  if (isnan(x)) return x;\n"
    "  int q;\n"
    "  double r = kiln_rem_pio2(x, q);\n"
    "  double s = (q & 1) == 0 ? kiln_cos_poly(r) : kiln_sin_poly(r);\n"
    "  return float(q == 1 || q == 2 ? -s : s);\n"
    "}\n";
// pow(x, y) = 2^(y log2 |x|) in double: log through atanh's series on the mantissa in
// [sqrt(1/2), sqrt(2)), exp through a Taylor series on [-ln2/2, ln2/2]; the special cases
// of C's pow first.
constexpr const char* kPowF32 =
    "float kiln_pow(float x, float y) {\n"
    "  if (y == 0.0 || x == 1.0) return 1.0;\n"
    "  if (isnan(x) || isnan(y)) return x + y;\n"
    "  bool y_int = floor(y) == y, y_odd = y_int && abs(y) < 16777216.0 && floor(y * 0.5) != y * 0.5;\n"
    "  if (x == -1.0 && isinf(y)) return 1.0;\n"
    "  if (x < 0.0 && !y_int) return uintBitsToFloat(0x7fc00000u);\n"
    "  float ax = abs(x);\n"
    "  precise double l;\n"
    "  if (ax == 0.0) l = -1.0lf / 0.0lf;\n"
    "  else if (isinf(ax)) l = 1.0lf / 0.0lf;\n"
    "  else {\n"
    "    int e;\n"
    "    precise double m = double(frexp(ax, e));  // [0.5, 1)\n"
    "    if (m < 0.7071067811865476lf) { m *= 2.0lf; e -= 1; }\n"
    "    precise double s = (m - 1.0lf) / (m + 1.0lf), s2 = s * s;\n"
    "    precise double a = 1.0lf / 23.0lf;\n"
    "    a = a * s2 + 1.0lf / 21.0lf;\n"
    "    a = a * s2 + 1.0lf / 19.0lf;\n"
    "    a = a * s2 + 1.0lf / 17.0lf;\n"
    "    a = a * s2 + 1.0lf / 15.0lf;\n"
    "    a = a * s2 + 1.0lf / 13.0lf;\n"
    "    a = a * s2 + 1.0lf / 11.0lf;\n"
    "    a = a * s2 + 1.0lf / 9.0lf;\n"
    "    a = a * s2 + 1.0lf / 7.0lf;\n"
    "    a = a * s2 + 1.0lf / 5.0lf;\n"
    "    a = a * s2 + 1.0lf / 3.0lf;\n"
    "    a = a * s2 + 1.0lf / 1.0lf;\n"
    "    l = 2.0lf * s * a + double(e) * 0.6931471805599453lf;\n"
    "  }\n"
    "  precise double z = double(y) * l;\n"
    "  float r = z > 89.0lf ? uintBitsToFloat(0x7f800000u) : z < -104.0lf ? 0.0 : float(kiln_exp_f64(z));\n"
    "  return x < 0.0 && y_odd ? -r : r;\n"
    "}\n";
// i64 to f32 through f64 as the interpreter converts: rounding twice can differ from once,
// and a float(double(x)) conversion chain is folded into one by some compilers. The
// rounding to 53 bits is done on the integer, whose conversion to float is then exact
// enough to round once.
// f64 division with IEEE 754's special values spelled out: lavapipe divides doubles through
// a reciprocal (Mesa's lowering), which gave 32.000007 for 1.0 / 0.0, a subnormal for
// -1.0 / 0.0 and the wrong zero for 0.0 / -3.0, even under SignedZeroInfNanPreserve. f32
// division runs through it too.
constexpr const char* kDivF64 =
    "double kiln_div_f64(double a, double b) {\n"
    "  if (isnan(a) || isnan(b)) return a + b;\n"
    "  bool negative = (int(unpackDouble2x32(a).y) < 0) != (int(unpackDouble2x32(b).y) < 0);\n"
    "  double inf = packDouble2x32(uvec2(0u, negative ? 0xfff00000u : 0x7ff00000u));\n"
    "  double zero = packDouble2x32(uvec2(0u, negative ? 0x80000000u : 0u));\n"
    "  double nan = packDouble2x32(uvec2(0u, 0x7ff80000u));\n"
    "  if (b == 0.0lf) return a == 0.0lf ? nan : inf;\n"
    "  if (isinf(b)) return isinf(a) ? nan : zero;\n"
    "  if (isinf(a)) return inf;\n"
    "  if (a == 0.0lf) return zero;\n"
    "  return a / b;\n"
    "}\n";
constexpr const char* kI64ToF32 =
    "float kiln_i64_to_f32(int64_t x) {\n"
    "  uint64_t u = uint64_t(x < 0l ? -x : x);\n"
    "  uint hi = uint(u >> 32);\n"
    "  int msb = hi != 0u ? findMSB(hi) + 32 : findMSB(uint(u));\n"
    "  if (msb > 52) {\n"
    "    int shift = msb - 52;\n"
    "    uint64_t unit = uint64_t(1) << shift, rem = u & (unit - uint64_t(1)), half_unit = unit >> 1;\n"
    "    u -= rem;\n"
    "    if (rem > half_unit || (rem == half_unit && (u & unit) != uint64_t(0))) u += unit;\n"
    "  }\n"
    "  float f = float(u);\n"
    "  return x < 0l ? -f : f;\n"
    "}\n";

// C's fmod, exact, on the bits (musl's fmodf, for both widths): integer shift-and-subtract
// of the significands, so that a device flushing subnormals to zero (lavapipe) neither
// flushes an operand nor loops on a divisor it reads as 0.
std::string fmod_helper(DType t) {
  const bool f32 = t == DType::F32;
  const std::string T = f32 ? "float" : "double", U = f32 ? "uint" : "uint64_t";
  const int w = f32 ? 32 : 64, m = f32 ? 23 : 52, e = f32 ? 8 : 11;
  const std::string bits = f32 ? "floatBitsToUint({})" : "(uint64_t(unpackDouble2x32({0}).x) | (uint64_t(unpackDouble2x32({0}).y) << 32))";
  const std::string from = f32 ? "uintBitsToFloat({})" : "packDouble2x32(uvec2(uint({0}), uint({0} >> 32)))";
  auto B = [&](std::string_view x) { return fmt::format(fmt::runtime(bits), x); };
  auto F = [&](std::string_view x) { return fmt::format(fmt::runtime(from), x); };
  const std::string one = U + "(1)", zero = U + "(0)", nan = f32 ? "uintBitsToFloat(0x7fc00000u)" : "packDouble2x32(uvec2(0u, 0x7ff80000u))";
  return fmt::format(
      "{T} kiln_fmod_{n}({T} x, {T} y) {{\n"
      "  {U} ux = {bx}, uy = {by};\n"
      "  int ex = int((ux >> {m}) & {U}({emax})), ey = int((uy >> {m}) & {U}({emax}));\n"
      "  {U} sx = ux & ({one} << {top}), i;\n"
      "  if ((uy << 1) == {zero} || isnan(y) || ex == {emax}) return {nan};\n"
      "  if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? {fsx} : x;\n"
      "  if (ex == 0) {{\n"
      "    for (i = ux << {e1}; (i >> {top}) == {zero}; i <<= 1) --ex;\n"
      "    ux <<= 1 - ex;\n"
      "  }} else {{\n"
      "    ux = (ux & (~{zero} >> {e1})) | ({one} << {m});\n"
      "  }}\n"
      "  if (ey == 0) {{\n"
      "    for (i = uy << {e1}; (i >> {top}) == {zero}; i <<= 1) --ey;\n"
      "    uy <<= 1 - ey;\n"
      "  }} else {{\n"
      "    uy = (uy & (~{zero} >> {e1})) | ({one} << {m});\n"
      "  }}\n"
      "  for (; ex > ey; --ex) {{\n"
      "    i = ux - uy;\n"
      "    if ((i >> {top}) == {zero}) {{\n"
      "      if (i == {zero}) return {fsx};\n"
      "      ux = i;\n"
      "    }}\n"
      "    ux <<= 1;\n"
      "  }}\n"
      "  i = ux - uy;\n"
      "  if ((i >> {top}) == {zero}) {{\n"
      "    if (i == {zero}) return {fsx};\n"
      "    ux = i;\n"
      "  }}\n"
      "  for (; (ux >> {m}) == {zero}; ux <<= 1) --ex;\n"
      "  if (ex > 0) ux = (ux - ({one} << {m})) | ({U}(ex) << {m});\n"
      "  else ux >>= 1 - ex;\n"
      "  return {fr};\n"
      "}}\n",
      fmt::arg("T", T), fmt::arg("U", U), fmt::arg("n", dtype_name(t)), fmt::arg("bx", B("x")), fmt::arg("by", B("y")),
      fmt::arg("m", m), fmt::arg("emax", (1 << e) - 1), fmt::arg("one", one), fmt::arg("zero", zero),
      fmt::arg("top", w - 1), fmt::arg("e1", e + 1), fmt::arg("nan", nan), fmt::arg("fsx", F("sx")),
      fmt::arg("fr", F("(ux | sx)")));
}

class GlslDialect final : public CDialect {
 public:
  std::string type(DType t) const override {
    switch (t) {
      case DType::Bool: return "bool";
      case DType::I32: return "int";
      case DType::I64: return "int64_t";
      case DType::F32: return "float";
      case DType::F64: return "double";
      default: break;
    }
    KILN_ASSERT(false, "Kernel IR computes in the compute types only");
  }
  std::string memory_type(DType t) const override {
    switch (t) {
      case DType::Bool:
      case DType::U8: return "uint8_t";
      case DType::I8: return "int8_t";
      case DType::I16: return "int16_t";
      case DType::U16:
      case DType::F16:
      case DType::BF16: return "uint16_t";
      case DType::U32: return "uint";
      case DType::U64: return "uint64_t";
      default: return type(t);
    }
  }
  std::string f32_bits(std::string_view x) const override { return fmt::format("floatBitsToUint({})", x); }
  std::string bits_f32(std::string_view x) const override { return fmt::format("uintBitsToFloat({})", x); }
  std::string unsigned_type(DType t) const override { return t == DType::I32 ? "uint" : "uint64_t"; }
  std::string bitcast(std::string_view expr, DType t, bool to_unsigned) const override {
    return fmt::format("{}({})", to_unsigned ? unsigned_type(t) : type(t), expr);
  }
  std::string float_literal(double v, DType t) const override {
    const bool f = t == DType::F32;
    if (std::isnan(v) || std::isinf(v)) {
      if (f) {
        const float x = static_cast<float>(v);
        uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof bits);
        return fmt::format("uintBitsToFloat(0x{:08x}u)", bits);
      }
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      return fmt::format("packDouble2x32(uvec2(0x{:08x}u, 0x{:08x}u))", bits & 0xffffffffu, bits >> 32);
    }
    // The shortest decimal that reads back as the same value; glslang reads it through a
    // double, which rounds to the same float (a shortest float decimal is far from a tie).
    std::string s = f ? fmt::format("{}", static_cast<float>(v)) : fmt::format("{}", v);
    if (s.find_first_of(".e") == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
    return f ? s : s + "lf";
  }
  std::string zero_value(DType t, bool negative) const override {
    // lavapipe (Mesa 22) folds x + 0.0 to x, 0.0 - x to -x and x * 0.0 to 0.0, though it
    // claims to preserve signed zeros, infinities and NaN; 0 converted to float is such a
    // zero too. A zero made from the launch's zero word (kiln_zero, always 0) is one it
    // cannot see through.
    switch (t) {
      case DType::Bool: return "(kiln_zero != 0u)";
      case DType::I32: return "int(kiln_zero)";
      case DType::I64: return "int64_t(kiln_zero)";
      case DType::F32: return fmt::format("uintBitsToFloat(kiln_zero{})", negative ? " | 0x80000000u" : "");
      default: return fmt::format("packDouble2x32(uvec2(kiln_zero, kiln_zero{}))", negative ? " | 0x80000000u" : "");
    }
  }
  std::string int_literal(int64_t v, DType t) const override {
    if (t == DType::I32) return v == INT32_MIN ? "(-2147483647 - 1)" : fmt::format("{}", v);
    return v == INT64_MIN ? "(-9223372036854775807l - 1l)" : fmt::format("{}l", v);
  }
  std::string let() const override { return "precise "; }
  std::string convert(std::string_view x, std::string_view to) const override {
    if (to == "uint8_t") return fmt::format("uint8_t(int({}))", x);
    return fmt::format("{}({})", to, x);
  }
  std::string widen_i32(std::string_view x) const override {
    // Not int64_t(x): Mesa 22 (lavapipe) folds `int64_t(x) < c` for a constant c into a
    // comparison that is always false (and `>`, `>=` always true). Building the 64 bits
    // from two halves hides the pattern.
    return fmt::format("packInt2x32(ivec2({0}, {0} >> 31))", x);
  }
  std::string float_to_int(std::string_view x, DType from, DType to) const override {
    // [-2^(bits-1), 2^(bits-1)) converts; beyond it saturates; NaN is 0.
    const double limit = to == DType::I32 ? 2147483648.0 : 9223372036854775808.0;
    const int64_t max = to == DType::I32 ? INT32_MAX : INT64_MAX, min = to == DType::I32 ? INT32_MIN : INT64_MIN;
    return fmt::format("(isnan({0}) ? {1} : {0} >= {2} ? {3} : {0} < {4} ? {5} : {6}({0}))", x, int_literal(0, to),
                       float_literal(limit, from), int_literal(max, to), float_literal(-limit, from), int_literal(min, to),
                       type(to));
  }
  std::string is_nan(std::string_view x) const override { return fmt::format("isnan({})", x); }
  std::string is_zero(std::string_view x, DType t) const override {  // subnormals are not
    if (t == DType::F32) return fmt::format("((floatBitsToUint({}) << 1) == 0u)", x);
    return fmt::format("((unpackDouble2x32({0}).x | (unpackDouble2x32({0}).y << 1)) == 0u)", x);
  }
  std::string sign_bit(std::string_view x, DType t) const override {
    if (t == DType::F32) return fmt::format("(floatBitsToInt({}) < 0)", x);
    return fmt::format("(int(unpackDouble2x32({}).y) < 0)", x);
  }
  std::string math(std::string_view fn, DType t) const override {
    if (t == DType::F64 && is_double_only_in_opencl(fn))
      throw Error(fmt::format("vulkan: GLSL has no double-precision {}; {} on f64 is not supported on vulkan devices "
                              "(cast to f32 first)",
                              fn, fn));
    if (fn == "fabs") return "abs";
    // asin, acos and atan are GLSL's own on f32, within Vulkan's bound (4096 ulp, inherited
    // from atan); atan2 is GLSL's two-argument atan.
    if (fn == "atan2") return "atan";
    // lavapipe's roundEven on doubles rounds some ties away from even and drops the sign of
    // a zero (seen on an AVX2 host: 3.5 -> 3, -0.3 -> 0): kiln's own from floor there.
    if (fn == "rint") return t == DType::F64 ? "kiln_round_even_f64" : "roundEven";
    // GLSL's mod is x - y * floor(x / y), rounded: fmod is kiln's own, exact.
    if (fn == "fmod") return fmt::format("kiln_fmod_{}", dtype_name(t));
    // f32 transcendental functions are kiln's own: Vulkan allows exp 3 + 2|x| ulp, sin and
    // cos an absolute 2^-11 inside [-pi, pi] and anything outside, and lavapipe uses that
    // freedom (tanh(0.001) 16 ulp off, sin(1e5) = -1).
    if (t == DType::F32 && (fn == "exp" || fn == "log" || fn == "tanh" || fn == "erf" || fn == "sin" || fn == "cos" ||
                            fn == "pow"))
      return fmt::format("kiln_{}", fn);
    return std::string(fn);
  }
  std::string divide(DType t) const override { return t == DType::F64 ? "kiln_div_f64" : ""; }
  std::string i64_to_f32() const override { return "kiln_i64_to_f32"; }
  bool double_math(std::string_view fn) const override { return !is_double_only_in_opencl(fn); }

  std::string helper(std::string_view name) const override {
    if (name == "kiln_exp") return std::string(kExpF64) + kExpF32;
    if (name == "kiln_log") return c_f32_math_helper(*this, "log", name);
    if (name == "kiln_tanh") return c_f32_math_helper(*this, "tanh", name);
    if (name == "kiln_erf") return c_f32_math_helper(*this, "erf", name);  // GLSL has no erf
    if (name == "kiln_sin") return std::string(kRemPio2) + kSinCosF64 + kSinF32;
    if (name == "kiln_cos") return std::string(kRemPio2) + kSinCosF64 + kCosF32;
    if (name == "kiln_pow") return std::string(kExpF64) + kPowF32;
    if (name == "kiln_i64_to_f32") return kI64ToF32;
    if (name == "kiln_div_f64") return kDivF64;
    if (name == "kiln_round_even_f64") return kRoundEvenF64;
    if (name == "kiln_fmod_f32") return fmod_helper(DType::F32);
    if (name == "kiln_fmod_f64") return fmod_helper(DType::F64);
    return "";
  }
  MathSpelling math_spelling(int lanes) const override {
    KILN_ASSERT(lanes == 1, "GLSL's math helpers are scalar");
    return {"float", "uint", "floatBitsToUint", "uintBitsToFloat", "int", "uint", "float"};
  }

  std::string vector_type(DType t, int lanes) const override {
    KILN_ASSERT(lanes >= 2 && lanes <= 4, "GLSL vectors have 2 to 4 lanes");
    return fmt::format("{}vec{}", t == DType::F64 ? "d" : t == DType::I32 ? "i" : "", lanes);
  }
  std::string vector_load(std::string_view array, std::string_view index, int lanes) const override {
    // Local arrays are arrays of scalars in GLSL: gather the lanes.
    std::string lanes_text;
    for (int i = 0; i < lanes; ++i)
      lanes_text += fmt::format("{}{}", i ? ", " : "", subscript(array, fmt::format("({}) + {}", index, i)));
    return fmt::format("vec{}({})", lanes, lanes_text);
  }
  std::string vector_splat(std::string_view x, DType t, int lanes) const override {
    return fmt::format("{}({})", vector_type(t, lanes), x);
  }
  std::string vector_lane(std::string_view v, int i) const override { return fmt::format("{}[{}]", v, i); }

  std::string global_id(DType t) const override { return fmt::format("{}(gl_GlobalInvocationID.x)", type(t)); }
  std::string global_size(DType t) const override {
    return fmt::format("{}(gl_NumWorkGroups.x * gl_WorkGroupSize.x)", type(t));
  }
  std::string local_id(DType t) const override { return fmt::format("{}(gl_LocalInvocationID.x)", type(t)); }
  std::string group_id(DType t) const override { return fmt::format("{}(gl_WorkGroupID.x)", type(t)); }
  std::string group_count(DType t) const override { return fmt::format("{}(gl_NumWorkGroups.x)", type(t)); }
  std::string barrier() const override { return "memoryBarrierShared(); barrier();"; }
  std::string subgroup_size(DType t) const override { return fmt::format("{}(gl_SubgroupSize)", type(t)); }
  std::string subgroup_id(DType t) const override { return fmt::format("{}(gl_SubgroupID)", type(t)); }
  std::string subgroup_local_id(DType t) const override { return fmt::format("{}(gl_SubgroupInvocationID)", type(t)); }
  std::string subgroup_count(DType t) const override { return fmt::format("{}(gl_NumSubgroups)", type(t)); }
  std::string subgroup_shuffle_xor(std::string_view x, std::string_view mask, DType t) const override {
    // 64-bit integers as two 32-bit halves: shuffling int64_t itself needs the optional
    // shaderSubgroupExtendedTypes feature.
    if (t == DType::I64) return fmt::format("packInt2x32(subgroupShuffleXor(unpackInt2x32({}), uint({})))", x, mask);
    return fmt::format("subgroupShuffleXor({}, uint({}))", x, mask);
  }

  std::string_view language() const override { return "GLSL"; }
  std::string helper_qualifier() const override { return ""; }
  std::string prologue(std::span<const Kernel* const> kernels, bool, bool subgroups) const override {
    std::string names;
    for (const Kernel* k : kernels) names += fmt::format(" @{}", k->name);
    // 8-bit storage for bool, i8 and u8 buffers, 16-bit storage for i16, u16, f16 and bf16,
    // 64-bit integers for positions and i64; doubles are core.
    return fmt::format(
        "#version 450\n"
        "#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
        "#extension GL_EXT_shader_8bit_storage : require\n"
        "#extension GL_EXT_shader_16bit_storage : require\n"
        "{}"
        "// kiln kernel{}\n"
        "layout(local_size_x_id = 0) in;\n",
        subgroups ? "#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_shuffle : require\n" : "",
        names);
  }
  std::string local_array(std::string_view name, DType t, int64_t n) const override {
    return fmt::format("shared {} {}[{}];\n", type(t), name, n);
  }
  bool local_arrays_global() const override { return true; }
  std::string entry(const Kernel& k, const Schedule&) const override {
    std::string out;
    for (size_t b = 0; b < k.buffers.size(); ++b)
      out += fmt::format("layout(std430, set = 0, binding = {0}) {1}buffer B{0} {{ {2} b{0}[]; }};\n", b,
                         k.buffers[b].written ? "" : "readonly ", memory_type(k.buffers[b].type.dtype));
    out += "layout(push_constant) uniform Scalars {";
    for (size_t a = 0; a < k.scalars.size(); ++a)
      out += fmt::format(" {} s{};", k.scalars[a] == DType::Bool ? "uint" : type(k.scalars[a]), a);
    return out + " uint kiln_zero; };\nvoid main() {";
  }
  // GLSL indexes arrays with 32-bit integers only; glsl_source checked that positions fit.
  std::string element(int b, std::string_view index) const override { return fmt::format("b{}[int({})]", b, index); }
  std::string subscript(std::string_view array, std::string_view index) const override {
    return fmt::format("{}[int({})]", array, index);
  }
};

const GlslDialect kGlsl;

}  // namespace

std::string glsl_source(const Kernel& k, const Schedule& s, const Capabilities& caps) {
  if (!index_fits_32(k))
    throw Error(fmt::format("vulkan: kernel @{} addresses more than 2^31 elements, which GLSL cannot index", k.name));
  const Kernel* kernels[] = {&k};
  const Schedule* schedules[] = {&s};
  return emit_c_program(kernels, schedules, caps, kGlsl);
}

std::string glsl_gemm_source(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                             const Capabilities& caps) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  const int64_t batch = g.batch.numel();
  if (batch * g.m * g.n >= kLimit || batch * g.m * g.k >= kLimit || batch * g.k * g.n >= kLimit)
    throw Error(fmt::format("vulkan: a {}x{}x{} matmul (batch {}) addresses more than 2^31 elements, which GLSL cannot index",
                            g.m, g.k, g.n, batch));
  return emit_c_gemm(g, epilogue, store_product, "gemm", caps, kGlsl);
}

std::string glsl_attention_source(const LaunchPlan::Attention& a, const Capabilities& caps) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  const int64_t extents[] = {a.q.extent(a.batch, a.rows, a.depth), a.k.extent(a.batch, a.keys, a.depth),
                             a.v.extent(a.batch, a.keys, a.width), a.bias.extent(a.batch, a.rows, a.keys),
                             a.batch.numel() * a.rows * a.width};
  for (int64_t e : extents)
    if (e >= kLimit)
      throw Error(fmt::format("vulkan: attention @{} addresses more than 2^31 elements, which GLSL cannot index", a.name));
  return emit_c_attention(a, "attention", caps, kGlsl);
}

}  // namespace kiln::kir
