// tools/kiln/commands.h - the subcommands of the `kiln` tool.
//
// Each command registers its options on a CLI11 subcommand and returns the exit status when
// run. Errors are reported as one line on stderr (`file:line:col: error: ...`) and exit 1.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"

namespace kiln::cli {

/// A registered subcommand and what runs it once its options are parsed.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_opt_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_dot_command(CLI::App& app);
Command add_codegen_command(CLI::App& app);
Command add_fuzz_command(CLI::App& app);
Command add_check_command(CLI::App& app);
Command add_devices_command(CLI::App& app);
Command add_autotune_command(CLI::App& app);
Command add_cache_command(CLI::App& app);
Command add_import_command(CLI::App& app);

/// The contents of `path`, or of stdin for "-". Throws kiln::Error.
std::string read_input(const std::string& path);
/// Writes `text` to `path`, or to stdout for "" or "-". Throws kiln::Error.
void write_output(const std::string& path, const std::string& text);
/// Parses and verifies the single graph in `path` (an ONNX model when it ends in .onnx,
/// imported with its weights inline). Throws kiln::Error with the diagnostic.
Graph load_graph(const std::string& path);

/// The parameters of `g`: NAME=FILE.npy for those `specs` name, seeded random values for the
/// rest (floats uniform in [-1, 1), integers in [-8, 8), bools fair). Throws kiln::Error.
std::vector<HostTensor> make_inputs(const Graph& g, const std::vector<std::string>& specs, int64_t seed);
/// `--seed N` and `--input NAME=FILE.npy` (repeatable) on `sub`, for make_inputs.
void add_input_options(CLI::App* sub, std::vector<std::string>& inputs, int64_t& seed);

/// A duration for people: "230 ns", "38.4 us", "8.57 ms"; "-" when not positive (unmeasured).
std::string time_text(double ns);

/// "min=... max=... mean=..." for a tensor (NaN-aware; empty tensors say so).
std::string summarize(const HostTensor& t);
/// The values in NumPy's nested-bracket layout; above `threshold` elements, only the first
/// and last 3 of each axis are shown.
std::string format_values(const HostTensor& t, int64_t threshold = 1000);
/// How `got` differs from `want` (same type): "identical", or the number of differing
/// elements with the largest absolute and relative difference (and ulps for floats).
std::string compare_values(const HostTensor& got, const HostTensor& want);

}  // namespace kiln::cli
