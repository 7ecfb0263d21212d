// tools/kiln/autotune_command.cpp - `kiln autotune warmup`: tune every kernel and GEMM step of
// a set of IR files on a device ahead of time, then run each graph once so that the chosen
// kernels are compiled into the disk cache: a deployment with the same cache compiles and
// tunes nothing.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "json_out.h"
#include "kiln/autotune/autotuner.h"
#include "kiln/backends/backend.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/error.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct WarmupOptions {
  std::vector<std::string> paths;
  std::string device = "cpu";
  double budget_ms = 3000;
  std::optional<double> warm_up_ms;
  int jobs = 1;
  bool json = false;
  std::vector<std::string> input_shapes;  // NAME=2x3x4: sizes an input's symbolic dims
  std::string weights = "both";           // ONNX models: inline, params or both
};

// The graphs of `file` to tune: an IR file's one; an ONNX model's with its weights inline
// (what `kiln run` runs), as parameters (what onnx::load gives a C++ program), or both.
// The two compile to different kernels (constants fold into what reads them), and a
// deployment finds tuned schedules only for the kernels it runs: MobileNetV3 through
// onnx::Model ran 3.6 ms tuned on the inline form, 2.85 ms tuned on its own.
std::vector<std::pair<std::string, Graph>> graphs_to_tune(const fs::path& file, const WarmupOptions& opts) {
  // A model with symbolic dims is tuned at the sizes the deployment will run.
  const std::string name = file.filename().string();
  if (file.extension() != ".onnx") {
    return {{name, opts.input_shapes.empty() ? load_graph(file.string())
                                             : load_runnable(file.string(), InputOptions{{}, opts.input_shapes, 0}).graph}};
  }
  std::vector<std::pair<std::string, Graph>> out;
  for (const auto& [form, weights] : {std::pair{"inline", OnnxWeights::Inline}, {"params", OnnxWeights::Parameters}})
    if (opts.weights == form || opts.weights == "both")
      out.emplace_back(opts.weights == "both" ? fmt::format("{} (weights {})", name, form) : name,
                       load_runnable(file.string(), InputOptions{{}, opts.input_shapes, 0, weights}).graph);
  return out;
}

// The IR files `paths` name: files as given, folders searched for *.kir and *.onnx, sorted.
std::vector<fs::path> ir_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(p, ec))
        if (e.is_regular_file() && (e.path().extension() == ".kir" || e.path().extension() == ".onnx")) found.push_back(e.path());
      std::sort(found.begin(), found.end());
      if (found.empty()) throw Error(fmt::format("{}: no .kir or .onnx files in this folder", p));
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.emplace_back(p);
    } else {
      throw Error(fmt::format("{}: no such file or folder", p));
    }
  }
  return files;
}

// One kernel or GEMM step to tune: where it came from, its IR and default schedule (or the
// product, its default blocking in `gemm.schedule`).
struct Job {
  std::string file;
  kir::Kernel kernel;
  kir::Schedule base;
  std::optional<LaunchPlan::Gemm> gemm;
};

// "[#####-----] 12/40 kernels, 31 s left" on a terminal, rewritten in place.
void draw_progress(size_t done, size_t total, double elapsed_s) {
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  const double eta = done == 0 ? 0 : elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
  std::cerr << fmt::format("\r[{}{}] {}/{} kernels, {}", std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(kWidth - filled), '-'), done, total,
                           done == 0 ? std::string("estimating...") : fmt::format("{:.0f} s left   ", eta))
            << std::flush;
}

int warmup(const WarmupOptions& opts) {
  const Device device = Device::parse(opts.device);
  Backend* backend = engine_for(device).backend();
  if (backend == nullptr) throw Error(fmt::format("device {} compiles nothing: there is nothing to tune", device.str()));
  const auto start = Clock::now();
  const std::vector<fs::path> files = ir_files(opts.paths);

  autotune::Autotuner& tuner = autotune::Autotuner::instance();
  autotune::TuneOptions options;
  options.budget_ms = opts.budget_ms;
  options.warm_up_ms = opts.warm_up_ms;
  options.jobs = std::max(1, opts.jobs);
  const bool terminal = isatty(STDERR_FILENO) != 0;

  // Every file's reductions that split-reductions cuts into blocks are tuned first, as the
  // pipeline meets them (their block count decides which kernels exist); then every kernel
  // and GEMM step of the plan cut that way, from the default schedule (blocking) the device
  // would give it.
  std::vector<Job> jobs;
  // Per report (split reductions' first, then jobs'), the file it came from.
  std::vector<std::string> report_files;
  std::vector<autotune::TuneReport> reports;
  std::vector<Graph> graphs;
  const std::vector<const PassInfo*> extra = backend->extra_passes();
  std::vector<std::pair<std::string, Graph>> named;  // (the file, as reports name it; a graph of it)
  for (const fs::path& f : files)
    for (auto& g : graphs_to_tune(f, opts)) named.push_back(std::move(g));
  for (auto& [label, g] : named) {
    const SplitChooser tune_split = [&](const ReductionSplit& site) {
      const autotune::Autotuner::PlanFor plan_for = [&](int64_t blocks) { return split_plan(*backend, site, blocks); };
      autotune::TuneReport r = tuner.tune_split_unless_claimed(*backend, site, plan_for, options);
      std::cerr << fmt::format("tuned {} {}: {} variants, {} measured now, chose {}\n", label,
                               r.description, r.candidates, r.measured_now, r.chosen.str());
      report_files.push_back(label);
      reports.push_back(std::move(r));
      return tuner.split_blocks_for(*backend, site, plan_for, autotune::Mode::Cached);
    };
    Compilation c = compile_graph(backend->capabilities(), extra, g, {}, tune_split);
    for (size_t i = 0; i < c.plan.kernels.size(); ++i)
      jobs.push_back({label, std::move(c.plan.kernels[i]), c.plan.schedules[i], std::nullopt});
    for (const LaunchPlan::Step& step : c.plan.steps)
      if (step.is_gemm()) jobs.push_back({label, {}, {}, step.gemm});
    graphs.push_back(std::move(g));
  }

  const size_t tuned_splits = reports.size();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (terminal) draw_progress(i, jobs.size(), std::chrono::duration<double>(Clock::now() - start).count());
    autotune::TuneReport r = jobs[i].gemm ? tuner.tune_gemm_unless_claimed(*backend, *jobs[i].gemm, options)
                                          : tuner.tune_unless_claimed(*backend, jobs[i].kernel, jobs[i].base, options);
    if (!terminal)
      std::cerr << fmt::format("tuned {} {} ({}): {} variants, {} measured now, chose {}\n", jobs[i].file, r.description,
                               r.key.bucket, r.candidates, r.measured_now, r.chosen.str());
    report_files.push_back(jobs[i].file);
    reports.push_back(std::move(r));
  }
  if (terminal) {
    draw_progress(jobs.size(), jobs.size(), std::chrono::duration<double>(Clock::now() - start).count());
    std::cerr << "\n";
  }

  // Each graph once, so that the kernels the tuned schedules need are compiled and on disk.
  for (const Graph& g : graphs) run_on_host(device, g, make_inputs({g, {}, {}, {}}, 0));

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (opts.json) {
    std::string items;
    for (size_t i = 0; i < reports.size(); ++i) {
      const autotune::TuneReport& r = reports[i];
      items += fmt::format(
          R"({}{{"file": {}, "kernel": {}, "key": {}, "chosen": {}, "default_ns": {}, "tuned_ns": {}, "candidates": {}, "measured_now": {}, "tuned_elsewhere": {}}})",
          items.empty() ? "" : ", ", json_string(report_files[i]), json_string(r.description),
          json_string(r.key.str()), json_string(r.chosen.str()), json_number(r.default_ns > 0 ? r.default_ns : NAN),
          json_number(r.tuned_ns > 0 ? r.tuned_ns : NAN), r.candidates, r.measured_now,
          r.claimed_elsewhere ? "true" : "false");
    }
    std::cout << fmt::format(R"({{"device": {}, "files": {}, "seconds": {}, "database": {}, "tuned": [{}]}})",
                             json_string(device.str()), files.size(), json_number(seconds),
                             tuner.db().persistent() ? json_string(tuner.db().path().string()) : "null", items)
              << "\n";
    return 0;
  }
  size_t file_width = 4, variant_width = 14;  // the headers' lengths
  for (size_t i = 0; i < reports.size(); ++i) {
    file_width = std::max(file_width, report_files[i].size());
    variant_width = std::max(variant_width, reports[i].chosen.str().size());
  }
  std::cout << fmt::format("{:<{}} {:<36} {:<{}} {:>10} {:>10} {:>8}\n", "file", file_width, "kernel", "chosen variant",
                           variant_width, "default",
                           "tuned", "speedup");
  for (size_t i = 0; i < reports.size(); ++i) {
    const autotune::TuneReport& r = reports[i];
    std::string desc = r.description;
    if (desc.size() > 36) desc = desc.substr(0, 33) + "...";
    const double speedup = r.tuned_ns > 0 ? r.default_ns / r.tuned_ns : 0;
    std::cout << fmt::format("{:<{}} {:<36} {:<{}} {:>10} {:>10} {:>8}{}\n", report_files[i], file_width, desc,
                             r.chosen.str(), variant_width,
                             time_text(r.default_ns), time_text(r.tuned_ns),
                             speedup > 0 ? fmt::format("{:.2f}x", speedup) : std::string("-"),
                             r.claimed_elsewhere ? "  (tuned by another process)" : "");
  }
  std::cout << fmt::format("{} kernels and GEMM steps, {} split reductions, of {} files tuned on {} in {:.1f} s; database {}\n",
                           reports.size() - tuned_splits, tuned_splits, files.size(),
                           device.str(), std::chrono::duration<double>(Clock::now() - start).count(),
                           tuner.db().persistent() ? tuner.db().path().string() : std::string("in memory"));
  return 0;
}

}  // namespace

Command add_autotune_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("autotune", "Tune kernels ahead of time (docs/autotune.md).");
  sub->require_subcommand(1);
  auto opts = std::make_shared<WarmupOptions>();
  CLI::App* w = sub->add_subcommand(
      "warmup", "Tune every kernel of IR files on a device and compile the chosen variants into the cache.");
  w->add_option("paths", opts->paths, "IR files or ONNX models, or folders of them (*.kir, *.onnx)")->required();
  w->add_option("--device", opts->device, "The device to tune for (see kiln devices)")->capture_default_str();
  w->add_option("--budget-ms", opts->budget_ms, "Wall time the timing of one kernel may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  w->add_option("--warm-up-ms", opts->warm_up_ms,
                "Launches before each candidate's timed ones last at least this long (default: 300 on a GPU, "
                "whose clocks fall while candidates compile; 10 elsewhere)")
      ->check(CLI::NonNegativeNumber);
  w->add_option("--jobs", opts->jobs, "Candidates compiled at once")->capture_default_str()->check(CLI::Range(1, 256));
  w->add_option("--input-shape", opts->input_shapes,
                "The shape of an input with symbolic dims (an ONNX model's, or IR text's f32[n,768]), for every "
                "file given (repeatable)")
      ->type_name("NAME=2x3x4");
  w->add_option("--weights", opts->weights,
                 "ONNX models: tune the kernels of the model with its weights inline (what kiln run runs), as "
                 "parameters (what onnx::load gives a C++ program), or both; they compile to different kernels")
      ->check(CLI::IsMember({"inline", "params", "both"}))
      ->capture_default_str();
  w->add_flag("--json", opts->json, "Print one JSON object instead of the table (docs/cli.md, \"JSON output\")");
  return {sub, [opts, w]() { return w->parsed() ? warmup(*opts) : 1; }};
}

}  // namespace kiln::cli
