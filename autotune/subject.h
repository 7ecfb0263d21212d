// autotune/subject.h - what the autotuner tunes (internal to autotune/): a kernel and the
// knobs of its schedule, a GEMM step and the knobs of its blocking, or a reduction that
// split-reductions cuts into blocks and the knob of its block count.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autotune/autotuner.h"
#include "kiln/autotune/kernel_bench.h"
#include "kiln/backends/backend.h"
#include "kiln/codegen/variants.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::autotune {

/// A candidate on its way through compile, check and timing.
struct Candidate {
  explicit Candidate(kir::Variant v) : variant(std::move(v)) {}
  kir::Variant variant;
  /// What Subject::compile made of it: a kernel subject's one kernel, a split's plan kernels
  /// (a GEMM step's code stays in its backend).
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  std::shared_ptr<const LaunchPlan> plan;  // a split's launch plan
  std::string error;  // why it did not compile
  double compile_ms = 0;
};

/// What Autotuner::tune, confirm and choose see of a subject.
class Subject {
 public:
  explicit Subject(Backend& backend) : backend_(backend) {}
  virtual ~Subject() = default;
  Backend& backend() const { return backend_; }
  virtual std::string describe() const = 0;
  virtual std::vector<kir::Variant> singles() const = 0;
  virtual bool legal(const kir::Variant& v) const = 0;
  /// Compiles `c`, or fills c.error; called from several threads at once (`--jobs`).
  virtual void compile(Candidate& c) const = 0;
  /// The bytes of what `c` writes, from fresh inputs.
  virtual std::vector<std::string> outputs(const Candidate& c) = 0;
  virtual std::optional<std::string> compare(const std::vector<std::string>& want,
                                             const std::vector<std::string>& got) const = 0;
  virtual double launch_ns(const Candidate& c) = 0;
  virtual double median_ns(const Candidate& c, int repeats, double budget_ms, double warm_up_ms) = 0;

 private:
  Backend& backend_;
};

/// A kernel and the knobs of its schedule, around its default `base`.
std::unique_ptr<Subject> kernel_subject(Backend& backend, const kir::Kernel& k, const kir::Schedule& base);

/// A GEMM step and the knobs of its blocking, around its default `g.schedule`.
std::unique_ptr<Subject> gemm_subject(Backend& backend, const LaunchPlan::Gemm& g);

/// The knob `split_blocks` of a reduction: 1 (not cut) or a power of two among
/// ReductionSplit::blocks; the default is ReductionSplit::default_blocks. A candidate is the
/// launch plan of the reduction alone cut that way (`plan_for`, from the engine: the
/// pipeline and lowering are above this layer), every kernel at its default schedule.
using PlanFor = Autotuner::PlanFor;
std::unique_ptr<Subject> split_subject(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for);
/// The block count a legal variant of split_subject names.
int64_t split_blocks_of(const ReductionSplit& site, const kir::Variant& v);

}  // namespace kiln::autotune
