// autotune/autotuner.cpp - see kiln/autotune/autotuner.h.
#include "kiln/autotune/autotuner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "kiln/autotune/kernel_bench.h"
#include "kiln/ir/hash.h"
#include "kiln/runtime/compile_policy.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/support/error.h"
#include "kiln/support/log.h"
#include "subject.h"

namespace kiln::autotune {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void compile_batch(const Subject& subject, std::vector<Candidate>& batch, int jobs) {
  auto one = [&](Candidate& c) {
    const auto t0 = Clock::now();
    subject.compile(c);
    c.compile_ms = ms_since(t0);
  };
  if (jobs <= 1 || batch.size() <= 1) {
    for (Candidate& c : batch) one(c);
    return;
  }
  std::vector<std::thread> workers;
  std::atomic<size_t> next{0};
  for (int j = 0; j < std::min<int>(jobs, static_cast<int>(batch.size())); ++j)
    workers.emplace_back([&] {
      for (size_t i = next++; i < batch.size(); i = next++) one(batch[i]);
    });
  for (std::thread& w : workers) w.join();
}

}  // namespace

double default_warm_up_ms(const Capabilities& caps) {
  const bool gpu = caps.family == DeviceFamily::WorkItems && !caps.emulated_work_groups;
  return gpu ? 300 : 10;
}

Mode mode_from_env() {
  const char* v = std::getenv("KILN_AUTOTUNE");
  const std::string_view s = v ? v : "";
  if (s.empty() || s == "cached") return Mode::Cached;
  if (s == "off") return Mode::Off;
  if (s == "on") return Mode::On;
  throw Error(fmt::format("KILN_AUTOTUNE={}: expected off, cached or on", s));
}

Autotuner& Autotuner::instance() {
  static Autotuner tuner(DiskCache::default_root());
  return tuner;
}

Autotuner::Autotuner(const std::filesystem::path& dir) : db_(TuningDb::open(dir)) {}

std::string Autotuner::device_id(const Backend& backend) {
  return hash_text(backend.device_fingerprint()).hex().substr(0, 16);
}

TuningKey Autotuner::key_for(Backend& backend, const kir::Kernel& k) {
  return filed(backend, hash_text(kir::kernel_structure(k)).hex(), kir::shape_bucket(k));
}

TuningKey Autotuner::gemm_key_for(Backend& backend, const LaunchPlan::Gemm& g) {
  return filed(backend, hash_text(kir::gemm_structure(g)).hex(), kir::gemm_shape_bucket(g));
}

TuningKey Autotuner::filed(Backend& backend, std::string structure, std::string bucket) {
  TuningKey key{device_id(backend), std::move(structure), std::move(bucket)};
  // Once per device and process: every plan compiled asks for keys, and a write costs a
  // transaction.
  bool described = false;
  {
    std::lock_guard lock(mutex_);
    described = !described_.insert(key.device).second;
  }
  if (!described)
    db_->describe_device(key.device, backend.device_fingerprint(),
                         fmt::format("{}: {}", backend.name(), backend.device_name()));
  return key;
}

TuningKey Autotuner::split_key_for(Backend& backend, const ReductionSplit& site) {
  // The structure is the reduction without its extents; the bucket is the exact input
  // shape, whose divisors decide the legal block counts.
  std::string axes;
  for (int64_t a : site.axes) axes += fmt::format("{},", a);
  const std::string structure = fmt::format("split-reductions {} {} rank {} axes {} to rank {}", op_name(site.op),
                                            dtype_name(site.input.dtype), site.input.shape.rank(), axes,
                                            site.result.shape.rank());
  std::string bucket;
  for (int d = 0; d < site.input.shape.rank(); ++d) bucket += fmt::format("{}{}", d ? "x" : "", site.input.shape[d]);
  return filed(backend, hash_text(structure).hex(), bucket);
}

TuneReport Autotuner::split_choice(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for) {
  const std::unique_ptr<Subject> subject = split_subject(backend, site, plan_for);
  return choose(split_key_for(backend, site), *subject);
}

TuneReport Autotuner::tune_split(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for,
                                 const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = split_subject(backend, site, plan_for);
  return tune(split_key_for(backend, site), *subject, options);
}

TuneReport Autotuner::tune_split_unless_claimed(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for,
                                                const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = split_subject(backend, site, plan_for);
  return tune_unless_claimed(split_key_for(backend, site), *subject, options);
}

int64_t Autotuner::split_blocks_for(Backend& backend, const ReductionSplit& site, const PlanFor& plan_for, Mode mode) {
  if (mode == Mode::Off) return site.default_blocks;
  try {
    const std::unique_ptr<Subject> subject = split_subject(backend, site, plan_for);
    return split_blocks_of(site, variant_for(split_key_for(backend, site), *subject, mode));
  } catch (const Error& e) {
    warn_once("autotune", fmt::format("autotuning is off for this process: {}", e.what()));
    return site.default_blocks;
  }
}

TuneReport Autotuner::choice(Backend& backend, const kir::Kernel& k, const kir::Schedule& base) {
  const std::unique_ptr<Subject> subject = kernel_subject(backend, k, base);
  return choose(key_for(backend, k), *subject);
}

TuneReport Autotuner::gemm_choice(Backend& backend, const LaunchPlan::Gemm& g) {
  const std::unique_ptr<Subject> subject = gemm_subject(backend, g);
  return choose(gemm_key_for(backend, g), *subject);
}

TuneReport Autotuner::choose(const TuningKey& key, const Subject& subject) {
  TuneReport r;
  r.key = key;
  r.description = subject.describe();
  std::vector<Measurement> rows = db_->measurements(key);
  r.candidates = static_cast<int>(rows.size());
  std::sort(rows.begin(), rows.end(), [](const Measurement& a, const Measurement& b) {
    return a.status == Status::Ok && (b.status != Status::Ok || a.median_ns < b.median_ns);
  });
  for (const Measurement& m : rows) {
    if (m.status == Status::Failed) ++r.failed;
    if (m.status == Status::Wrong) ++r.wrong;
    if (m.status == Status::Ok && m.variant == "default") r.default_ns = m.median_ns;
  }
  r.tuned_ns = r.default_ns;
  if (r.default_ns <= 0) return r;
  for (const Measurement& m : rows) {
    if (m.status != Status::Ok || !beats_default(m.median_ns, r.default_ns)) break;
    std::optional<kir::Variant> v = kir::Variant::parse(m.variant);
    if (!v || !subject.legal(*v)) continue;  // from another kiln, or another shape of the bucket
    r.chosen = std::move(*v);
    r.tuned_ns = m.median_ns;
    break;
  }
  return r;
}

TuneReport Autotuner::tune_unless_claimed(Backend& backend, const kir::Kernel& k, const kir::Schedule& base,
                                          const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = kernel_subject(backend, k, base);
  return tune_unless_claimed(key_for(backend, k), *subject, options);
}

TuneReport Autotuner::tune_gemm_unless_claimed(Backend& backend, const LaunchPlan::Gemm& g,
                                               const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = gemm_subject(backend, g);
  return tune_unless_claimed(gemm_key_for(backend, g), *subject, options);
}

TuneReport Autotuner::tune_unless_claimed(const TuningKey& key, Subject& subject, const TuneOptions& options) {
  if (!db_->claim(key)) {  // another process is tuning it: its rows will be in the database
    TuneReport r = choose(key, subject);
    r.claimed_elsewhere = true;
    return r;
  }
  try {
    TuneReport r = tune(key, subject, options);
    db_->release(key);
    return r;
  } catch (...) {
    db_->release(key);
    throw;
  }
}

kir::Schedule Autotuner::schedule_for(Backend& backend, const kir::Kernel& k, const kir::Schedule& base, Mode mode) {
  if (mode == Mode::Off) return base;
  try {
    const std::unique_ptr<Subject> subject = kernel_subject(backend, k, base);
    const kir::Variant v = variant_for(key_for(backend, k), *subject, mode);
    return v.is_default() ? base : *kir::apply_variant(k, base, v, backend.capabilities());
  } catch (const Error& e) {
    warn_once("autotune", fmt::format("autotuning is off for this process: {}", e.what()));
    return base;
  }
}

kir::GemmSchedule Autotuner::gemm_schedule_for(Backend& backend, const LaunchPlan::Gemm& g, Mode mode) {
  if (mode == Mode::Off) return g.schedule;
  try {
    const std::unique_ptr<Subject> subject = gemm_subject(backend, g);
    const kir::Variant v = variant_for(gemm_key_for(backend, g), *subject, mode);
    return v.is_default() ? g.schedule : *kir::apply_gemm_variant(g, g.schedule, v, backend.capabilities());
  } catch (const Error& e) {
    warn_once("autotune", fmt::format("autotuning is off for this process: {}", e.what()));
    return g.schedule;
  }
}

kir::Variant Autotuner::variant_for(const TuningKey& key, Subject& subject, Mode mode) {
  if (mode == Mode::On && compile_allowed()) {
    const std::string id = key.str();
    bool tune_now = false;
    {
      std::lock_guard lock(mutex_);
      if (tuning_.count(id) != 0) return {};  // another thread is tuning it: no stall
      tune_now = tuned_.count(id) == 0 && tuning_.insert(id).second;
    }
    if (tune_now) {
      // Tuned once per process, whether it succeeded or not.
      auto done = [&] {
        std::lock_guard lock(mutex_);
        tuning_.erase(id);
        tuned_.insert(id);
      };
      try {
        tune_unless_claimed(key, subject, TuneOptions{});
      } catch (...) {
        done();
        throw;
      }
      done();
    }
  }
  // While another process tunes the key its rows change: a candidate timed once may lead
  // until the confirmation in alternation discards it, so a plan compiled then would run a
  // schedule no tuning chose. The default runs meanwhile, as for a key this process tunes.
  if (db_->tuned_elsewhere_now(key)) return {};
  return choose(key, subject).chosen;
}

TuneReport Autotuner::tune(Backend& backend, const kir::Kernel& k, const kir::Schedule& base, const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = kernel_subject(backend, k, base);
  return tune(key_for(backend, k), *subject, options);
}

TuneReport Autotuner::tune_gemm(Backend& backend, const LaunchPlan::Gemm& g, const TuneOptions& options) {
  const std::unique_ptr<Subject> subject = gemm_subject(backend, g);
  return tune(gemm_key_for(backend, g), *subject, options);
}

TuneReport Autotuner::tune(const TuningKey& key, Subject& subject, const TuneOptions& options) {
  const double warm_up_ms = options.warm_up_ms.value_or(default_warm_up_ms(subject.backend().capabilities()));
  if (!db_->problem().empty())
    warn_once("autotune-memory", db_->problem() + ": tuning results last for this process only");
  const std::string what = subject.describe();
  db_->describe_kernel(key, what);
  std::map<std::string, Measurement> rows;
  for (Measurement& m : db_->measurements(key)) {
    // Rows written under a knob's old name are the candidate of the name it has now.
    if (const std::optional<kir::Variant> v = kir::Variant::parse(m.variant)) m.variant = v->str();
    rows[m.variant] = std::move(m);
  }
  int measured_now = 0;

  std::vector<std::string> reference;
  double default_first_ns = 0;
  const auto timing_start = Clock::now();

  // Compiles, checks and times `pending` (at most `jobs` at a time), recording each.
  const size_t jobs = static_cast<size_t>(std::max(1, options.jobs));
  auto measure = [&](std::vector<Candidate> pending) {
    for (size_t at = 0; at < pending.size(); at += jobs) {
      if (ms_since(timing_start) > options.budget_ms && !reference.empty()) return;
      std::vector<Candidate> batch(pending.begin() + static_cast<std::ptrdiff_t>(at),
                                   pending.begin() + static_cast<std::ptrdiff_t>(std::min(pending.size(), at + jobs)));
      // Written first: if compiling or running a candidate kills the process, the next
      // process finds the row Running under a dead pid and records it Failed.
      for (const Candidate& c : batch) db_->record(key, {c.variant.str(), Status::Running, 0, 0, "", 0, ""});
      compile_batch(subject, batch, options.jobs);
      for (Candidate& c : batch) {
        Measurement m{c.variant.str(), Status::Failed, 0, c.compile_ms, "", 0, ""};
        if (!c.error.empty()) {
          m.detail = "compile: " + c.error;
        } else if (c.compile_ms > options.compile_cap_ms) {
          m.detail = fmt::format("compile took {:.0f} ms, past the cap of {:.0f} ms", c.compile_ms, options.compile_cap_ms);
        } else {
          try {
            std::vector<std::string> out = subject.outputs(c);
            // Not the first run's time: drivers that compile at the first launch (PoCL) count
            // their compiler in it.
            const double first_ns = subject.launch_ns(c);
            if (c.variant.is_default()) {
              reference = std::move(out);
              default_first_ns = first_ns;
              out.clear();
            }
            std::optional<std::string> diff = c.variant.is_default() ? std::nullopt : subject.compare(reference, out);
            if (diff) {
              m.status = Status::Wrong;
              m.detail = *diff;
            } else if (!c.variant.is_default() && first_ns > 50e6 && first_ns > options.slowdown_cap * default_first_ns) {
              m.detail = fmt::format("a run took {:.1f} ms, {:.0f}x the default's", first_ns / 1e6, first_ns / default_first_ns);
            } else {
              m.status = Status::Ok;
              m.median_ns = subject.median_ns(c, options.repeats, options.budget_ms / 8, warm_up_ms);
            }
          } catch (const std::exception& e) {
            m.detail = std::string("run: ") + e.what();
          }
        }
        if (c.variant.is_default() && m.status != Status::Ok)
          throw Error(fmt::format("autotune: the default schedule of {} fails on {}: {}", what,
                                  subject.backend().name(), m.detail));
        if (log_enabled("autotune"))
          log_line("autotune", fmt::format("{} {}: {}{} (compile {:.1f} ms, {:.0f} ms into the tuning){}", what,
                                           m.variant, status_name(m.status),
                                           m.status == Status::Ok ? fmt::format(" {:.1f} us", m.median_ns / 1e3) : "",
                                           m.compile_ms, ms_since(timing_start), m.detail.empty() ? "" : ": " + m.detail));
        db_->record(key, m);
        rows[m.variant] = m;
        ++measured_now;
      }
    }
  };
  auto candidate = [&](kir::Variant v) -> std::optional<Candidate> {
    if (!subject.legal(v)) return std::nullopt;
    return Candidate{std::move(v)};
  };

  std::vector<kir::Variant> singles = subject.singles();
  std::vector<Candidate> pending;
  auto lacks_row = [&](const kir::Variant& v) { return rows.count(v.str()) == 0; };
  const bool any_new = lacks_row(kir::Variant{}) ||
                       std::any_of(singles.begin(), singles.end(), [&](const kir::Variant& v) { return lacks_row(v); });
  if (any_new) {
    // The default always runs first: it is the reference for the others' outputs, and its
    // time (measured again now) is what they are compared with.
    pending.push_back(*candidate(kir::Variant{}));
    for (const kir::Variant& v : singles)
      if (lacks_row(v)) pending.push_back(*candidate(v));
    measure(std::move(pending));
  }

  // The combination of every knob's best single value, where two or more knobs improved;
  // only in the tuning that measured the singles. confirm() rewrites the rows it times in
  // alternation, so a later tuning of the same key would find another best value per knob
  // and measure another combination each time: a key is tuned once.
  std::map<std::string, std::pair<int64_t, double>> best;  // knob -> (value, ns)
  const auto def = rows.find("default");
  if (any_new && def != rows.end() && def->second.status == Status::Ok) {
    for (const kir::Variant& v : singles) {
      auto row = rows.find(v.str());
      if (row == rows.end() || row->second.status != Status::Ok) continue;
      if (!beats_default(row->second.median_ns, def->second.median_ns)) continue;
      const auto& [knob, value] = v.settings[0];
      if (best.count(knob) == 0 || row->second.median_ns < best[knob].second) best[knob] = {value, row->second.median_ns};
    }
  }
  if (best.size() >= 2) {
    kir::Variant combined;
    for (const auto& [knob, vt] : best) combined.settings.emplace_back(knob, vt.first);
    if (lacks_row(combined)) {
      if (std::optional<Candidate> c = candidate(combined)) {
        std::vector<Candidate> both;
        if (reference.empty()) both.push_back(*candidate(kir::Variant{}));
        both.push_back(std::move(*c));
        measure(std::move(both));
      }
    }
  }

  if (measured_now > 0) confirm(key, subject, options);
  TuneReport r = choose(key, subject);
  r.measured_now = measured_now;
  return r;
}

void Autotuner::confirm(const TuningKey& key, Subject& subject, const TuneOptions& options) {
  const double warm_up_ms = options.warm_up_ms.value_or(default_warm_up_ms(subject.backend().capabilities()));
  // Candidates were timed one after another, each against the machine's load of its moment;
  // the winner is timed again against the default in alternation, and both rows take the
  // medians of those rounds. A winner that no longer wins gives way to the next, a few times.
  constexpr int kRounds = 6, kContenders = 3;
  std::set<std::string> confirmed;
  for (int contender = 0; contender < kContenders; ++contender) {
    const TuneReport r = choose(key, subject);
    if (r.chosen.is_default() || !confirmed.insert(r.chosen.str()).second) return;
    try {
      Candidate a{kir::Variant{}}, b{r.chosen};
      subject.compile(a);
      subject.compile(b);
      if (!a.error.empty() || !b.error.empty()) throw Error(a.error.empty() ? b.error : a.error);
      std::vector<double> da, db;
      // The rounds follow one another: only the first needs the clocks brought up.
      for (int round = 0; round < kRounds; ++round) {
        da.push_back(subject.median_ns(a, 3, options.budget_ms / 40, round == 0 ? warm_up_ms : 0));
        db.push_back(subject.median_ns(b, 3, options.budget_ms / 40, 0));
      }
      std::sort(da.begin(), da.end());
      std::sort(db.begin(), db.end());
      // Kept only when its median wins by the margin and all its rounds but the slowest
      // beat the default's fastest: by chance alone, 7 in 924 for 6 rounds each. Asking
      // the slowest too let one stall of the machine's other work discard a variant 3x as
      // fast; a stall in the default's rounds cannot help a variant, which meets its fastest.
      const bool wins = beats_default(db[kRounds / 2], da[kRounds / 2]) && db[kRounds - 2] < da.front();
      for (const Measurement& m : db_->measurements(key)) {
        if (m.variant != "default" && m.variant != r.chosen.str()) continue;
        Measurement again = m;
        again.median_ns = m.variant == "default" ? da[kRounds / 2] : db[kRounds / 2];
        if (m.variant != "default" && !wins) {
          again.status = Status::Lost;
          again.detail = fmt::format("in alternation with the default: {:.1f}-{:.1f} us against {:.1f}-{:.1f} us",
                                     db.front() / 1e3, db.back() / 1e3, da.front() / 1e3, da.back() / 1e3);
        }
        db_->record(key, again);
      }
      if (log_enabled("autotune"))
        log_line("autotune", fmt::format("{} {} against the default in alternation: {:.1f}-{:.1f} us vs {:.1f}-{:.1f} us: {}",
                                         subject.describe(), r.chosen.str(), db.front() / 1e3, db.back() / 1e3,
                                         da.front() / 1e3, da.back() / 1e3, wins ? "kept" : "lost"));
      if (wins) return;
    } catch (const std::exception& e) {
      warn_once("autotune-confirm", fmt::format("autotune: confirming {} failed: {}", r.chosen.str(), e.what()));
      return;
    }
  }
}

}  // namespace kiln::autotune
