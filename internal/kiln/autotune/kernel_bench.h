// kiln/autotune/kernel_bench.h - one kernel or GEMM step on a backend, on made-up inputs, run
// and timed.
//
// The autotuner measures a kernel alone, not inside its graph: every buffer parameter gets
// device memory of its type, filled from a seeded generator (floats uniform in [-1, 1),
// integers in [-8, 8), bools fair), and every scalar argument a fixed value. Timing rotates
// over enough copies of the buffers that the ones a launch reads were not left in cache by
// the launch before it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/codegen/lower.h"

namespace kiln::autotune {

class KernelBench {
 public:
  /// Buffers for `k` on `backend`. Throws kiln::Error when they cannot be allocated.
  KernelBench(Backend& backend, const kir::Kernel& k, uint64_t seed = 1);

  /// The bytes of every written buffer after one launch of `compiled` with `s`, from freshly
  /// uploaded inputs (a kernel that writes a buffer it reads sees the same values each time).
  std::vector<std::string> outputs(const CompiledKernel& compiled, const kir::Schedule& s);

  /// The wall time of one launch in nanoseconds.
  double launch_ns(const CompiledKernel& compiled, const kir::Schedule& s);

  /// The median wall time of a launch in nanoseconds, after warm-up launches that take at
  /// least `warm_up_ms` (one when it takes longer): `repeats` launches, or fewer when they
  /// pass `budget_ms` (at least 3).
  double median_ns(const CompiledKernel& compiled, const kir::Schedule& s, int repeats, double budget_ms,
                   double warm_up_ms);

 private:
  void launch(const CompiledKernel& compiled, const kir::Schedule& s, size_t copy);
  Backend& backend_;
  const kir::Kernel& kernel_;
  std::vector<std::string> initial_;  // per buffer: its bytes before a launch
  std::vector<std::vector<std::shared_ptr<DeviceMemory>>> copies_;  // [copy][buffer]
  std::vector<Scalar> scalars_;
};

/// A GEMM step alone on a backend, the same way: A and B filled as a kernel's inputs, C
/// written by Backend::gemm, copies rotated while timing.
class GemmBench {
 public:
  /// Buffers for `g` (its buffer indices are ignored). Throws kiln::Error when they cannot
  /// be allocated.
  GemmBench(Backend& backend, const LaunchPlan::Gemm& g, uint64_t seed = 1);

  /// C's bytes after one product blocked as `s`.
  std::string product(const kir::GemmSchedule& s);
  /// The wall time of one product in nanoseconds.
  double launch_ns(const kir::GemmSchedule& s);
  /// As KernelBench::median_ns.
  double median_ns(const kir::GemmSchedule& s, int repeats, double budget_ms, double warm_up_ms);

 private:
  void launch(const kir::GemmSchedule& s, size_t copy);
  Backend& backend_;
  LaunchPlan::Gemm gemm_;  // buffers 0, 1, 2 of each copy: A, B, C
  std::vector<std::vector<std::shared_ptr<DeviceMemory>>> copies_;
  int64_t c_bytes_ = 0;
};

/// A launch plan (kernel and GEMM steps) alone on a backend, on made-up values of its
/// parameters that are the same for every plan over parameters of the same types: how a
/// graph-level knob (`split_blocks`, which changes the kernels themselves) is timed. Each run
/// allocates its temporaries and outputs, as the engine does; the parameters' copies rotate.
class PlanBench {
 public:
  using Kernels = std::span<const std::shared_ptr<const CompiledKernel>>;
  /// Buffers for parameters of `params`. Throws kiln::Error when they cannot be allocated.
  PlanBench(Backend& backend, std::vector<TensorType> params, uint64_t seed = 1);

  /// The bytes of each output of `plan` (its kernels compiled as `kernels`) after one run.
  /// Throws kiln::Error for a plan that binds launch scalars or overwrites a parameter.
  std::vector<std::string> outputs(const LaunchPlan& plan, Kernels kernels);
  /// The wall time of one run in nanoseconds.
  double launch_ns(const LaunchPlan& plan, Kernels kernels);
  /// As KernelBench::median_ns.
  double median_ns(const LaunchPlan& plan, Kernels kernels, int repeats, double budget_ms, double warm_up_ms);

 private:
  /// Runs `plan` on parameter copy `copy`; its outputs' memory goes to `outputs`.
  void run(const LaunchPlan& plan, Kernels kernels, size_t copy,
           std::vector<std::shared_ptr<DeviceMemory>>* outputs = nullptr);
  Backend& backend_;
  std::vector<TensorType> params_;
  std::vector<std::vector<std::shared_ptr<DeviceMemory>>> copies_;  // [copy][parameter]
};

/// Where `got` differs from `want` beyond what reassociating a float reduction explains, as
/// "buffer #1 element 17: 0.25 vs 0.5" (nullopt when they agree). Integers, bools and the
/// positions of NaNs must match exactly; a float may differ by 1e-3 relative to the larger
/// of itself and the buffer's largest magnitude times 1e-4 (f64: 1e-9 and 1e-12).
std::optional<std::string> compare_outputs(const kir::Kernel& k, const std::vector<std::string>& want,
                                           const std::vector<std::string>& got);
/// The same for two results of a plan, one per tensor of `types` (reported as buffer #i).
std::optional<std::string> compare_tensors(std::span<const TensorType> types, const std::vector<std::string>& want,
                                           const std::vector<std::string>& got);
/// The same for two products of a GEMM step of `dtype` (reported as buffer #0).
std::optional<std::string> compare_products(DType dtype, const std::string& want, const std::string& got);

}  // namespace kiln::autotune
