// tools/kiln/commands.h - the subcommands of the `kiln` tool.
//
// Each command registers its options on a CLI11 subcommand and returns the exit status when
// run. Errors are reported as one line on stderr (`file:line:col: error: ...`) and exit 1.
#pragma once

#include <cmath>
#include <functional>
#include <map>
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

/// How an ONNX model's weights enter its graph: constants (what `kiln run` runs by
/// default), or parameters after the model's inputs, bound to the model's weights (what
/// onnx::load gives a C++ program: onnx::Model). They compile to different kernels.
enum class OnnxWeights { Inline, Parameters };

/// What a command runs a graph with: `--input NAME=FILE.npy` and `--input-shape NAME=2x3`
/// (each repeatable), the seed of the inputs no file gives, and `--weights`.
struct InputOptions {
  std::vector<std::string> files;
  std::vector<std::string> shapes;
  int64_t seed = 0;
  OnnxWeights weights = OnnxWeights::Inline;
};
/// `--seed`, `--input`, `--input-shape` and `--weights` on `sub`.
void add_input_options(CLI::App* sub, InputOptions& options);

/// A graph to run, and the names its parameters answer to besides their SSA names: for an
/// ONNX model, the model's own input names (`gpu_0/data_0`, sanitized to `gpu_0_data_0`).
struct InputFile {
  std::string path;
  HostTensor value;
};
struct RunnableGraph {
  Graph graph;
  std::vector<std::string> source_names;  // one per parameter; "" where there is none
  std::map<std::string, InputFile> files;  // the --input files, read once, by the name given
  /// The values of the last weights.size() parameters: an ONNX model's weights, as
  /// parameters (OnnxWeights::Parameters).
  std::vector<std::shared_ptr<const HostTensor>> weights;
};
/// load_graph, where an ONNX model's symbolic dims take their sizes from `--input-shape`,
/// else from the shape of the `--input` file given for that input, and its weights are
/// constants or parameters as `options.weights` says.
RunnableGraph load_runnable(const std::string& path, const InputOptions& options);

/// The parameters of `g`: the .npy files that `--input` names (by SSA or model name), seeded
/// random values for the rest (floats uniform in [-1, 1), integers in [-8, 8), bools fair).
/// Throws kiln::Error.
std::vector<HostTensor> make_inputs(const RunnableGraph& g, int64_t seed);

/// NAME=VALUE split at the first '='; kiln::Error naming `option` otherwise.
std::pair<std::string, std::string> split_spec(const std::string& spec, std::string_view option);
/// "2x3x4" (or "scalar") as a Shape; kiln::Error otherwise.
Shape parse_shape(const std::string& text);

/// A duration for people: "230 ns", "38.4 us", "8.57 ms"; "-" when not positive (unmeasured).
std::string time_text(double ns);

/// A tensor's values: NaN counted apart, the rest's least, greatest and mean (NaN when
/// there is none, or +inf meets -inf).
struct ValueSummary {
  int64_t nans = 0;
  double min = NAN, max = NAN, mean = NAN;
};
ValueSummary summary_of(const HostTensor& t);
/// "min=... max=... mean=..." for a tensor (NaN-aware; empty tensors say so).
std::string summarize(const HostTensor& t);
/// The values in NumPy's nested-bracket layout; above `threshold` elements, only the first
/// and last 3 of each axis are shown.
std::string format_values(const HostTensor& t, int64_t threshold = 1000);
/// How `got` differs from `want` (same type): elements that differ, the largest absolute and
/// relative difference, and ulps for floats.
struct ValueDifference {
  int64_t differ = 0;
  double max_abs = 0, max_rel = 0, max_ulp = 0;
};
ValueDifference difference_of(const HostTensor& got, const HostTensor& want);
/// The same in words: "identical to the interpreter", or the counts and largest differences.
std::string compare_values(const HostTensor& got, const HostTensor& want);

}  // namespace kiln::cli
