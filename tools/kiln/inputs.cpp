// tools/kiln/inputs.cpp - the parameters a command runs a graph with: seeded random values,
// or .npy files named on the command line (`kiln run`, `kiln check`).
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/ir/symbolic.h"
#include "kiln/onnx/onnx.h"
#include "kiln/ir/npy.h"

namespace kiln::cli {
namespace {

// Seeded inputs: floats uniform in [-1, 1), integers in [-8, 8), bools fair. Each input
// draws from its own stream, so adding an input does not change the others.
HostTensor random_input(const TensorType& type, int64_t seed, size_t input_index) {
  HostTensor t(type);
  // Wrapping arithmetic: any seed is valid.
  const auto stream = static_cast<int64_t>(static_cast<uint64_t>(seed) * 1000003u + input_index);
  for (int64_t k = 0; k < t.numel(); ++k) {
    const double u = scalar::rand_uniform(stream, static_cast<uint64_t>(k));
    if (is_float(type.dtype)) t.set_double(k, 2 * u - 1);
    else if (is_bool(type.dtype)) t.set_int(k, u < 0.5);
    else t.set_int(k, static_cast<int64_t>(std::floor(u * 16)) - 8);
  }
  return t;
}

}  // namespace

std::pair<std::string, std::string> split_spec(const std::string& spec, std::string_view option) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error(fmt::format("error: {} takes NAME=VALUE, got '{}'", option, spec));
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

Shape parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  if (text != "scalar") {
    size_t at = 0;
    while (at <= text.size()) {
      const size_t x = std::min(text.find('x', at), text.size());
      const std::string d = text.substr(at, x - at);
      if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos)
        throw Error(fmt::format("error: --input-shape: '{}' is not a shape like 2x3x4 (or 'scalar')", text));
      dims.push_back(std::stoll(d));
      at = x + 1;
    }
  }
  return Shape(std::span<const int64_t>(dims));
}

namespace {

// The --input files, each read once, by the name given (without a leading '%').
std::map<std::string, InputFile> read_input_files(const InputOptions& options) {
  std::map<std::string, InputFile> files;
  for (const std::string& spec : options.files) {
    auto [name, path] = split_spec(spec, "--input");
    if (name[0] == '%') name.erase(0, 1);
    files[name] = {path, read_npy(path)};
  }
  return files;
}

}  // namespace

RunnableGraph load_runnable(const std::string& path, const InputOptions& options) {
  std::map<std::string, InputFile> files = read_input_files(options);
  if (!path.ends_with(".onnx")) {
    Graph graph = load_graph(path);
    if (has_symbolic_dims(graph)) {
      // The sizes come from the inputs that files or --input-shape give; each parameter
      // with a symbolic dim needs one.
      std::map<std::string, Shape> shapes;
      for (const auto& [name, file] : files) shapes[name] = file.value.shape();
      for (const std::string& spec : options.shapes) {
        auto [name, shape] = split_spec(spec, "--input-shape");
        shapes[name[0] == '%' ? name.substr(1) : name] = parse_shape(shape);
      }
      std::vector<TensorType> types;
      for (ValueId in : graph.inputs()) {
        const Node& n = graph.node(in);
        const auto it = shapes.find(n.name);
        if (it == shapes.end() && n.type.shape.symbolic())
          throw Error(fmt::format("error: %{} of @{} is {}: give its shape (--input-shape {}=2x3, or --input {}=FILE.npy)",
                                  n.name, graph.name(), n.type.str(), n.name, n.name));
        types.push_back(it == shapes.end() ? n.type : TensorType{n.type.dtype, it->second});
      }
      Expected<Graph> bound = specialize_for(graph, types);
      if (!bound) throw Error(bound.error().str());
      graph = std::move(*bound);
    } else if (!options.shapes.empty()) {
      throw Error("error: --input-shape sizes symbolic dims; this graph has none");
    }
    RunnableGraph g{std::move(graph), {}, std::move(files), {}};
    g.source_names.assign(g.graph.inputs().size(), "");
    return g;
  }
  onnx::ImportOptions import;
  // Inline: every parameter left is one of the model's inputs.
  import.weights = options.weights == OnnxWeights::Inline ? onnx::Weights::Inline : onnx::Weights::Parameters;
  // A file sizes the symbolic dims of the model input it names (an SSA name sizes nothing:
  // importer options take the model's names).
  for (const auto& [name, file] : files) import.input_shapes[name] = file.value.shape();
  for (const std::string& spec : options.shapes) {
    auto [name, shape] = split_spec(spec, "--input-shape");
    import.input_shapes[name] = parse_shape(shape);
  }
  onnx::Model model = onnx::load(path, import);
  RunnableGraph g{std::move(model.graph), std::move(model.input_names), std::move(files), std::move(model.weights)};
  g.source_names.resize(g.graph.inputs().size());
  return g;
}

std::vector<HostTensor> make_inputs(const RunnableGraph& rg, int64_t seed) {
  const Graph& g = rg.graph;
  std::map<std::string, InputFile> files = rg.files;
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node& in = g.node(g.inputs()[i]);
    const std::string& source = i < rg.source_names.size() ? rg.source_names[i] : std::string();
    auto it = files.find(in.name);
    if (it == files.end() && !source.empty()) it = files.find(source);
    const size_t first_weight = g.inputs().size() - rg.weights.size();
    if (it == files.end() && i >= first_weight) {
      inputs.push_back(HostTensor(*rg.weights[i - first_weight]));
      continue;
    }
    if (it == files.end()) {
      inputs.push_back(random_input(in.type, seed, i));
      continue;
    }
    HostTensor& t = it->second.value;
    if (!(t.type() == in.type))
      throw Error(fmt::format("{}: error: input {} expects {}, the file holds {}", it->second.path,
                              source.empty() ? "%" + in.name : fmt::format("'{}' (%{})", source, in.name),
                              in.type.str(), t.type().str()));
    inputs.push_back(std::move(t));
    files.erase(it);
  }
  if (!files.empty()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const std::string& source = i < rg.source_names.size() ? rg.source_names[i] : std::string();
      names.push_back(source.empty() ? g.node(g.inputs()[i]).name : source);
    }
    throw Error(fmt::format("--input names '{}', which is not an input of @{} (its inputs: {})", files.begin()->first,
                            g.name(), names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  }
  return inputs;
}

void add_input_options(CLI::App* sub, InputOptions& options) {
  sub->add_option("--seed", options.seed, "Seed for the random inputs")->capture_default_str();
  sub->add_option("--input", options.files,
                  "Take input NAME (its SSA name, or an ONNX model's own input name) from a .npy file (repeatable)")
      ->type_name("NAME=FILE.npy");
  sub->add_option("--input-shape", options.shapes,
                  "The shape of an input with symbolic dims (an ONNX model's, or IR text's f32[n,768]) where no "
                  "--input file gives it (repeatable)")
      ->type_name("NAME=2x3x4");
  sub->add_option_function<std::string>(
         "--weights",
         [&options](const std::string& w) { options.weights = w == "params" ? OnnxWeights::Parameters : OnnxWeights::Inline; },
         "An ONNX model's weights as constants of its graph (inline), or as parameters bound to them (params: as "
         "onnx::load runs the model in a C++ program; other kernels)")
      ->check(CLI::IsMember({"inline", "params"}))
      ->default_str("inline");
}

}  // namespace kiln::cli
