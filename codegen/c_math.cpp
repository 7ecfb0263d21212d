// codegen/c_math.cpp - kiln's own f32 math (internal/kiln/codegen/f32_math.h) as C-family text.
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "c_dialect.h"
#include "kiln/codegen/f32_math.h"

namespace kiln::kir {
namespace {

// f32_math's emitter on text: each float or integer value is a temporary declared with the
// dialect's qualifier (GLSL's `precise`: no contraction, no reassociation, as LLVM's plain
// instructions), each condition an expression written where a select uses it. Integers are
// unsigned, whose arithmetic wraps as LLVM's i32 does.
struct CValue {
  std::string text;
  bool integer = false;
};

class CText {
 public:
  using Value = CValue;

  CText(const CDialect& d, int lanes) : d_(d), s_(d.math_spelling(lanes)) {}

  Value constant(double v) const { return {d_.float_literal(v, DType::F32)}; }
  Value int_constant(int64_t v) const { return {fmt::format("{}u", static_cast<uint32_t>(v)), true}; }
  Value add(const Value& x, const Value& y) { return let(fmt::format("{} + {}", x.text, y.text)); }
  Value sub(const Value& x, const Value& y) { return let(fmt::format("{} - {}", x.text, y.text)); }
  Value mul(const Value& x, const Value& y) { return let(fmt::format("{} * {}", x.text, y.text)); }
  Value div(const Value& x, const Value& y) { return let(fmt::format("{} / {}", x.text, y.text)); }
  Value neg(const Value& x) { return let(fmt::format("-{}", x.text)); }
  Value fma(const Value& x, const Value& y, const Value& z) {
    return let(fmt::format("fma({}, {}, {})", x.text, y.text, z.text));
  }
  Value fabs(const Value& x) { return let(fmt::format("{}({})", d_.math("fabs", DType::F32), x.text)); }
  Value copysign(const Value& magnitude, const Value& sign) {  // GLSL has no copysign
    const Value m = fabs(magnitude);  // a temporary of the vector type, for OpenCL's `?:`
    return let(fmt::format("{} ? -{} : {}", d_.sign_bit(sign.text, DType::F32), m.text, m.text));
  }
  Value greater(const Value& x, const Value& y) const { return {fmt::format("({} > {})", x.text, y.text)}; }
  Value less(const Value& x, const Value& y) const { return {fmt::format("({} < {})", x.text, y.text)}; }
  Value equal(const Value& x, const Value& y) const { return {fmt::format("({} == {})", x.text, y.text)}; }
  Value is_nan(const Value& x) const { return {d_.is_nan(x.text)}; }
  Value select(const Value& c, const Value& x, const Value& y) {
    return let(fmt::format("{} ? {} : {}", c.text, x.text, y.text), x.integer);
  }
  Value bits(const Value& x) { return let(fmt::format("{}({})", s_.to_bits, x.text), true); }
  Value from_bits(const Value& i) { return let(fmt::format("{}({})", s_.from_bits, i.text)); }
  Value int_to_float(const Value& i) {
    return let(fmt::format("{}({}({}))", s_.signed_to_float, s_.to_signed, i.text));
  }
  Value int_sub(const Value& i, const Value& j) { return let(fmt::format("{} - {}", i.text, j.text), true); }
  Value int_and(const Value& i, const Value& j) { return let(fmt::format("{} & {}", i.text, j.text), true); }
  Value int_or(const Value& i, const Value& j) { return let(fmt::format("{} | {}", i.text, j.text), true); }
  Value shift_left(const Value& i, int n) { return let(fmt::format("{} << {}u", i.text, n), true); }
  Value shift_right_logical(const Value& i, int n) { return let(fmt::format("{} >> {}u", i.text, n), true); }
  Value shift_right_arith(const Value& i, int n) {
    return let(fmt::format("{}({}({}) >> {})", s_.to_unsigned, s_.to_signed, i.text, n), true);
  }

  // The function: the statements, then the result, NaN returned as it came (GLSL's
  // compilers may turn a compare and a select into min or max, which are free to drop it).
  std::string function(std::string_view name, const Value& x, const Value& result) const {
    const std::string qualifier = d_.helper_qualifier();
    return fmt::format("{}{}{} {}({} {}) {{\n{}  return {} ? {} : {};\n}}\n", qualifier, qualifier.empty() ? "" : " ",
                       s_.float_type, name, s_.float_type, x.text, body_, d_.is_nan(x.text), x.text, result.text);
  }

 private:
  // Temporaries are named f0, f1... for floats and i2, i3... for integers.
  Value let(const std::string& expr, bool integer = false) {
    Value v{fmt::format("{}{}", integer ? 'i' : 'f', next_++), integer};
    body_ += fmt::format("  {}{} {} = {};\n", d_.let(), integer ? s_.uint_type : s_.float_type, v.text, expr);
    return v;
  }

  const CDialect& d_;
  CDialect::MathSpelling s_;
  std::string body_;
  int next_ = 0;
};

}  // namespace

std::string c_f32_math_helper(const CDialect& dialect, std::string_view fn, std::string_view name, int lanes) {
  CText e(dialect, lanes);
  const CValue x{"x"};
  CValue r;
  if (fn == "exp") r = f32_math::exp(e, x);
  else if (fn == "log") r = f32_math::log(e, x);
  else if (fn == "tanh") r = f32_math::tanh(e, x);
  else if (fn == "erf") r = f32_math::erf(e, x);
  else KILN_ASSERT(false, "c_f32_math_helper: no such function");
  return e.function(name, x, r);
}

}  // namespace kiln::kir
