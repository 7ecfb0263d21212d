// autotune/subjects.cpp - see subject.h.
#include "subject.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::autotune {
namespace {

constexpr const char* kSplitKnob = "split_blocks";

class KernelSubject final : public Subject {
 public:
  KernelSubject(Backend& backend, const kir::Kernel& k, const kir::Schedule& base)
      : Subject(backend), k_(k), base_(base) {}
  std::string describe() const override { return k_.name + " over " + k_.domain_str(); }
  std::vector<kir::Variant> singles() const override {
    return kir::single_knob_variants(k_, base_, backend().capabilities());
  }
  bool legal(const kir::Variant& v) const override {
    return kir::apply_variant(k_, base_, v, backend().capabilities()).has_value();
  }
  void compile(Candidate& c) const override {
    try {
      c.kernels = {backend().compile(k_, schedule(c.variant))};
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  }
  std::vector<std::string> outputs(const Candidate& c) override {
    return bench().outputs(*c.kernels.at(0), schedule(c.variant));
  }
  std::optional<std::string> compare(const std::vector<std::string>& want,
                                     const std::vector<std::string>& got) const override {
    return compare_outputs(k_, want, got);
  }
  double launch_ns(const Candidate& c) override { return bench().launch_ns(*c.kernels.at(0), schedule(c.variant)); }
  double median_ns(const Candidate& c, int repeats, double budget_ms, double warm_up_ms) override {
    return bench().median_ns(*c.kernels.at(0), schedule(c.variant), repeats, budget_ms, warm_up_ms);
  }

 private:
  kir::Schedule schedule(const kir::Variant& v) const {
    return *kir::apply_variant(k_, base_, v, backend().capabilities());
  }
  KernelBench& bench() {
    if (!bench_) bench_ = std::make_unique<KernelBench>(backend(), k_);
    return *bench_;
  }
  const kir::Kernel& k_;
  const kir::Schedule& base_;
  std::unique_ptr<KernelBench> bench_;
};

class GemmSubject final : public Subject {
 public:
  GemmSubject(Backend& backend, const LaunchPlan::Gemm& g) : Subject(backend), g_(g) {}
  // "gemm f32 [8] 128x64 by 64x128": the batch dims, then m x k by k x n.
  std::string describe() const override {
    return fmt::format("gemm {} {}{}x{} by {}x{}", dtype_name(g_.dtype), g_.batch.rank() ? g_.batch.str() + " " : "",
                       g_.m, g_.k, g_.k, g_.n);
  }
  std::vector<kir::Variant> singles() const override {
    return kir::single_knob_gemm_variants(g_, g_.schedule, backend().capabilities());
  }
  bool legal(const kir::Variant& v) const override {
    return kir::apply_gemm_variant(g_, g_.schedule, v, backend().capabilities()).has_value();
  }
  void compile(Candidate& c) const override {
    try {
      LaunchPlan::Gemm g = g_;
      g.schedule = blocking(c.variant);
      backend().prepare_gemm(g);
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  }
  std::vector<std::string> outputs(const Candidate& c) override { return {bench().product(blocking(c.variant))}; }
  std::optional<std::string> compare(const std::vector<std::string>& want,
                                     const std::vector<std::string>& got) const override {
    return compare_products(g_.dtype, want.at(0), got.at(0));
  }
  double launch_ns(const Candidate& c) override { return bench().launch_ns(blocking(c.variant)); }
  double median_ns(const Candidate& c, int repeats, double budget_ms, double warm_up_ms) override {
    return bench().median_ns(blocking(c.variant), repeats, budget_ms, warm_up_ms);
  }

 private:
  kir::GemmSchedule blocking(const kir::Variant& v) const {
    return *kir::apply_gemm_variant(g_, g_.schedule, v, backend().capabilities());
  }
  GemmBench& bench() {
    if (!bench_) bench_ = std::make_unique<GemmBench>(backend(), g_);
    return *bench_;
  }
  const LaunchPlan::Gemm& g_;
  std::unique_ptr<GemmBench> bench_;
};

class SplitSubject final : public Subject {
 public:
  SplitSubject(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for)
      : Subject(backend), site_(site), plan_for_(plan_for) {}
  std::string describe() const override { return "split " + site_.str(); }
  std::vector<kir::Variant> singles() const override {
    std::vector<kir::Variant> out;
    for (int64_t b : site_.blocks)
      if (b != site_.default_blocks) out.push_back(kir::Variant{{{kSplitKnob, b}}});
    return out;
  }
  bool legal(const kir::Variant& v) const override {
    if (v.is_default()) return true;
    return v.settings.size() == 1 && v.settings[0].first == kSplitKnob &&
           std::find(site_.blocks.begin(), site_.blocks.end(), v.settings[0].second) != site_.blocks.end();
  }
  void compile(Candidate& c) const override {
    try {
      auto plan = std::make_shared<LaunchPlan>(plan_for_(split_blocks_of(site_, c.variant)));
      c.kernels = backend().compile_all(plan->kernels, plan->schedules);
      for (const LaunchPlan::Step& step : plan->steps)
        if (step.is_gemm()) backend().prepare_gemm(step.gemm);
      c.plan = std::move(plan);
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  }
  std::vector<std::string> outputs(const Candidate& c) override { return bench().outputs(*c.plan, c.kernels); }
  std::optional<std::string> compare(const std::vector<std::string>& want,
                                     const std::vector<std::string>& got) const override {
    return compare_tensors(std::span<const TensorType>(&site_.result, 1), want, got);
  }
  double launch_ns(const Candidate& c) override { return bench().launch_ns(*c.plan, c.kernels); }
  double median_ns(const Candidate& c, int repeats, double budget_ms, double warm_up_ms) override {
    return bench().median_ns(*c.plan, c.kernels, repeats, budget_ms, warm_up_ms);
  }

 private:
  PlanBench& bench() {
    if (!bench_) bench_ = std::make_unique<PlanBench>(backend(), std::vector<TensorType>{site_.input});
    return *bench_;
  }
  const ReductionSplit& site_;
  const PlanFor& plan_for_;
  std::unique_ptr<PlanBench> bench_;
};

}  // namespace

std::unique_ptr<Subject> kernel_subject(Backend& backend, const kir::Kernel& k, const kir::Schedule& base) {
  return std::make_unique<KernelSubject>(backend, k, base);
}

std::unique_ptr<Subject> gemm_subject(Backend& backend, const LaunchPlan::Gemm& g) {
  return std::make_unique<GemmSubject>(backend, g);
}

std::unique_ptr<Subject> split_subject(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for) {
  return std::make_unique<SplitSubject>(backend, site, plan_for);
}

int64_t split_blocks_of(const ReductionSplit& site, const kir::Variant& v) {
  return v.is_default() ? site.default_blocks : v.settings.at(0).second;
}

}  // namespace kiln::autotune
