// codegen/opencl_dialect.cpp - the OpenCL C dialect of the C-family emitter.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "c_dialect.h"
#include "kiln/codegen/c_source.h"

namespace kiln::kir {
namespace {

class OpenClDialect final : public CDialect {
 public:
  std::string type(DType t) const override {
    switch (t) {
      case DType::Bool: return "bool";
      case DType::I32: return "int";
      case DType::I64: return "long";
      case DType::F32: return "float";
      case DType::F64: return "double";
      default: break;
    }
    KILN_ASSERT(false, "Kernel IR computes in the compute types only");
  }
  std::string memory_type(DType t) const override {
    switch (t) {
      case DType::Bool:
      case DType::U8: return "uchar";
      case DType::I8: return "char";
      case DType::I16: return "short";
      case DType::U16:
      case DType::F16:
      case DType::BF16: return "ushort";
      case DType::U32: return "uint";
      case DType::U64: return "ulong";
      default: return type(t);
    }
  }
  std::string f32_bits(std::string_view x) const override { return fmt::format("as_uint({})", x); }
  std::string bits_f32(std::string_view x) const override { return fmt::format("as_float({})", x); }
  std::string unsigned_type(DType t) const override { return t == DType::I32 ? "uint" : "ulong"; }
  std::string bitcast(std::string_view expr, DType t, bool to_unsigned) const override {
    const std::string target = to_unsigned ? unsigned_type(t) : type(t);
    return fmt::format("as_{}({})", target, expr);
  }
  std::string float_literal(double v, DType t) const override {
    const bool f = t == DType::F32;
    if (std::isnan(v)) return f ? "NAN" : "((double)NAN)";
    if (std::isinf(v)) return fmt::format("{}{}", v < 0 ? "-" : "", f ? "INFINITY" : "((double)INFINITY)");
    // Hexadecimal: exact, and never mistaken for an integer.
    return fmt::format("{:a}{}", v, f ? "f" : "");
  }
  std::string int_literal(int64_t v, DType t) const override {
    if (t == DType::I32) return v == INT32_MIN ? "(-2147483647 - 1)" : fmt::format("{}", v);
    return v == INT64_MIN ? "(-9223372036854775807L - 1L)" : fmt::format("{}L", v);
  }
  std::string let() const override { return "const "; }
  std::string convert(std::string_view x, std::string_view type) const override {
    return fmt::format("(({}){})", type, x);
  }
  std::string float_to_int(std::string_view x, DType, DType to) const override {
    // convert_*_sat rounds toward zero and saturates: the cast op. The specification also
    // makes NaN 0, but NVIDIA's driver (580) gives the type's minimum, so NaN is tested here.
    return fmt::format("(isnan({0}) ? {1} : convert_{2}_sat({0}))", x, int_literal(0, to), type(to));
  }
  std::string is_nan(std::string_view x) const override { return fmt::format("isnan({})", x); }
  std::string sign_bit(std::string_view x, DType) const override { return fmt::format("signbit({})", x); }
  std::string math(std::string_view fn, DType t) const override {
    return t == DType::F32 && (fn == "exp" || fn == "tanh") ? fmt::format("kiln_{}", fn) : std::string(fn);
  }
  // f32 exp and tanh are kiln's own (internal/kiln/codegen/f32_math.h): PoCL's took 37 of
  // W3's 49 ms and 15 of W1's 16. On a work-item's lanes they are the same steps on vectors
  // (kiln_exp16), which OpenCL C applies element by element.
  std::string helper(std::string_view name) const override {
    for (std::string_view fn : {"exp", "tanh"}) {
      const std::string base = fmt::format("kiln_{}", fn);
      if (!name.starts_with(base)) continue;
      const std::string_view lanes = name.substr(base.size());  // kiln_exp16: 16
      if (lanes.empty()) return c_f32_math_helper(*this, fn, name);
      if (std::ranges::all_of(lanes, [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
        return c_f32_math_helper(*this, fn, name, std::stoi(std::string(lanes)));
    }
    return "";
  }
  MathSpelling math_spelling(int lanes) const override {
    const std::string n = lanes > 1 ? std::to_string(lanes) : "";
    return {"float" + n, "uint" + n, "as_uint" + n, "as_float" + n, "as_int" + n, "as_uint" + n, "convert_float" + n};
  }
  bool double_math(std::string_view) const override { return true; }

  std::string vector_type(DType t, int lanes) const override { return fmt::format("{}{}", type(t), lanes); }
  std::string vector_load(std::string_view array, std::string_view index, int lanes) const override {
    return fmt::format("vload{}(0, {} + {})", lanes, array, index);
  }
  std::string vector_splat(std::string_view x, DType t, int lanes) const override {
    return fmt::format("(({})({}))", vector_type(t, lanes), x);
  }
  std::string vector_lane(std::string_view v, int i) const override { return fmt::format("{}.s{:x}", v, i); }

  bool vector_values() const override { return true; }
  std::string vector_convert(std::string_view x, DType to, int lanes) const override {
    return fmt::format("convert_{}{}({})", type(to), lanes, x);
  }
  std::string memory_vector_type(DType t, int lanes) const override { return fmt::format("{}{}", memory_type(t), lanes); }
  std::string memory_vector(DType t, std::span<const std::string> values) const override {
    return fmt::format("(({})({}))", memory_vector_type(t, static_cast<int>(values.size())), fmt::join(values, ", "));
  }
  // vloadN and vstoreN take any alignment of the element; an aligned access goes through a
  // vector pointer, which PoCL writes as one instruction where it splits a vstore16 in three.
  std::string buffer_vector_load(int b, DType t, std::string_view index, int lanes, bool aligned) const override {
    if (aligned) return fmt::format("*(__global const {}*)(b{} + {})", memory_vector_type(t, lanes), b, index);
    return fmt::format("vload{}(0, b{} + {})", lanes, b, index);
  }
  std::string buffer_vector_store(int b, DType t, std::string_view index, int lanes, std::string_view value,
                                  bool aligned) const override {
    if (aligned) return fmt::format("*(__global {}*)(b{} + {}) = {};", memory_vector_type(t, lanes), b, index, value);
    return fmt::format("vstore{}({}, 0, b{} + {});", lanes, value, b, index);
  }

  std::string global_id(DType t) const override { return fmt::format("({})get_global_id(0)", type(t)); }
  std::string global_size(DType t) const override { return fmt::format("({})get_global_size(0)", type(t)); }
  std::string local_id(DType t) const override { return fmt::format("({})get_local_id(0)", type(t)); }
  std::string group_id(DType t) const override { return fmt::format("({})get_group_id(0)", type(t)); }
  std::string group_count(DType t) const override { return fmt::format("({})get_num_groups(0)", type(t)); }
  std::string barrier() const override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }

  std::string_view language() const override { return "OpenCL C"; }
  bool takes_custom(CustomLanguage l) const override { return l == CustomLanguage::OpenCLC; }
  std::string helper_qualifier() const override { return "static inline"; }
  std::string prologue(std::span<const Kernel* const> kernels, bool fp64, bool) const override {
    std::string names;
    for (const Kernel* k : kernels) names += fmt::format(" @{}", k->name);
    // The interpreter rounds every operation: no multiply-add contraction.
    std::string out = fmt::format("// kiln kernels{}\n#pragma OPENCL FP_CONTRACT OFF\n", names);
    if (fp64) out += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    return out;
  }
  std::string local_array(std::string_view name, DType t, int64_t n) const override {
    return fmt::format("__local {} {}[{}];\n", type(t), name, n);
  }
  bool local_arrays_global() const override { return false; }
  std::string entry(const Kernel& k, const Schedule& s) const override {
    std::string params;
    for (size_t b = 0; b < k.buffers.size(); ++b)
      params += fmt::format("{}__global {}{}* b{}", b ? ", " : "", k.buffers[b].written ? "" : "const ",
                            memory_type(k.buffers[b].type.dtype), b);
    for (size_t a = 0; a < k.scalars.size(); ++a)
      params += fmt::format("{}const {} s{}", params.empty() ? "" : ", ", memory_type(k.scalars[a]), a);
    return fmt::format("__kernel __attribute__((reqd_work_group_size({}, 1, 1)))\nvoid {}({}) {{", s.work_items.local_size,
                       k.name.empty() ? "kernel_main" : k.name, params);
  }
  std::string element(int b, std::string_view index) const override { return fmt::format("b{}[{}]", b, index); }
  std::string subscript(std::string_view array, std::string_view index) const override {
    return fmt::format("{}[{}]", array, index);
  }
};

}  // namespace

std::string opencl_source(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                          const Capabilities& caps) {
  static const OpenClDialect dialect;
  return emit_c_program(kernels, schedules, caps, dialect);
}

std::string opencl_gemm_source(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                               std::string_view name, const Capabilities& caps) {
  static const OpenClDialect dialect;
  return emit_c_gemm(g, epilogue, store_product, name, caps, dialect);
}

std::string opencl_attention_source(const LaunchPlan::Attention& a, std::string_view name, const Capabilities& caps) {
  static const OpenClDialect dialect;
  return emit_c_attention(a, name, caps, dialect);
}

int64_t gemm_work_groups(const LaunchPlan::Gemm& g) {
  const GemmSchedule& s = g.schedule;
  return g.batch.numel() * ((g.m + s.group_m - 1) / s.group_m) * ((g.n + s.group_n - 1) / s.group_n);
}

std::string opencl_source(const Kernel& k, const Schedule& s, const Capabilities& caps) {
  const Kernel* kernels[] = {&k};
  const Schedule* schedules[] = {&s};
  return opencl_source(kernels, schedules, caps);
}

}  // namespace kiln::kir
