// codegen/glsl_dialect.cpp - the GLSL dialect of the C-family emitter: Vulkan compute shaders
// (GLSL 4.50, compiled to SPIR-V by shaderc).
//
// What differs from OpenCL C, and why:
// - One entry point per module (`main`): a program holds one kernel. Buffers are std430
//   storage blocks at bindings 0, 1... (Kernel::buffers order); scalars are push constants
//   (bool as a 32-bit uint there: 8-bit push constants are an optional feature); the
//   work-group size is specialization constant 0, so a pipeline sets it without recompiling.
// - `const` means compile-time in GLSL: variables assigned once are `precise` instead, which
//   also keeps the driver from contracting a * b + c into an fma (the interpreter rounds both
//   operations, as OpenCL's FP_CONTRACT OFF asks for).
// - Casts are constructors; int <-> uint constructors keep the bits (the emitter's bitcasts).
//   A bool converts to uint8_t through int: glslang turns uint8_t(bool) into an invalid
//   OpUConvert (SPIRV-Tools rejects it).
// - Float to integer is undefined out of range in GLSL: the saturation and NaN rule of the
//   cast op are spelled out.
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
  return fn == "exp" || fn == "log" || fn == "tanh" || fn == "sin" || fn == "cos" || fn == "pow" || fn == "erf";
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
    }
    return "?";
  }
  std::string memory_type(DType t) const override { return t == DType::Bool ? "uint8_t" : type(t); }
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
  std::string int_literal(int64_t v, DType t) const override {
    if (t == DType::I32) return v == INT32_MIN ? "(-2147483647 - 1)" : fmt::format("{}", v);
    return v == INT64_MIN ? "(-9223372036854775807l - 1l)" : fmt::format("{}l", v);
  }
  std::string let() const override { return "precise "; }
  std::string convert(std::string_view x, std::string_view to) const override {
    if (to == "uint8_t") return fmt::format("uint8_t(int({}))", x);
    return fmt::format("{}({})", to, x);
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
    if (fn == "erf") return "kiln_erf";
    return std::string(fn);
  }
  bool double_math(std::string_view fn) const override { return !is_double_only_in_opencl(fn); }

  std::string helper(std::string_view name) const override {
    if (name != "kiln_erf") return "";
    // erf on f32: the cpu backend's rational approximation (backends/cpu/vector_math.cpp,
    // erf_f32, same coefficients and clamps), since GLSL has no erf. NaN is returned first:
    // GLSL's min and max leave NaN undefined.
    return "float kiln_erf(float x) {\n"
           "  if (isnan(x)) return x;\n"
           "  precise float xc = min(max(x, -4.0), 4.0);\n"
           "  precise float x2 = xc * xc;\n"
           "  precise float p = -2.72614225801306e-10;\n"
           "  p = fma(p, x2, 2.77068142495902e-08); p = fma(p, x2, -2.10102402082508e-06);\n"
           "  p = fma(p, x2, -5.69250639462346e-05); p = fma(p, x2, -7.34990630326855e-04);\n"
           "  p = fma(p, x2, -2.95459980854025e-03); p = fma(p, x2, -1.60960333262415e-02);\n"
           "  precise float q = -1.45660718464996e-05;\n"
           "  q = fma(q, x2, -2.13374055278905e-04); q = fma(q, x2, -1.68282697438203e-03);\n"
           "  q = fma(q, x2, -7.37332916720468e-03); q = fma(q, x2, -1.42647390514189e-02);\n"
           "  // Near 0 the rational form would lose a tiny x's bits in subnormal intermediates.\n"
           "  return abs(x) < 1e-4 ? x * 1.12837916709551257 : xc * p / q;\n"
           "}\n";
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

  std::string helper_qualifier() const override { return ""; }
  std::string prologue(std::span<const Kernel* const> kernels, bool) const override {
    std::string names;
    for (const Kernel* k : kernels) names += fmt::format(" @{}", k->name);
    // 8-bit storage for bool buffers, 64-bit integers for positions and i64; doubles are core.
    return fmt::format(
        "#version 450\n"
        "#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
        "#extension GL_EXT_shader_8bit_storage : require\n"
        "// kiln kernel{}\n"
        "layout(local_size_x_id = 0) in;\n",
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
    if (!k.scalars.empty()) {
      out += "layout(push_constant) uniform Scalars {";
      for (size_t a = 0; a < k.scalars.size(); ++a)
        out += fmt::format(" {} s{};", k.scalars[a] == DType::Bool ? "uint" : type(k.scalars[a]), a);
      out += " };\n";
    }
    return out + "void main() {";
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

}  // namespace kiln::kir
