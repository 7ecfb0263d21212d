// kiln/codegen/c_source.h - Kernel IR printed as source for the C-family backends.
//
// One emitter walks every kernel (codegen/c_emitter.cpp); a dialect per language says how
// it is spelled. The kernel's entry point is named after the kernel (`k0`), takes its
// buffers (`b0, b1...`, Kernel::buffers order, bool as one byte) and then its scalar
// arguments (`s0, s1...`, Kernel::scalars order), and runs on the schedule's launch geometry:
// `global_size` work-items in groups of `local_size`.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/lower.h"
#include "kiln/codegen/schedule.h"

namespace kiln::kir {

/// OpenCL C (1.2 and later) for a device with `caps`: one program holding every kernel of
/// `kernels` (`kernels[i]` run with `schedules[i]`), each entry point named after its kernel.
/// A driver builds such a program at a fixed cost, whatever the number of kernels in it.
std::string opencl_source(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                          const Capabilities& caps);
/// The kernels (by index) that may share one program, in groups: a program holds each
/// custom kernel's source once, so two kernels that compile it with different macro values
/// (Schedule::custom_macros) go to different programs. Without custom kernels: one group.
std::vector<std::vector<size_t>> custom_macro_groups(std::span<const Kernel* const> kernels,
                                                     std::span<const Schedule* const> schedules);
/// The program of one kernel.
std::string opencl_source(const Kernel& k, const Schedule& s, const Capabilities& caps);

/// The elementwise kernel that follows a GEMM step, computed inside the GEMM's kernel on each
/// element of the product while it is in a register: `kernel`'s domain is the product's
/// shape, and it reads its buffer `product_param` (the product) only at its own position
/// (gemm_epilogue_iterations_per_row checks both).
struct GemmEpilogueSource {
  const Kernel& kernel;
  int32_t product_param = -1;
};
/// The epilogue a device computes inside GEMM step `step` of `plan`: the next step's kernel
/// when gemm_epilogue_iterations_per_row allows it, with the parameter it reads the product
/// through (-1: none); nullopt when the GEMM has none.
std::optional<GemmEpilogueSource> gemm_epilogue_source(const LaunchPlan& plan, size_t step);
/// A GEMM step (`g`, run as the GPU form of `g.schedule`) as an OpenCL C program of one
/// kernel named `name`: work-group tiles in local memory, a register block per work-item,
/// launched as (tiles of C) x (batch) work-groups of `g.schedule.local_size()` work-items. Its
/// parameters are A, B and C, then `epilogue`'s buffers and scalars. `store_product` false:
/// C is not written (only the epilogue's outputs are read later).
std::string opencl_gemm_source(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                               std::string_view name, const Capabilities& caps);
/// Whether a C-family work-item with `lanes` lanes (Schedule::vector_width) can hold each
/// value of `k` that varies along the last dim as one vector, in a language that computes
/// on vectors (CDialect::vector_values): every such value is an f32 or f64 load, store,
/// conversion or reduction, or an op with a vector form (arithmetic, max/min, relu, exp,
/// log, tanh, erf, sqrt, rsqrt, sigmoid), read and written contiguously along the lanes,
/// and every such position only addresses those reads and writes. Otherwise the emitter
/// writes the lanes one by one in scalar code. Beyond `lanes` dividing the last dim, the
/// answer is the same for every number of lanes.
bool c_lanes_as_vectors(const Kernel& k, int lanes);
/// At most how many loop iterations one work-item runs in the C-family kernel of `k` run
/// with `s` (every loop the emitter writes, nested ones multiplied, and the loops of the
/// GLSL fmod helper each point may call), or of GEMM step `g` with `epilogue` computed on
/// each element of its register block. What Capabilities::max_loop_iterations is checked
/// against.
int64_t c_loop_iterations(const Kernel& k, const Schedule& s, const Capabilities& caps);
int64_t c_gemm_loop_iterations(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue = nullptr);
/// Whether GEMM step `g` may compute `epilogue` in its registers on a device of `caps`:
/// within its loop budget (an epilogue of fmods may not be: lavapipe). When it may not,
/// the epilogue runs as its own kernel after the product.
bool gemm_epilogue_fits(const LaunchPlan::Gemm& g, const GemmEpilogueSource& epilogue, const Capabilities& caps);
/// GLSL 4.50 for Vulkan (codegen/glsl_dialect.cpp): a compute shader of one kernel, named
/// `main` as GLSL requires. Buffers are std430 storage blocks at bindings 0, 1... of set 0
/// (Kernel::buffers order, bool as uint8_t), scalars push constants in Kernel::scalars order
/// (bool as uint), the work-group size specialization constant 0. Throws kiln::Error naming
/// the function for what GLSL cannot compute (exp, log, tanh, sin, cos, pow, erf on f64).
std::string glsl_source(const Kernel& k, const Schedule& s, const Capabilities& caps);
/// A GEMM step as a GLSL compute shader: opencl_gemm_source's kernel in the GLSL dialect.
std::string glsl_gemm_source(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                             const Capabilities& caps);

/// What the kernel of GEMM step `g` depends on: the step, the epilogue computed in it,
/// whether it stores the product, and the backend's fingerprint. The canonical text a
/// backend's kernel caches key the kernel by.
std::string gemm_canonical(const LaunchPlan::Gemm& g, const GemmEpilogueSource* epilogue, bool store_product,
                           std::string_view fingerprint);

/// An attention step (`a`, run as the GPU form of `a.schedule`) as an OpenCL C program of
/// one kernel named `name` (codegen/c_attention.cpp): a work-item per query row with an
/// online softmax, launched as attention_work_groups(a) work-groups of
/// `a.schedule.local_size`. Its parameters are q, k, v, the bias when there is one, and out.
std::string opencl_attention_source(const LaunchPlan::Attention& a, std::string_view name, const Capabilities& caps);
/// The same kernel as a GLSL compute shader.
std::string glsl_attention_source(const LaunchPlan::Attention& a, const Capabilities& caps);
int64_t attention_work_groups(const LaunchPlan::Attention& a);
/// At most how many loop iterations a work-item of that kernel runs.
int64_t c_attention_loop_iterations(const LaunchPlan::Attention& a);
/// Whether a device of `caps` runs attention step `a`: always on the cpu; on a work-group
/// device, within its loop budget and with the depth and width in a work-item's registers.
/// compile_graph leaves the attention unfused where it does not.
bool attention_fits(const LaunchPlan::Attention& a, const Capabilities& caps);
/// What the kernel of attention step `a` depends on, with the backend's fingerprint.
std::string attention_canonical(const LaunchPlan::Attention& a, std::string_view fingerprint);

/// How a device names itself and the features f64 and i64 need, for the errors below.
struct DeviceNames {
  std::string device;       // "opencl:0 (pthread-skylake...)"
  std::string f64_feature;  // "cl_khr_fp64", "shaderFloat64"
  std::string i64_feature;
  std::string storage16_feature = "16-bit storage buffers";
};
/// Throws kiln::Error naming the kernel, the op, the dtype and the missing feature when `k`
/// computes a value of a dtype `caps` lacks (f64, i64), or has a buffer of 16-bit elements on
/// a device without them: an error at compile time, never a wrong answer.
void check_dtypes(const Kernel& k, const Capabilities& caps, const DeviceNames& names);
/// The same for a matmul of `dtype`.
void check_matmul_dtype(DType dtype, const Capabilities& caps, const DeviceNames& names);

/// The work-groups opencl_gemm_source's kernel runs in.
int64_t gemm_work_groups(const LaunchPlan::Gemm& g);

}  // namespace kiln::kir
