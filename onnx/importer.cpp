// onnx/importer.cpp - an ONNX ModelProto traced into a kiln Graph, node by node.
//
// The importer runs each node's converter on kiln::Tensors while kiln::trace records, so
// the result is exactly what the same code written against the frontend would give (the
// composite ops decompose as the frontend's do, and fuse). Values an op needs while
// importing (shapes, axes, pads) are computed as they appear: a node whose inputs are all
// known is evaluated at once on the `interp` device and stays a value; a value used as data
// enters the graph as a `constant`.
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "kiln/ir/text.h"
#include "node_context.h"
#include "op_history.h"

namespace kiln::onnx {
namespace detail {
namespace {

constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;  // larger known results stay in the graph

// Thrown when an op needs a value computed from model inputs that ImportOptions::input_values
// gives (or one such input itself): the import starts again with those inputs fixed.
struct NeedsInputValue {
  std::vector<std::string> names;
};

}  // namespace

// ---- NodeContext -------------------------------------------------------------------------

Tensor NodeContext::input(size_t i) {
  if (!has_input(i)) invalid(fmt::format("input {} is missing", i));
  Input& in = *inputs_[i];
  if (folding_ && in.value) return kiln::constant(*in.value, device_);
  if (!in.tensor.defined()) in.tensor = kiln::constant(*in.value, device_);
  return in.tensor;
}

const HostTensor& NodeContext::value(size_t i, std::string_view role) {
  if (!has_input(i)) invalid(fmt::format("input {} ({}) is missing", i, role));
  Input& in = *inputs_[i];
  if (in.value) return *in.value;
  if (!in.fixable.empty()) throw NeedsInputValue{in.fixable};
  const std::string& name = node_.input(static_cast<int>(i));
  if (!in.model_input.empty())
    throw Unsupported(fmt::format("its {} ('{}') is the model input '{}', whose value kiln needs while importing "
                                  "(shapes are static): fix it with ImportOptions::input_values or --input-value",
                                  role, name, in.model_input));
  throw Unsupported(fmt::format("its {} ('{}') is computed from the model's inputs at run time; kiln needs it "
                                "while importing (shapes are static)",
                                role, name));
}

std::vector<int64_t> NodeContext::ints(size_t i, std::string_view role) {
  const HostTensor& v = value(i, role);
  if (!is_integer(v.dtype())) invalid(fmt::format("its {} must be integers, got {}", role, v.type().str()));
  std::vector<int64_t> out(static_cast<size_t>(v.numel()));
  for (int64_t k = 0; k < v.numel(); ++k) out[static_cast<size_t>(k)] = v.get_int(k);
  return out;
}

DType NodeContext::dtype(size_t i) {
  if (!has_input(i)) invalid(fmt::format("input {} is missing", i));
  const Input& in = *inputs_[i];
  return in.value ? in.value->dtype() : in.tensor.dtype();
}

Shape NodeContext::shape(size_t i) {
  if (!has_input(i)) invalid(fmt::format("input {} is missing", i));
  const Input& in = *inputs_[i];
  return in.value ? in.value->shape() : in.tensor.shape();
}

const ::onnx::AttributeProto* NodeContext::find(std::string_view name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

namespace {

// The value of attribute `a` (named `name`), which must be of `type`, or `fallback` when
// the node leaves it out; one message per failure for every typed accessor below.
template <class T, class Get>
T attr_or(const NodeContext& c, const ::onnx::AttributeProto* a, std::string_view name,
          ::onnx::AttributeProto::AttributeType type, std::string_view kind, const std::optional<T>& fallback, Get get) {
  if (!a) {
    if (!fallback) c.invalid(fmt::format("attribute '{}' is required", name));
    return *fallback;
  }
  if (a->type() != type) c.invalid(fmt::format("attribute '{}' must be {}", name, kind));
  return get(*a);
}

}  // namespace

int64_t NodeContext::attr_int(std::string_view name, std::optional<int64_t> fallback) const {
  return attr_or<int64_t>(*this, find(name), name, ::onnx::AttributeProto::INT, "an int", fallback,
                          [](const auto& a) { return a.i(); });
}

double NodeContext::attr_float(std::string_view name, std::optional<double> fallback) const {
  return attr_or<double>(*this, find(name), name, ::onnx::AttributeProto::FLOAT, "a float", fallback,
                         [](const auto& a) { return static_cast<double>(a.f()); });
}

std::string NodeContext::attr_string(std::string_view name, std::optional<std::string> fallback) const {
  return attr_or<std::string>(*this, find(name), name, ::onnx::AttributeProto::STRING, "a string", fallback,
                              [](const auto& a) { return a.s(); });
}

std::optional<std::vector<int64_t>> NodeContext::attr_ints_opt(std::string_view name) const {
  const auto* a = find(name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::INTS) invalid(fmt::format("attribute '{}' must be a list of ints", name));
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<int64_t> NodeContext::attr_ints(std::string_view name, std::optional<std::vector<int64_t>> fallback) const {
  if (auto v = attr_ints_opt(name)) return *v;
  if (!fallback) invalid(fmt::format("attribute '{}' is required", name));
  return *fallback;
}

std::vector<double> NodeContext::attr_floats(std::string_view name) const {
  const auto* a = find(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::FLOATS) invalid(fmt::format("attribute '{}' must be a list of floats", name));
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

std::vector<std::string> NodeContext::attr_strings(std::string_view name) const {
  const auto* a = find(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::STRINGS) invalid(fmt::format("attribute '{}' must be a list of strings", name));
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

HostTensor NodeContext::attr_tensor(std::string_view name) const {
  return attr_or<HostTensor>(*this, find(name), name, ::onnx::AttributeProto::TENSOR, "a tensor", std::nullopt,
                             [&](const auto& a) {
                               ExternalFiles files(base_dir_);
                               return tensor_from_proto(a.t(), files);
                             });
}

Tensor NodeContext::scalar(double v, DType dtype) const {
  HostTensor h(TensorType{dtype, Shape{}});
  if (is_float(dtype)) {
    h.set_double(0, v);
  } else {
    // A bound of -inf on integers (Clip's default) bounds nothing: values past the type
    // saturate to its range. A NaN has no integer (converting it was undefined behaviour).
    if (std::isnan(v)) invalid(fmt::format("a NaN cannot be an {} value", dtype_name(dtype)));
    const auto lo = static_cast<double>(int_min(dtype)), hi = static_cast<double>(int_max(dtype));
    h.set_int(0, v <= lo ? int_min(dtype) : v >= hi ? int_max(dtype) : static_cast<int64_t>(v));
  }
  return kiln::constant(h, device_);
}

Tensor NodeContext::known(HostTensor value) {
  Tensor t = kiln::constant(value, device_);
  known_.emplace_back(t, std::move(value));
  return t;
}

void NodeContext::unsupported(const std::string& what) const { throw Unsupported(what); }
void NodeContext::invalid(const std::string& what) const { throw Error(what); }

const ConverterRow* find_converter(std::string_view op) {
  for (const ConverterRow& r : converter_rows())
    if (r.op == op) return &r;
  return nullptr;
}

// ---- the importer ----------------------------------------------------------------------

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// An SSA name for IR text: letters, digits, '_' and '.', unique in the graph.
std::string ssa_name(const std::string& onnx_name, std::unordered_map<std::string, int>& taken) {
  std::string s;
  for (char c : onnx_name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  if (int& n = taken[s]; n++ > 0) s += fmt::format("_{}", n);
  return s;
}

std::string node_label(const ::onnx::NodeProto& n, int64_t opset) {
  return n.name().empty() ? fmt::format("{} node with output '{}' (opset {})", n.op_type(),
                                        n.output_size() ? n.output(0) : std::string("?"), opset)
                          : fmt::format("node '{}' ({}, opset {})", n.name(), n.op_type(), opset);
}

// The version of `row`'s op in force at `opset`; Unsupported unless the converter was
// written for it.
int checked_version(const ConverterRow& row, int64_t opset) {
  const int version = op_version_at(row.op, opset);
  if (version == 0)
    throw Error(fmt::format("{} does not exist at opset {} (ONNX defines it from opset {})", row.op, opset,
                            op_versions(row.op).front().version));
  if (version < row.first_version)
    throw Unsupported(fmt::format("{}-{} (in force at opset {}) is not supported: kiln maps versions {} to {}", row.op,
                                  version, opset, row.first_version, row.last_version));
  if (version > row.last_version)
    throw Unsupported(fmt::format("{}-{} (in force at opset {}) is newer than kiln's converter, written for versions "
                                  "{} to {}{}",
                                  row.op, version, opset, row.first_version, row.last_version,
                                  opset > last_known_opset()
                                      ? fmt::format(" (kiln knows ONNX through opset {})", last_known_opset())
                                      : std::string()));
  return version;
}

struct Importer {
  const ::onnx::ModelProto& model;
  const ImportOptions& options;
  std::string path;
  std::optional<std::string> base_dir;
  const std::vector<std::string>& fixed;  // model inputs replaced by their given values
  const std::vector<HostTensor>& initializers;  // the graph's, in its order, read once per load
  Model result;
  std::vector<size_t> weight_initializers;  // the initializer of each of result.weight_names

  std::vector<Tensor> run_nodes(const std::vector<Tensor>& args,
                                const std::vector<std::pair<std::string, HostTensor>>& known_inits,
                                const std::vector<std::string>& arg_names,
                                const std::vector<std::string>& arg_inputs) {
    const Device dev = Device::interp();
    std::unordered_map<std::string, NodeContext::Input> env;
    for (size_t k = 0; k < args.size(); ++k) {
      NodeContext::Input in;
      in.tensor = args[k];
      in.model_input = arg_inputs[k];
      if (!in.model_input.empty() && options.input_values.count(in.model_input)) in.fixable = {in.model_input};
      env[arg_names[k]] = std::move(in);
    }
    for (const auto& [name, value] : known_inits) env[name].value = value;

    const auto& g = model.graph();
    for (const ::onnx::NodeProto& node : g.node()) {
      const std::string label = node_label(node, result.opset);
      try {
        if (!is_default_domain(node.domain()))
          throw Unsupported(fmt::format("its domain '{}' is not supported (only the default ONNX domain is)",
                                        node.domain()));
        const ConverterRow* row = find_converter(node.op_type());
        if (!row) throw Unsupported(fmt::format("op {} is not supported", node.op_type()));
        const int version = checked_version(*row, result.opset);
        for (const auto& a : node.attribute()) {
          bool handled = false;
          for (std::string_view h : row->attributes) handled = handled || h == a.name();
          if (!handled) throw Unsupported(fmt::format("attribute '{}' of {} is not supported", a.name(), node.op_type()));
        }
        std::vector<NodeContext::Input*> inputs;
        bool all_known = true;
        // What fixing would make this node's outputs known: every model input they are
        // computed from, if each has a given value.
        std::vector<std::string> fixable;
        bool fixing_helps = true;
        for (const std::string& name : node.input()) {
          if (name.empty()) {
            inputs.push_back(nullptr);
            continue;
          }
          auto it = env.find(name);
          if (it == env.end()) throw Error(fmt::format("input '{}' is not defined before this node", name));
          inputs.push_back(&it->second);
          all_known = all_known && it->second.value.has_value();
          if (it->second.value) continue;
          fixing_helps = fixing_helps && !it->second.fixable.empty();
          for (const std::string& f : it->second.fixable)
            if (std::find(fixable.begin(), fixable.end(), f) == fixable.end()) fixable.push_back(f);
        }
        if (!fixing_helps) fixable.clear();
        while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
        NodeContext ctx(node, result.opset, version, inputs, dev, base_dir);
        std::vector<Tensor> outs = row->convert(ctx);
        for (int k = 0; k < node.output_size(); ++k) {
          const std::string& name = node.output(k);
          if (name.empty()) continue;
          if (static_cast<size_t>(k) >= outs.size() || !outs[static_cast<size_t>(k)].defined())
            throw Unsupported(fmt::format("output {} ('{}') of {} is not supported", k, name, node.op_type()));
          NodeContext::Input v;
          const Tensor& t = outs[static_cast<size_t>(k)];
          if (const HostTensor* h = ctx.known_value(t)) {
            v.value = *h;
          } else if (all_known && t.numel() <= kMaxFoldedElements) {
            v.value = t.host();  // computed from constants only: on interp, at once
          } else {
            v.tensor = t;
            v.fixable = fixable;
          }
          env[name] = std::move(v);
        }
      } catch (const NeedsInputValue&) {
        throw;
      } catch (const Unsupported& e) {
        throw Unsupported(fmt::format("{}: {}", label, e.what()));
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", label, e.what()));
      }
    }
    std::vector<Tensor> outputs;
    for (const auto& o : g.output()) {
      auto it = env.find(o.name());
      if (it == env.end()) throw Error(fmt::format("graph output '{}' is never defined", o.name()));
      NodeContext::Input& v = it->second;
      outputs.push_back(v.tensor.defined() ? v.tensor : kiln::constant(*v.value, dev));
      result.output_names.push_back(o.name());
    }
    return outputs;
  }

  Shape input_shape(const ::onnx::ValueInfoProto& vi) {
    const auto& tt = vi.type().tensor_type();
    if (auto it = options.input_shapes.find(vi.name()); it != options.input_shapes.end()) {
      // A given shape sizes the symbolic dims; the dims the model states must agree.
      const Shape& given = it->second;
      if (tt.has_shape()) {
        const auto& dims = tt.shape().dim();
        bool fits = dims.size() == given.rank();
        for (int d = 0; fits && d < dims.size(); ++d)
          fits = !dims[d].has_dim_value() || dims[d].dim_value() == given[d];
        if (!fits) {
          std::vector<std::string> declared;
          for (const auto& d : dims) declared.push_back(d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param());
          throw Error(fmt::format("input '{}' is given the shape {}, the model declares [{}]", vi.name(), given.str(),
                                  fmt::join(declared, ", ")));
        }
      }
      return given;
    }
    if (!tt.has_shape()) throw Error(fmt::format("input '{}' has no shape: give one in ImportOptions::input_shapes "
                                                 "(--input-shape {}=2x3)", vi.name(), vi.name()));
    std::vector<int64_t> dims;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value())
        throw Error(fmt::format("input '{}' has the symbolic dim '{}': give its shape in ImportOptions::input_shapes "
                                "(--input-shape {}=...)", vi.name(), d.dim_param(), vi.name()));
      dims.push_back(d.dim_value());
    }
    return Shape(dims);
  }

  void run() {
    const auto& g = model.graph();
    for (const auto& op : model.opset_import())
      if (is_default_domain(op.domain())) result.opset = op.version();
    if (result.opset == 0) result.opset = 1;  // IR version 3 and before: no opset_import means 1
    result.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());

    std::unordered_map<std::string, const ::onnx::TensorProto*> inits;
    for (const auto& t : g.initializer()) inits[t.name()] = &t;
    if (g.sparse_initializer_size() > 0) throw Unsupported("sparse initializers are not supported");

    std::vector<Tensor> examples;
    std::vector<std::string> arg_names, arg_inputs;
    std::vector<std::pair<std::string, HostTensor>> known;
    for (const auto& vi : g.input()) {
      if (inits.count(vi.name())) continue;  // an initializer listed as an input (IR < 4): a weight
      if (!vi.type().has_tensor_type())
        throw Unsupported(fmt::format("input '{}' is not a tensor (sequences, maps and optionals are not supported)",
                                      vi.name()));
      const DType dt = dtype_from_onnx(vi.type().tensor_type().elem_type(), fmt::format("input '{}'", vi.name()));
      if (std::find(fixed.begin(), fixed.end(), vi.name()) != fixed.end()) {
        const HostTensor& v = options.input_values.at(vi.name());
        if (v.dtype() != dt)
          throw Error(fmt::format("the value given for input '{}' is {}, the model declares {}", vi.name(),
                                  v.type().str(), dtype_name(dt)));
        known.emplace_back(vi.name(), v);
        continue;
      }
      const Shape shape = input_shape(vi);
      examples.push_back(kiln::zeros(shape, dt, Device::interp()));
      arg_names.push_back(vi.name());
      arg_inputs.push_back(vi.name());
      result.input_names.push_back(vi.name());
    }
    for (int k = 0; k < g.initializer_size(); ++k) {
      const ::onnx::TensorProto& t = g.initializer(k);
      const HostTensor& v = initializers[static_cast<size_t>(k)];
      const bool trainable = options.all_float_weights && is_float(v.dtype()) && v.shape().rank() > 0 && v.numel() > 0;
      if (options.weights == Weights::Parameters && (v.numel() > options.inline_max_elements || trainable)) {
        examples.push_back(kiln::zeros(v.shape(), v.dtype(), Device::interp()));
        arg_names.push_back(t.name());
        arg_inputs.push_back("");
        result.weight_names.push_back(t.name());
        weight_initializers.push_back(static_cast<size_t>(k));  // moved into result.weights once imported
      } else {
        known.emplace_back(t.name(), v);
      }
    }
    if (examples.empty()) {
      // kiln::trace needs a parameter to start from; a model of constants computes them.
      examples.push_back(kiln::zeros(Shape{}, DType::F32, Device::interp()));
      arg_names.push_back("");
      arg_inputs.push_back("");
    }
    Graph traced = trace([&](const std::vector<Tensor>& args) { return run_nodes(args, known, arg_names, arg_inputs); },
                         examples);
    // Numbers the converters compute with (x * 0.5) trace as launch-time scalars; a model's
    // numbers are fixed, so they become constants: folded, literals in the kernels, and no
    // launch arguments (Vulkan fits only a few in its push constants).
    for (ValueId v = 0; v < traced.size(); ++v) {
      Node& n = traced.node(v);
      if (n.op != OpKind::ScalarParam) continue;
      const Scalar value = n.attr("value").scalar;
      n.op = OpKind::Constant;
      n.attrs = Graph::make_attrs(OpKind::Constant);
      n.attr("value").present = true;
      n.attr("value").scalar = value;
    }
    // Name the parameters after the model's inputs and weights.
    std::unordered_map<std::string, int> taken;
    const auto params = traced.inputs();
    for (size_t k = 0; k < params.size() && k < arg_names.size(); ++k)
      if (!arg_names[k].empty()) traced.node(params[k]).name = ssa_name(arg_names[k], taken);
    for (size_t k = 0; k < traced.outputs().size() && k < result.output_names.size(); ++k) {
      Node& out = traced.node(traced.outputs()[k]);
      if (out.op != OpKind::Input && out.name.empty()) out.name = ssa_name(result.output_names[k], taken);
    }
    traced.set_name(ssa_name(g.name().empty() ? std::string("model") : g.name(), taken));
    traced.set_file(path);
    result.graph = std::move(traced);
    if (result.graph.inputs().size() != result.input_names.size() + result.weight_names.size())
      drop_placeholder_or_fail();
  }

  // A model with no inputs was traced with one placeholder parameter that nothing reads.
  void drop_placeholder_or_fail() {
    const Graph& g = result.graph;
    if (!(result.input_names.empty() && result.weight_names.empty() && g.inputs().size() == 1))
      throw Error(fmt::format("the traced graph has {} parameters for {} inputs and {} weights (a kiln bug)",
                              g.inputs().size(), result.input_names.size(), result.weight_names.size()));
    Graph out(g.name());
    out.set_file(g.file());
    std::vector<ValueId> map(g.size());
    for (ValueId v = 1; v < g.size(); ++v) {
      Node n = g.node(v);
      for (ValueId& o : n.operands) o = map[o];
      map[v] = out.add_unchecked(std::move(n));
    }
    for (ValueId o : g.outputs()) out.add_output(map[o]);
    result.graph = std::move(out);
  }
};

}  // namespace
}  // namespace detail

namespace {

// Imports `model`, named `path` in messages; its external data is read from `base_dir`
// (nullopt: none, the model came from memory).
Model load_proto(::onnx::ModelProto model, const std::string& path, const std::optional<std::string>& base_dir,
                 const ImportOptions& options) {
  std::vector<HostTensor> initializers;
  std::vector<std::string> fixed;
  try {
    // Each initializer's bytes are dropped from the message once read: the weights are in
    // memory once, not twice.
    detail::ExternalFiles files(base_dir);
    for (auto& t : *model.mutable_graph()->mutable_initializer()) {
      initializers.push_back(detail::tensor_from_proto(t, files));
      std::string().swap(*t.mutable_raw_data());  // clear_raw_data() alone keeps the capacity
      t.clear_raw_data();
    }
  } catch (const Unsupported& e) {
    throw Unsupported(fmt::format("{}: {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  for (;;) {
    detail::Importer imp{model, options, path, base_dir, fixed, initializers, {}, {}};
    try {
      imp.run();
    } catch (const detail::NeedsInputValue& need) {
      // The next run makes them constants; an input is fixed once, so this ends.
      bool added = false;
      for (const std::string& name : need.names)
        if (std::find(fixed.begin(), fixed.end(), name) == fixed.end()) {
          fixed.push_back(name);
          added = true;
        }
      if (!added)
        throw Unsupported(fmt::format("{}: a value kiln needs while importing stays unknown with {} fixed", path,
                                      fmt::join(need.names, ", ")));
      continue;
    } catch (const Unsupported& e) {
      throw Unsupported(fmt::format("{}: {}", path, e.what()));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", path, e.what()));
    }
    if (Status st = verify(imp.result.graph); !st)
      throw Error(fmt::format("{}: the imported graph does not verify (a kiln bug): {}", path, st.error().str()));
    for (size_t k : imp.weight_initializers)
      imp.result.weights.push_back(std::make_shared<const HostTensor>(std::move(initializers[k])));
    return std::move(imp.result);
  }
}

}  // namespace

Model load(const std::string& path, const ImportOptions& options) {
  return load_proto(detail::read_model_file(path), path, std::filesystem::path(path).parent_path().string(), options);
}

Model load_bytes(std::string_view bytes, const ImportOptions& options, const std::string& name) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw Error(fmt::format("{}: {} bytes is past protobuf's 2 GiB limit", name, bytes.size()));
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw Error(fmt::format("{}: not an ONNX model (the protobuf does not parse)", name));
  if (!model.has_graph()) throw Error(fmt::format("{}: the model has no graph", name));
  return load_proto(std::move(model), name, std::nullopt, options);
}

Expected<Model> import_model(const std::string& path, const ImportOptions& options) {
  try {
    return load(path, options);
  } catch (const Error& e) {
    return make_error(e.what());
  }
}

Expected<std::vector<std::string>> model_input_names(const std::string& path) {
  try {
    const ::onnx::ModelProto model = detail::read_model_file(path);
    std::unordered_map<std::string, bool> inits;
    for (const auto& t : model.graph().initializer()) inits[t.name()] = true;
    std::vector<std::string> names;
    for (const auto& vi : model.graph().input())
      if (!inits.count(vi.name())) names.push_back(vi.name());
    return names;
  } catch (const Error& e) {
    return make_error(e.what());
  }
}

Expected<HostTensor> read_tensor_file(const std::string& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(fmt::format("{}: cannot open the file", path));
    ::onnx::TensorProto t;
    if (!t.ParseFromIstream(&in)) return make_error(fmt::format("{}: not an ONNX TensorProto", path));
    detail::ExternalFiles files(std::filesystem::path(path).parent_path().string());
    return detail::tensor_from_proto(t, files);
  } catch (const Error& e) {
    return make_error(fmt::format("{}: {}", path, e.what()));
  }
}

std::vector<SupportedOp> supported_ops() {
  std::vector<SupportedOp> out;
  for (const auto& r : detail::converter_rows()) {
    SupportedOp op{std::string(r.op), r.first_version, r.last_version, {}};
    for (const detail::OpVersion& v : detail::op_versions(r.op))
      if (v.version >= r.first_version && v.version <= r.last_version) op.versions.push_back(v.version);
    out.push_back(std::move(op));
  }
  return out;
}

std::vector<int> op_versions(const std::string& op) {
  std::vector<int> out;
  for (const detail::OpVersion& v : detail::op_versions(op)) out.push_back(v.version);
  return out;
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != input_names.size())
    throw Error(fmt::format("onnx model @{}: {} inputs given, it takes {}", graph.name(), inputs.size(),
                            input_names.size()));
  std::vector<Tensor> args = inputs;
  if (!weights.empty()) {
    const Device device = inputs.empty() ? Device{} : inputs.front().device();
    std::lock_guard lock(uploads_->mutex);
    std::vector<Tensor>& w = uploads_->by_device[device.str()];
    if (w.empty())
      for (const std::shared_ptr<const HostTensor>& h : weights) w.push_back(from_host(h, device));
    args.insert(args.end(), w.begin(), w.end());
  }
  return call(graph, args);
}

}  // namespace kiln::onnx
