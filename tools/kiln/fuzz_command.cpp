// tools/kiln/fuzz_command.cpp - `kiln fuzz`: random graphs on every device against the
// reference interpreter, reproducible from the seed, failures minimized to IR files.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "differential.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/text.h"
#include "random_graph.h"

namespace kiln::cli {
namespace {

struct FuzzOptions {
  std::string device = "all";
  uint64_t count = 300;
  uint64_t seed = 0;
  bool big = false;
  bool gradients = false;
  std::string out = "kiln-fuzz";
  bool keep_going = false;
};

}  // namespace

Command add_fuzz_command(CLI::App& app) {
  auto opts = std::make_shared<FuzzOptions>();
  CLI::App* sub = app.add_subcommand(
      "fuzz", "Run random graphs on devices and compare each with the reference interpreter");
  sub->add_option("--device", opts->device, "A device name, or 'all' for every registered device")
      ->capture_default_str();
  sub->add_option("--count", opts->count, "Graphs per device")->capture_default_str();
  sub->add_option("--seed", opts->seed, "Seed of the first graph (graph i uses seed + i)")->capture_default_str();
  sub->add_flag("--big", opts->big, "Large shapes (dims up to 96): vector loops, thread splits, GEMM");
  sub->add_flag("--grad", opts->gradients,
                "Check each graph's backward instead (kiln::grad of its float outputs' sum, traced)");
  sub->add_option("--out", opts->out, "Where the minimized failing graphs are written")->capture_default_str();
  sub->add_flag("--keep-going", opts->keep_going, "Do not stop at the first failing graph");
  return {sub, [opts]() {
            std::vector<Device> devices;
            if (opts->device == "all") devices = registered_devices();
            else devices.push_back(Device::parse(opts->device));
            test::RandomGraphOptions ro;
            if (opts->big) {
              ro.nodes = 12;
              ro.max_dim = 96;
              ro.zero_size = false;
            }
            const auto start = std::chrono::steady_clock::now();
            uint64_t failures = 0, refused = 0, runs = 0;
            for (uint64_t i = 0; i < opts->count; ++i) {
              const uint64_t seed = opts->seed + i;
              auto make = [&](const test::RandomGraphOptions& o) {
                return opts->gradients ? test::gradient_graph(test::random_graph(seed, o)) : test::random_graph(seed, o);
              };
              const Graph g = make(ro);
              if (g.size() == 0) continue;  // --grad: no gradient flows through this one
              // Vulkan devices have no f64 exp, log...: their graph casts such operands to f32.
              test::RandomGraphOptions f32_math = ro;
              f32_math.f64_math = false;
              std::optional<Graph> g_f32_math;
              for (Device d : devices) {
                ++runs;
                if (d.kind == Device::Kind::Vulkan && !g_f32_math) g_f32_math = make(f32_math);
                if (d.kind == Device::Kind::Vulkan && g_f32_math->size() == 0) continue;
                const Graph& dg = d.kind == Device::Kind::Vulkan ? *g_f32_math : g;
                const std::string why = test::check_on_device(d, dg, seed);
                if (why.empty()) continue;
                // A kernel past the device's loop budget (lavapipe's) is refused with an error
                // that says so, as the differential test accepts: a limit, not a wrong value.
                if (why.find("loop iterations per work-item") != std::string::npos) {
                  ++refused;
                  std::cout << fmt::format("REFUSED {} seed {}: {}\n", d.str(), seed, why);
                  continue;
                }
                ++failures;
                const Graph small = test::minimize(d, dg, seed);
                std::filesystem::create_directories(opts->out);
                const std::string file =
                    (std::filesystem::path(opts->out) / fmt::format("fuzz-{}-seed{}.kir", d.str(), seed)).string();
                std::ofstream(file) << fmt::format("// kiln fuzz --device {} --seed {} --count 1{}{}: {}\n", d.str(),
                                                   seed, opts->big ? " --big" : "", opts->gradients ? " --grad" : "",
                                                   why)
                                    << print_graph(small);
                std::cout << fmt::format("FAIL {} seed {}: {}\n  smallest failing graph ({} nodes, from {}): {}\n", d.str(),
                                         seed, why, small.size(), dg.size(), file);
                if (!opts->keep_going) break;
              }
              if (failures > 0 && !opts->keep_going) break;
              if ((i + 1) % 1000 == 0)  // long runs: progress a person (or a log) can follow
                std::cerr << fmt::format("fuzz: {} graphs, {} failures, {:.0f} s\n", i + 1, failures,
                                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            }
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::vector<std::string> names;
            for (Device d : devices) names.push_back(d.str());
            std::cout << fmt::format("fuzz: {} graphs on {} ({} runs, {:.1f} s), seeds {}..{}{}{}\n",
                                     runs / devices.size(), fmt::join(names, ", "), runs, s, opts->seed,
                                     opts->seed + opts->count - 1, opts->big ? ", big shapes" : "",
                                     opts->gradients ? ", their gradients" : "");
            const std::string refusals = refused ? fmt::format("{} refused by a device's loop budget, ", refused) : "";
            std::cout << fmt::format("{} passed, {}{} failed\n", runs - failures - refused, refusals, failures);
            return failures == 0 ? 0 : 1;
          }};
}

}  // namespace kiln::cli
