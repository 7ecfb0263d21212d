// kiln/onnx/onnx.h - ONNX models imported as ordinary kiln graphs.
//
//   kiln::onnx::Model m = kiln::onnx::load("model.onnx");
//   std::vector<kiln::Tensor> y = m({kiln::from_host(x)});   // recorded, fused, cached as usual
//
// The importer reads the protobuf with Debian's libonnx, maps every node onto kiln ops (the
// composite ones onto the frontend's decompositions, so fusion sees through them) and checks
// each against the node's opset. What it cannot represent exactly (an op, a dtype, an
// attribute value) is an error naming the node, never dropped or approximated. kiln's shapes
// are static: symbolic dims take their size from ImportOptions::input_shapes, and a value an
// op needs while importing (a Reshape's shape) must be a constant, an initializer, computable
// from shapes, or an input whose value ImportOptions::input_values fixes. See docs/onnx.md.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/support/error.h"

namespace kiln::onnx {

/// How initializers (the model's weights) enter the graph.
enum class Weights {
  /// Graph parameters after the model's inputs; Model::weights holds their values and
  /// Model's call operator binds them. IR text stays small.
  Parameters,
  /// `constant` nodes: folded and baked into kernels, and printed inline in IR text.
  Inline,
};

/// What load() throws for a construct kiln has no exact form for: an op, a dtype, an
/// attribute or an attribute value (the message names the node). Other failures (a broken
/// file, a shape that does not fit) are plain kiln::Errors.
class Unsupported : public Error {
 public:
  using Error::Error;
};

struct ImportOptions {
  Weights weights = Weights::Parameters;
  /// With Weights::Parameters, initializers of at most this many elements are still
  /// constants: shapes, axes and scalars that ops need while importing.
  int64_t inline_max_elements = 64;
  /// With Weights::Parameters, every float initializer of rank 1 or more is a parameter,
  /// however small: for training, where a layer's small bias must take gradients too. Float
  /// scalars and integer initializers up to inline_max_elements stay constants; a model whose
  /// op needs a small float tensor while importing (Resize's scales) is then refused naming it.
  bool all_float_weights = false;
  /// Shapes for inputs whose ONNX type leaves dims symbolic ("N") or unknown.
  std::map<std::string, Shape> input_shapes;
  /// Values for inputs that an op needs at import time (a Reshape's shape given as an
  /// input): such an input becomes a constant and is no longer a parameter. Values of other
  /// inputs are ignored.
  std::map<std::string, HostTensor> input_values;
};

/// An imported model: a kiln graph whose parameters are the model's remaining inputs, in
/// the model's order, then its weights.
struct Model {
  Graph graph;
  std::vector<std::string> input_names;   // ONNX names of the first parameters
  std::vector<std::string> output_names;  // ONNX names of the graph's outputs
  std::vector<std::string> weight_names;  // ONNX names of the trailing parameters
  /// Their values, shared: a run on a host-memory device (cpu) reads them in place.
  std::vector<std::shared_ptr<const HostTensor>> weights;
  int64_t opset = 0;                      // the default domain's opset version
  std::string producer;                   // producer_name and version, as the file says

  /// Runs the model lazily on `inputs` (one per input_names entry, on one device): the
  /// weights are uploaded to that device once and kept. Returns one tensor per output.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

 private:
  struct Uploads {
    std::mutex mutex;
    std::map<std::string, std::vector<Tensor>> by_device;  // device name -> weights there
  };
  std::shared_ptr<Uploads> uploads_ = std::make_shared<Uploads>();
};

/// Imports the ONNX file at `path` (external data files are read relative to it).
Expected<Model> import_model(const std::string& path, const ImportOptions& options = {});
/// The same, throwing: Unsupported for what kiln lacks, kiln::Error for the rest.
Model load(const std::string& path, const ImportOptions& options = {});
/// A model from the bytes of an ONNX file, named `name` in messages. It has no folder:
/// external data is refused. Throws as load() does.
Model load_bytes(std::string_view bytes, const ImportOptions& options = {}, const std::string& name = "<memory>");

/// The names of the model's inputs that are not initializers, in the model's order (the
/// order of ONNX test data's input_N.pb files).
Expected<std::vector<std::string>> model_input_names(const std::string& path);

/// The tensors of an ONNX TensorProto file (`input_0.pb` of ONNX's test data).
Expected<HostTensor> read_tensor_file(const std::string& path);

/// The ONNX ops the importer maps, with the versions of each (ONNX's per-op versions: an
/// opset puts in force the newest version at or below it) its converter was written for.
/// A model whose opset puts another version in force is refused naming it.
struct SupportedOp {
  std::string name;
  int first_version;
  int last_version;
  std::vector<int> versions;  // the versions ONNX defines from first through last
};
std::vector<SupportedOp> supported_ops();
/// Every version ONNX defines of `op` in its default domain, through the newest opset kiln
/// knows (the history is generated from onnx's operator schemas); empty for an unknown op.
std::vector<int> op_versions(const std::string& op);

}  // namespace kiln::onnx
