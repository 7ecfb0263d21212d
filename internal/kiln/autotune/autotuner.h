// kiln/autotune/autotuner.h - the fastest legal schedule of a kernel (or blocking of a GEMM
// step) on a device, found by timing variants and remembered in the tuning database.
//
// Tuning a kernel (a GEMM step's blocking and a split reduction's block count alike): its
// default schedule and the single-knob variants of it (kir::single_knob_variants) are
// compiled, each run once on made-up inputs and compared with the default's output (a
// variant that differs is recorded Wrong and never chosen), then timed; last, the
// combination of every knob's best value is tried. Every outcome is a row of the database,
// written before the variant is compiled as Running, so a variant that crashes the process
// is found Failed by the next one and not retried. The choice is the fastest Ok variant,
// kept only when it beats the default by more than the noise (kMinGain) once more when both
// are timed again in alternation; a stored variant that is no longer legal for the kernel
// is skipped.
//
// Modes (KILN_AUTOTUNE): `off` runs default schedules; `cached` (the default) runs what the
// database chose and tunes nothing; `on` also tunes a kernel the database lacks, on the
// thread that first needs it, while other threads and processes run the default meanwhile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/autotune/tuning_db.h"
#include "kiln/backends/backend.h"
#include "kiln/codegen/variants.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::autotune {

enum class Mode : uint8_t { Off, Cached, On };
/// $KILN_AUTOTUNE: off, cached (unset or empty) or on. Throws kiln::Error on another value.
Mode mode_from_env();

/// How tuning spends its time.
struct TuneOptions {
  /// Wall time the timing of one kernel may take, all candidates together (milliseconds);
  /// candidates left when it runs out are measured by a later tuning.
  double budget_ms = 3000;
  /// Candidates compiled at once (`kiln autotune warmup --jobs`); timing is always serial.
  int jobs = 1;
  /// Timed launches per candidate (the median is kept).
  int repeats = 9;
  /// Launches before a candidate's timed ones last at least this long (one launch when it
  /// takes longer). Unset: the device's default (default_warm_up_ms).
  std::optional<double> warm_up_ms;
  /// A candidate whose compile takes longer than this is recorded Failed.
  double compile_cap_ms = 10000;
  /// A candidate whose second run takes this many times the default's (and over 50 ms) is
  /// recorded Failed: it would only slow the tuning down.
  double slowdown_cap = 20;
};

/// How long each candidate runs before it is timed on a device with `caps`: 300 ms on a GPU,
/// whose clocks fall while candidates compile and their outputs are compared (an H100 under
/// Vulkan timed W3's kernel at 462 us after 10 ms, at 178 us after 300 ms, and at 180-210 us
/// within the workload); 10 ms elsewhere (code, page tables, the task scheduler).
double default_warm_up_ms(const Capabilities& caps);

/// What tuning one kernel found.
struct TuneReport {
  TuningKey key;
  std::string description;     // "k0 over [64, reduce 1000]"
  kir::Variant chosen;         // the default when nothing beat it
  double default_ns = 0, tuned_ns = 0;
  int candidates = 0;          // variants with a row now (the default included)
  int measured_now = 0;        // of those, measured by this call
  int failed = 0, wrong = 0;
  bool claimed_elsewhere = false;  // another process was tuning it: nothing measured
};

/// A stored choice replaces the default only when it is faster by more than this fraction.
inline constexpr double kMinGain = 0.03;
/// Whether a variant timed at `ns` beats the default's `default_ns` by more than the noise.
inline bool beats_default(double ns, double default_ns) { return ns < default_ns * (1 - kMinGain); }

class Subject;  // what is tuned: a kernel, a GEMM step or a split reduction (subject.h)

class Autotuner {
 public:
  /// The process's tuner, its database in DiskCache::default_root().
  static Autotuner& instance();
  /// A tuner over the database in `dir` (tests, `kiln cache`); empty: in memory.
  explicit Autotuner(const std::filesystem::path& dir);

  TuningDb& db() { return *db_; }

  /// The id `backend`'s device is filed under: 16 hex digits of a hash of its
  /// device_fingerprint().
  static std::string device_id(const Backend& backend);
  /// The key `k` is filed under on `backend`.
  TuningKey key_for(Backend& backend, const kir::Kernel& k);

  /// The schedule `k` runs with on `backend` in `mode` (see the header comment): `base`
  /// (its default schedule), or the database's legal choice, tuned first when `mode` is On,
  /// nothing has been measured for it, no other thread or process is tuning it, and
  /// compiling is allowed (KILN_NO_COMPILE unset).
  kir::Schedule schedule_for(Backend& backend, const kir::Kernel& k, const kir::Schedule& base, Mode mode);

  /// Tunes `k` now: measures the candidates that have no row yet, within `options`.
  TuneReport tune(Backend& backend, const kir::Kernel& k, const kir::Schedule& base, const TuneOptions& options);
  /// tune() under the key's claim; when another live process holds it, the database's
  /// current choice, marked `claimed_elsewhere`, and nothing measured.
  TuneReport tune_unless_claimed(Backend& backend, const kir::Kernel& k, const kir::Schedule& base,
                                 const TuneOptions& options);

  /// The database's choice for `k` (the default when none is legal and faster), with the
  /// times it was chosen on (0 when unmeasured).
  TuneReport choice(Backend& backend, const kir::Kernel& k, const kir::Schedule& base);

  // ---- GEMM steps: the same for the blocking of a product, `g.schedule` its default ----
  TuningKey gemm_key_for(Backend& backend, const LaunchPlan::Gemm& g);
  kir::GemmSchedule gemm_schedule_for(Backend& backend, const LaunchPlan::Gemm& g, Mode mode);
  TuneReport tune_gemm(Backend& backend, const LaunchPlan::Gemm& g, const TuneOptions& options);
  TuneReport tune_gemm_unless_claimed(Backend& backend, const LaunchPlan::Gemm& g, const TuneOptions& options);
  TuneReport gemm_choice(Backend& backend, const LaunchPlan::Gemm& g);

  // ---- Reductions split-reductions cuts into blocks: the knob `split_blocks` of `site` (its
  // default: site.default_blocks), timed on `plan_for(n)`, the launch plan of the reduction
  // alone cut into n blocks (1: not cut) with default schedules, which the engine makes ----
  using PlanFor = std::function<LaunchPlan(int64_t blocks)>;
  TuningKey split_key_for(Backend& backend, const ReductionSplit& site);
  /// The block count to cut `site` into in `mode` (schedule_for's rules).
  int64_t split_blocks_for(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for, Mode mode);
  TuneReport tune_split(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for,
                        const TuneOptions& options);
  TuneReport tune_split_unless_claimed(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for,
                                       const TuneOptions& options);
  TuneReport split_choice(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for);

 private:
  /// The key of a structure and bucket on `backend`'s device (named in the database once).
  TuningKey filed(Backend& backend, std::string structure, std::string bucket);
  /// The variant `subject` runs with in `mode` (schedule_for's rules).
  kir::Variant variant_for(const TuningKey& key, Subject& subject, Mode mode);
  TuneReport tune(const TuningKey& key, Subject& subject, const TuneOptions& options);
  TuneReport tune_unless_claimed(const TuningKey& key, Subject& subject, const TuneOptions& options);
  /// The database's choice for a key (see choice()).
  TuneReport choose(const TuningKey& key, const Subject& subject);
  void confirm(const TuningKey& key, Subject& subject, const TuneOptions& options);
  std::unique_ptr<TuningDb> db_;
  std::mutex mutex_;
  std::set<std::string> tuning_;  // keys a thread of this process is tuning now
  std::set<std::string> tuned_;   // keys this process tuned (never again in this process)
  std::set<std::string> described_;  // device ids named in the database by this process
};

}  // namespace kiln::autotune
