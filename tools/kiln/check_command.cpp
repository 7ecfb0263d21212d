// tools/kiln/check_command.cpp - `kiln check`: a graph on every device against the reference
// interpreter, with the error of each output and a verdict against docs/runtime.md's
// tolerances (the same oracle as `kiln fuzz` and tests/diff).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "differential.h"
#include "json_out.h"
#include "progress.h"
#include "kiln/backends/backend.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/custom_kernel.h"

namespace kiln::cli {
namespace {

struct CheckOptions {
  std::string file;
  std::string device = "all";
  bool json = false;
  InputOptions inputs;
};

std::string_view precision_name(test::Precision p) {
  switch (p) {
    case test::Precision::Exact: return "exact";
    case test::Precision::Approximate: return "within tolerance";
    case test::Precision::Unbounded: return "type";
  }
  return "?";
}

// Why device `d` cannot run `g`'s custom kernels ("" when it can).
std::string unsupported_custom_kernel(const Graph& g, Device d) {
  const Backend* b = engine_for(d).backend();
  if (b == nullptr) return "";
  const Capabilities& caps = b->capabilities();
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    if (n.op != OpKind::Custom) continue;
    const CustomKernel& k = *n.attrs[0].custom;
    const bool c = k.language == CustomLanguage::C;
    if (c ? caps.custom_c : caps.custom_opencl_c) continue;
    return fmt::format("custom kernel @{} is written in {}, which {} does not compile", k.name, c ? "C" : "OpenCL C",
                       d.str());
  }
  return "";
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto opts = std::make_shared<CheckOptions>();
  CLI::App* sub = app.add_subcommand(
      "check", "Run a graph on every device and compare each output with the reference interpreter.");
  sub->add_option("file", opts->file, "IR file, or - for stdin")->required();
  sub->add_option("--device", opts->device, "A device name, or 'all' for every compiling device (see kiln devices)")
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "Print one JSON object instead of the table (docs/cli.md, \"JSON output\")");
  add_input_options(sub, opts->inputs);
  return {sub, [opts]() {
            const RunnableGraph runnable = load_runnable(opts->file, opts->inputs);
            const Graph& g = runnable.graph;
            const std::vector<HostTensor> inputs = make_inputs(runnable, opts->inputs.seed);
            std::vector<Device> devices;
            if (opts->device == "all") {
              for (Device d : registered_devices())
                if (!(d == Device::interp())) devices.push_back(d);
            } else {
              devices.push_back(Device::parse(opts->device));
            }
            size_t width = 0;
            for (Device d : devices) width = std::max(width, d.str().size());
            int failed = 0;
            std::string json;  // the devices' objects, with --json
            auto device_json = [&](Device d, std::string_view status, std::string_view reason, const std::string& outputs) {
              json += fmt::format(R"({}{{"device": {}, "status": {}, "reason": {}, "outputs": [{}]}})", json.empty() ? "" : ", ",
                                  json_string(d.str()), json_string(status),
                                  reason.empty() ? "null" : json_string(reason), outputs);
            };
            for (Device d : devices) {
              // Of every device, those that cannot compile a custom kernel's language are
              // skipped, not failed: C runs on cpu only, by design (docs/custom_kernels.md).
              if (opts->device == "all")
                if (const std::string why = unsupported_custom_kernel(g, d); !why.empty()) {
                  if (opts->json) device_json(d, "skip", why, "");
                  else std::cout << fmt::format("{:<{}}  skip  {}\n", d.str(), width, why);
                  continue;
                }
              test::OutputCheck c;
              try {
                const Progress progress(fmt::format("checking {} on {} against the interpreter", opts->file, d.str()));
                c = test::check_outputs(d, g, inputs, /*bound_everything=*/true);
              } catch (const std::exception& e) {
                if (opts->json) device_json(d, "fail", e.what(), "");
                else std::cout << fmt::format("{:<{}}  FAIL  {}\n", d.str(), width, e.what());
                ++failed;
                continue;
              }
              if (!c.oracle_error.empty()) throw Error(fmt::format("the reference interpreter fails: {}", c.oracle_error));
              std::string outputs;
              bool all_ok = true;
              for (size_t i = 0; i < c.got.size(); ++i) {
                const bool ok = c.verdict[i].empty();
                failed += !ok;
                all_ok = all_ok && ok;
                const std::string& name = g.node(g.outputs()[i]).name;
                if (opts->json) {
                  outputs += fmt::format(R"({}{{"name": {}, "held_to": {}, "ok": {}, "difference": {}, "verdict": {}}})",
                                         i ? ", " : "", json_string(name), json_string(precision_name(c.precision[i])),
                                         ok ? "true" : "false", json_difference(c.got[i], c.want[i]),
                                         ok ? "null" : json_string(c.verdict[i]));
                } else {
                  std::cout << fmt::format("{:<{}}  {}  %{} ({}): {}{}\n", d.str(), width, ok ? "ok  " : "FAIL", name,
                                           precision_name(c.precision[i]), compare_values(c.got[i], c.want[i]),
                                           ok ? "" : fmt::format("\n    {}", c.verdict[i]));
                }
              }
              if (opts->json) device_json(d, all_ok ? "ok" : "fail", "", outputs);
            }
            if (opts->json) std::cout << fmt::format(R"({{"devices": [{}], "failed": {}}})", json, failed) << "\n";
            return failed ? 1 : 0;
          }};
}

}  // namespace kiln::cli
