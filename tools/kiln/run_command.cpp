// tools/kiln/run_command.cpp - `kiln run`: execute a graph and report its outputs.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "json_out.h"
#include "progress.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/npy.h"
#include "kiln/runtime/profile.h"

namespace kiln::cli {
namespace {

struct RunOptions {
  std::string file;
  InputOptions inputs;
  bool print = false;
  bool full = false;
  std::string save_dir;
  std::string device = "cpu";
  bool check = false;
  bool json = false;
  bool profile = false;
  std::string trace = "kiln-profile.json";
  int repeat = 1;
};

// File names for saved outputs: the SSA name when unique among outputs, else out<i>.
std::vector<std::string> output_names(const Graph& g) {
  std::map<std::string, int> count;
  for (ValueId v : g.outputs()) ++count[g.node(v).name];
  std::vector<std::string> names;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const std::string& n = g.node(g.outputs()[i]).name;
    names.push_back(!n.empty() && count[n] == 1 ? n : fmt::format("out{}", i));
  }
  return names;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Run a graph on seeded random inputs or .npy files and report its outputs.");
  sub->add_option("file", opts->file, "IR file, or - for stdin")->required();
  add_input_options(sub, opts->inputs);
  sub->add_flag("--print", opts->print, "Print the values of every output");
  sub->add_flag("--full", opts->full, "With --print, print every value (no '...' summary)");
  sub->add_option("--save", opts->save_dir, "Write every output as DIR/<name>.npy")->type_name("DIR");
  sub->add_option("--device", opts->device, "Where to run: cpu (compiled with LLVM), opencl:N, vulkan:N, or interp (the reference interpreter); see kiln devices")
      ->capture_default_str();
  sub->add_flag("--check", opts->check, "Also run the reference interpreter and report the largest difference");
  sub->add_flag("--json", opts->json, "Print one JSON object instead of the text (docs/cli.md, \"JSON output\")");
  sub->add_flag("--profile", opts->profile,
                "Time every launch of the runs after a first (compiling) one: a table by kernel on stderr and a "
                "Chrome trace in --trace (docs/runtime.md, \"Profiling\")");
  sub->add_option("--trace", opts->trace, "With --profile, the Chrome trace-event file to write (\"\": none)")
      ->type_name("FILE")
      ->capture_default_str();
  sub->add_option("--repeat", opts->repeat, "Run the graph this many times (after the first, with --profile)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return {sub, [opts]() {
            const Device device = Device::parse(opts->device);
            const RunnableGraph runnable = load_runnable(opts->file, opts->inputs);
            const Graph& g = runnable.graph;
            const std::vector<HostTensor> inputs = make_inputs(runnable, opts->inputs.seed);
            const bool profiling = opts->profile;
            std::vector<HostTensor> outputs;
            {
              const Progress progress(fmt::format("running {} on {}", opts->file, device.str()));
              outputs = run_on_host(device, g, inputs);
              if (profiling) profile::enable(opts->trace);
              for (int i = profiling ? 0 : 1; i < opts->repeat; ++i) outputs = run_on_host(device, g, inputs);
            }
            if (profiling) profile::write_report();
            std::vector<HostTensor> expected;
            if (opts->check) expected = interpret(g, inputs);
            if (opts->check && !opts->json)
              for (size_t i = 0; i < outputs.size(); ++i)
                std::cout << fmt::format("check %{}: {}\n", g.node(g.outputs()[i]).name, compare_values(outputs[i], expected[i]));
            const std::vector<std::string> names = output_names(g);
            if (!opts->save_dir.empty()) {
              std::error_code ec;
              std::filesystem::create_directories(opts->save_dir, ec);
              if (ec) throw Error(fmt::format("{}: error: cannot create directory: {}", opts->save_dir, ec.message()));
            }
            if (opts->json) {
              std::string items;
              for (size_t i = 0; i < outputs.size(); ++i) {
                std::string saved = "null";
                if (!opts->save_dir.empty()) {
                  const std::string path = (std::filesystem::path(opts->save_dir) / (names[i] + ".npy")).string();
                  write_npy(path, outputs[i]);
                  saved = json_string(path);
                }
                items += fmt::format(R"({}{{"name": {}, "type": {}, "values": {}, "check": {}, "saved": {}}})",
                                     i ? ", " : "", json_string(names[i]), json_string(outputs[i].type().str()),
                                     json_summary(outputs[i]),
                                     opts->check ? json_difference(outputs[i], expected[i]) : "null", saved);
              }
              std::cout << fmt::format(R"({{"device": {}, "outputs": [{}]}})", json_string(device.str()), items) << "\n";
              return 0;
            }
            for (size_t i = 0; i < outputs.size(); ++i) {
              std::cout << fmt::format("%{}: {} {}\n", names[i], outputs[i].type().str(), summarize(outputs[i]));
              if (opts->print) std::cout << format_values(outputs[i], opts->full ? INT64_MAX : 1000) << "\n";
              if (!opts->save_dir.empty())
                write_npy((std::filesystem::path(opts->save_dir) / (names[i] + ".npy")).string(), outputs[i]);
            }
            return 0;
          }};
}

}  // namespace kiln::cli
