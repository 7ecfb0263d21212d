// tools/kiln/import_command.cpp - `kiln import`: an ONNX model as kiln IR text.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/onnx.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/ir/npy.h"

namespace kiln::cli {
namespace {

struct ImportCommandOptions {
  std::string file;
  std::string output;
  std::string weights = "params";
  std::vector<std::string> shapes;  // NAME=2x3x4
  std::vector<std::string> values;  // NAME=FILE.npy
  bool stats = false;
  bool list_ops = false;
};

// docs/onnx.md's table of converters: each op with the versions kiln maps, the opsets those
// are in force at, and ONNX's newer versions, which a model's opset may not reach.
std::string ops_table() {
  std::string out = "| op | versions kiln maps | opsets | newer versions (refused) |\n|---|---|---|---|\n";
  std::vector<onnx::SupportedOp> ops = onnx::supported_ops();
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const onnx::SupportedOp& op : ops) {
    const std::vector<int> all = onnx::op_versions(op.name);
    std::vector<int> newer;
    for (int v : all)
      if (v > op.last_version) newer.push_back(v);
    const std::string last_opset = newer.empty() ? fmt::format("{}+", op.first_version)
                                                 : fmt::format("{}-{}", op.first_version, newer.front() - 1);
    out += fmt::format("| {} | {} | {} | {} |\n", op.name, fmt::join(op.versions, ", "), last_opset,
                       newer.empty() ? std::string("") : fmt::format("{}", fmt::join(newer, ", ")));
  }
  return out;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto opts = std::make_shared<ImportCommandOptions>();
  CLI::App* sub = app.add_subcommand("import", "Import an ONNX model as kiln IR (see docs/onnx.md).");
  sub->add_option("file", opts->file, "the .onnx file");
  sub->add_flag("--list-ops", opts->list_ops,
                "print the ONNX ops kiln maps, with the op versions (and so opsets) each handles, as a Markdown table");
  sub->add_option("-o,--output", opts->output, "where to write the IR (default: stdout)");
  sub->add_option("--weights", opts->weights,
                  "params: weights are graph parameters, written as .npy files beside -o (FILE.weights/NAME.npy); "
                  "inline: weights are constants in the IR text")
      ->check(CLI::IsMember({"params", "inline"}))
      ->capture_default_str();
  sub->add_option("--input-shape", opts->shapes, "the shape of an input with symbolic dims, e.g. x=1x3x224x224")
      ->type_name("NAME=SHAPE");
  sub->add_option("--input-value", opts->values,
                  "fix an input to the values of a .npy file, for ops that need them while importing (a Reshape's shape)")
      ->type_name("NAME=FILE.npy");
  sub->add_flag("--stats", opts->stats, "print the model's size and the kernels it fuses into, to stderr");
  return {sub, [opts]() {
            if (opts->list_ops) {
              std::cout << ops_table();
              return 0;
            }
            if (opts->file.empty()) throw Error("error: kiln import needs a .onnx file (or --list-ops)");
            onnx::ImportOptions options;
            options.weights = opts->weights == "inline" ? onnx::Weights::Inline : onnx::Weights::Parameters;
            for (const std::string& s : opts->shapes) {
              auto [name, shape] = split_spec(s, "--input-shape");
              options.input_shapes[name] = parse_shape(shape);
            }
            for (const std::string& s : opts->values) {
              auto [name, file] = split_spec(s, "--input-value");
              options.input_values[name] = read_npy(file);
            }
            const onnx::Model model = onnx::load(opts->file, options);
            write_output(opts->output, print_graph(model.graph));
            if (!model.weights.empty()) {
              // Beside a file only: -o /dev/null (with --stats) must not make /dev/null.weights.
              if (opts->output.empty() || opts->output == "-" || !std::filesystem::is_regular_file(opts->output)) {
                std::cerr << fmt::format("kiln import: {} weights are parameters; give -o FILE to write them as .npy "
                                         "files, or use --weights inline\n", model.weights.size());
              } else {
                const std::filesystem::path dir = opts->output + ".weights";
                std::filesystem::create_directories(dir);
                const auto params = model.graph.inputs();
                const size_t first = model.input_names.size();
                for (size_t k = 0; k < model.weights.size(); ++k)
                  write_npy((dir / (model.graph.node(params[first + k]).name + ".npy")).string(), *model.weights[k]);
                std::cerr << fmt::format("kiln import: wrote {} weights to {}/\n", model.weights.size(), dir.string());
              }
            }
            if (opts->stats) {
              int64_t weight_elements = 0;
              for (const auto& w : model.weights) weight_elements += w->numel();
              const GraphStats before = graph_stats(model.graph);
              const Graph fused = run_pipeline(model.graph, pipeline_for_level(2)).take();
              const GraphStats after = graph_stats(fused);
              std::cerr << fmt::format("// {}: opset {}, produced by {}\n", opts->file, model.opset,
                                       model.producer.empty() ? "(unknown)" : model.producer);
              std::cerr << fmt::format("// {} inputs, {} outputs, {} weight tensors ({} elements)\n",
                                       model.input_names.size(), model.output_names.size(), model.weights.size(),
                                       weight_elements);
              std::cerr << fmt::format("// imported: {} nodes; after -O2: {} nodes in {} kernels\n", before.nodes,
                                       after.nodes, after.kernels);
              // The names --input and ImportOptions take, beside the parameters they became.
              const auto params = model.graph.inputs();
              for (size_t k = 0; k < model.input_names.size(); ++k)
                std::cerr << fmt::format("// input '{}': %{} {}\n", model.input_names[k],
                                         model.graph.node(params[k]).name, model.graph.type(params[k]).str());
              for (size_t k = 0; k < model.output_names.size(); ++k)
                std::cerr << fmt::format("// output '{}': {}\n", model.output_names[k],
                                         model.graph.type(model.graph.outputs()[k]).str());
            }
            return 0;
          }};
}

}  // namespace kiln::cli
