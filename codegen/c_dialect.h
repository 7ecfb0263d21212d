// codegen/c_dialect.h - what differs between the C-family languages kiln prints kernels in.
//
// One emitter (c_emitter.cpp) prints every kernel: its walk over the domain, expressions,
// casts, reductions in local memory. A dialect says how the target language spells the
// parts that differ: type names, bit casts, literals, work-item built-ins, barriers, local
// memory, and the kernel's entry point with its buffers and scalars. OpenCL C is the first
// dialect (opencl_dialect.cpp), GLSL for Vulkan the second (glsl_dialect.cpp).
#pragma once

#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kiln/codegen/c_source.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kiln/support/error.h"

namespace kiln::kir {

class CDialect {
 public:
  virtual ~CDialect() = default;

  /// The type of a value held in a variable (bool: the language's boolean).
  virtual std::string type(DType t) const = 0;
  /// The type of an element in a buffer (bool: one byte; f16 and bf16: their 16 bits, as
  /// an unsigned integer).
  virtual std::string memory_type(DType t) const = 0;
  /// The bits of f32 `x` as a 32-bit unsigned integer, and back.
  virtual std::string f32_bits(std::string_view x) const = 0;
  virtual std::string bits_f32(std::string_view x) const = 0;
  /// The unsigned integer type of the same width as `t` (I32 or I64).
  virtual std::string unsigned_type(DType t) const = 0;
  /// `expr` (an integer of `from`'s width) with its bits read as `to` (same width).
  virtual std::string bitcast(std::string_view expr, DType from_signed, bool to_unsigned) const = 0;
  /// A literal of float type `t`, exact (NaN and infinities included).
  virtual std::string float_literal(double v, DType t) const = 0;
  /// A zero of type `t` (-0.0 where `negative`; bool: false) as a value of the entry point's
  /// body: the literal, except where the language's compilers fold arithmetic with a known
  /// zero in ways IEEE 754 does not allow (x + 0.0 to x, x * 0.0 to 0.0).
  virtual std::string zero_value(DType t, bool negative) const {
    if (t == DType::Bool) return "false";
    return is_float(t) ? float_literal(negative ? -0.0 : 0.0, t) : int_literal(0, t);
  }
  /// A literal of integer type `t`, valid for the type's minimum too.
  virtual std::string int_literal(int64_t v, DType t) const = 0;
  /// The qualifier of a variable assigned once: "const " where the language takes a run-time
  /// initializer (C, OpenCL C), "" where const means a compile-time constant (GLSL).
  virtual std::string let() const = 0;
  /// `x`, a primary expression (a name, a call, or parenthesized), converted by value to the
  /// type spelled `type`: `((float)x)`, `float(x)`.
  virtual std::string convert(std::string_view x, std::string_view type) const = 0;
  /// `x` (a name: it may be read twice) converted to integer type `to` toward zero, saturating,
  /// NaN to 0.
  virtual std::string float_to_int(std::string_view x, DType from, DType to) const = 0;
  /// `x` (a name: it may be read twice), an I32, sign-extended to I64.
  virtual std::string widen_i32(std::string_view x) const { return convert(x, type(DType::I64)); }
  /// Whether `x` is NaN; whether its sign bit is set.
  virtual std::string is_nan(std::string_view x) const = 0;
  virtual std::string sign_bit(std::string_view x, DType t) const = 0;
  /// Whether float `x` (a name) is +0 or -0, and only those: a subnormal is not zero even on
  /// a device that flushes subnormals in arithmetic and comparisons.
  virtual std::string is_zero(std::string_view x, DType t) const { return fmt::format("({} == {})", x, float_literal(0, t)); }
  /// The name of a math function for `t` (exp, log, sqrt, sin, cos, tanh, erf, pow, floor, ceil).
  virtual std::string math(std::string_view fn, DType t) const = 0;
  /// Whether the language has a double-precision `fn` (GLSL lacks exp, sin...): where it
  /// does not, the emitter computes an f32 `fn` in f32 rather than through double.
  virtual bool double_math(std::string_view fn) const = 0;
  /// The definition of helper `name`, for the helpers the dialect supplies itself (a
  /// function `math` names `kiln_...` that the language lacks); "" for none.
  virtual std::string helper(std::string_view name) const { (void)name; return ""; }
  /// How kiln's own f32 math (c_f32_math_helper) is spelled on `lanes` floats (1, or more
  /// where vector_values()): the float and unsigned types, and the functions that take a
  /// float's bits as unsigned, make a float of them, take unsigned bits as signed and back,
  /// and convert a signed integer to float.
  struct MathSpelling {
    std::string float_type, uint_type, to_bits, from_bits, to_signed, to_unsigned, signed_to_float;
  };
  virtual MathSpelling math_spelling(int lanes) const = 0;
  /// The helper that divides two values of float type `t` where the language's `/` cannot be
  /// trusted with IEEE 754's special values ("" for `/`).
  virtual std::string divide(DType t) const { (void)t; return ""; }
  /// The helper that converts i64 to f32 rounding through f64, as the interpreter does, where
  /// the language's compilers fold the two conversions into one ("" for the two casts).
  virtual std::string i64_to_f32() const { return ""; }

  /// Vectors of `lanes` (2, 4, 8 or 16) elements of `t`: the type, `lanes` consecutive
  /// elements of `array` from element `index` (any alignment of the element type), `x` in
  /// every lane, and lane `i` of vector `v`.
  virtual std::string vector_type(DType t, int lanes) const = 0;
  virtual std::string vector_load(std::string_view array, std::string_view index, int lanes) const = 0;
  virtual std::string vector_splat(std::string_view x, DType t, int lanes) const = 0;
  virtual std::string vector_lane(std::string_view v, int i) const = 0;

  /// Whether the language computes on vectors (OpenCL C's float16: arithmetic, comparisons
  /// that select through `?:`, the math built-ins, element-wise conversions), so that a
  /// work-item's lanes of a value are one vector variable where the kernel allows it
  /// (c_lanes_as_vectors). Where it is true: `x`, a vector of `lanes`, converted element by
  /// element to `to`. (Such vectors are also elements of private arrays, and buffers are
  /// read and written a vector at a time: memory_vector_type.)
  virtual bool vector_values() const { return false; }
  virtual std::string vector_convert(std::string_view x, DType to, int lanes) const {
    (void)x, (void)to, (void)lanes;
    KILN_ASSERT(false, "a vector conversion in a dialect without vector values");
  }

  /// Buffers read and written a vector at a time: the type of `lanes` elements of a buffer of
  /// `t` as they lie in memory, or "" where the language reads and writes buffers element by
  /// element only (GLSL: a storage buffer is an array of scalars, and a vector view of it
  /// needs a second binding). Where it is not "": the vector of that type made of `values`
  /// (one per lane, in memory form); `lanes` consecutive elements of buffer `b` (of `t`) from
  /// element `index` in one load; and the statement that writes vector `value` of the
  /// buffer's type there in one store. An access is `aligned` where `index` is a multiple of `lanes` and
  /// the device aligns buffers to the vector's size (Capabilities::buffer_alignment);
  /// otherwise any alignment of the element type.
  virtual std::string memory_vector_type(DType t, int lanes) const { (void)t, (void)lanes; return ""; }
  virtual std::string memory_vector(DType t, std::span<const std::string> values) const {
    (void)t, (void)values;
    KILN_ASSERT(false, "a vector in a dialect without memory vectors (memory_vector_type is empty)");
  }
  virtual std::string buffer_vector_load(int b, DType t, std::string_view index, int lanes, bool aligned) const {
    (void)b, (void)t, (void)index, (void)lanes, (void)aligned;
    KILN_ASSERT(false, "a vector load in a dialect without them (memory_vector_type is empty)");
  }
  virtual std::string buffer_vector_store(int b, DType t, std::string_view index, int lanes,
                                          std::string_view value, bool aligned) const {
    (void)b, (void)t, (void)index, (void)lanes, (void)value, (void)aligned;
    KILN_ASSERT(false, "a vector store in a dialect without them (memory_vector_type is empty)");
  }

  /// Work-item geometry, as expressions of the index type `t` (I64, or I32 where the
  /// schedule's index_bits is 32).
  virtual std::string global_id(DType t) const = 0;
  virtual std::string global_size(DType t) const = 0;
  virtual std::string local_id(DType t) const = 0;
  virtual std::string group_id(DType t) const = 0;
  virtual std::string group_count(DType t) const = 0;
  /// Subgroups (asked for only where Capabilities::subgroup_size > 1): the lanes of one, the
  /// subgroup's index in its work-group, the lane's index in its subgroup, the subgroups of a
  /// work-group, all as expressions of type `t`; and `x` (a name, of type `t`) from the lane
  /// whose index is this lane's xor `mask` (an I32 expression).
  virtual std::string subgroup_size(DType t) const { return no_subgroups(t); }
  virtual std::string subgroup_id(DType t) const { return no_subgroups(t); }
  virtual std::string subgroup_local_id(DType t) const { return no_subgroups(t); }
  virtual std::string subgroup_count(DType t) const { return no_subgroups(t); }
  virtual std::string subgroup_shuffle_xor(std::string_view x, std::string_view mask, DType t) const {
    (void)x, (void)mask;
    return no_subgroups(t);
  }
  /// Waits for the work-group, making its local-memory writes visible.
  virtual std::string barrier() const = 0;

  /// The language's name in messages ("OpenCL C"), and whether it compiles custom kernels
  /// written in `l` (pasted into the program, called by name).
  virtual std::string_view language() const = 0;
  virtual bool takes_custom(CustomLanguage l) const { (void)l; return false; }
  /// The qualifier of helper functions ("static inline" or "").
  virtual std::string helper_qualifier() const = 0;
  /// What comes before the helpers of a program holding `kernels`: version, pragmas,
  /// extensions (`fp64`: doubles are used; `subgroups`: subgroup operations are).
  virtual std::string prologue(std::span<const Kernel* const> kernels, bool fp64, bool subgroups) const = 0;
  /// An array of `n` elements of `t` in work-group memory, named `name`.
  virtual std::string local_array(std::string_view name, DType t, int64_t n) const = 0;
  /// Whether local arrays are declared outside the entry point (GLSL) or inside it (OpenCL C).
  virtual bool local_arrays_global() const = 0;
  /// The entry point's opening, up to and including "{": buffers `b0, b1...` (Kernel::buffers
  /// order) and scalars `s0, s1...` (Kernel::scalars order, bool as one byte).
  virtual std::string entry(const Kernel& k, const Schedule& s) const = 0;
  /// Element `index` of buffer `b` as an lvalue.
  virtual std::string element(int b, std::string_view index) const = 0;
  /// Element `index` (an integer of any width) of a local or private array.
  virtual std::string subscript(std::string_view array, std::string_view index) const = 0;

 private:
  static std::string no_subgroups(DType) {
    KILN_ASSERT(false, "subgroup operations in a dialect without them (Capabilities::subgroup_size must be 1)");
  }
};

/// One program in `dialect` holding every kernel of `kernels`, `kernels[i]` run with
/// `schedules[i]`: the prologue and each helper function once, then the entry points (named
/// after the kernels). `caps` says whether doubles may be used to round f32 operations
/// exactly as the interpreter does (see c_emitter.cpp).
std::string emit_c_program(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                           const Capabilities& caps, const CDialect& dialect);

/// The statements that compute elementwise kernel `k` (no reduced dims) at one point of its
/// domain and store what it stores there, for a caller that has defined the dims as `d0,
/// d1...` (i64), the buffers and the scalars as the kernel's entry point names them. Loads of
/// buffer `replaced_buffer` (when >= 0) read `replacement` instead: a caller that holds the
/// value in a register (a GEMM's accumulator under its epilogue). Each line is indented by
/// `indent` levels; the helper functions it calls are added to `helpers`.
std::string emit_c_point(const Kernel& k, const Capabilities& caps, const CDialect& dialect, std::set<std::string>& helpers,
                         int indent, int replaced_buffer, std::string_view replacement);
/// A GEMM step as one kernel named `name` (c_gemm.cpp), tiled as the GPU form of
/// `g.schedule` says, with `epilogue` computed on each element of the product in registers.
std::string emit_c_gemm(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                        std::string_view name, const Capabilities& caps, const CDialect& dialect);
/// An attention step as one kernel named `name` (c_attention.cpp). Throws kiln::Error where
/// it does not fit the device (attention_fits).
std::string emit_c_attention(const LaunchPlan::Attention& a, std::string_view name, const Capabilities& caps,
                             const CDialect& dialect);
/// Loop iterations the helpers one point of `k` calls may run at worst (the GLSL fmod's).
int64_t helper_iterations_per_point(const Kernel& k);
/// Throws kiln::Error naming `what` where `iterations` (c_loop_iterations,
/// c_gemm_loop_iterations) exceed Capabilities::max_loop_iterations.
void check_loop_budget(int64_t iterations, const Capabilities& caps, std::string_view what);
/// kiln's own f32 `fn` (exp, log, tanh or erf: internal/kiln/codegen/f32_math.h) as helper
/// function `name` of `dialect`'s language on `lanes` floats.
std::string c_f32_math_helper(const CDialect& dialect, std::string_view fn, std::string_view name, int lanes = 1);

/// The helper functions named in `helpers` (kiln_max_f32, kiln_rand_f32...), each once.
std::string emit_c_helpers(const std::set<std::string>& helpers, const CDialect& dialect);
/// An entry point's header (CDialect::entry) with its local-memory arrays: before it where
/// the dialect declares them at file scope, else at the top of its body.
std::string entry_with_locals(const CDialect& dialect, std::string_view header, std::string_view locals);

}  // namespace kiln::kir
