// onnx/node_context.h - what an op converter sees of one ONNX node (internal).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "proto.h"

namespace kiln::onnx::detail {

/// One ONNX node being converted: its inputs as kiln tensors (or, where an op needs them
/// while importing, as values), its attributes, and the opset it was written against.
/// Every accessor throws kiln::Error (Unsupported for what kiln lacks); the importer adds
/// the node's name and op to the message.
class NodeContext {
 public:
  struct Input {
    Tensor tensor;                     // undefined when only `value` exists yet
    std::optional<HostTensor> value;   // known at import time
    std::string model_input;           // the model input this is, or ""
    /// The model inputs it is computed from, when ImportOptions::input_values gives every
    /// one of them (fixing them makes it known while importing); empty otherwise.
    std::vector<std::string> fixable;
  };

  NodeContext(const ::onnx::NodeProto& node, int64_t opset, int version, std::vector<Input*> inputs, Device device,
              const std::optional<std::string>& base_dir)
      : node_(node), opset_(opset), version_(version), inputs_(std::move(inputs)), device_(device),
        base_dir_(base_dir), folding_(all_known(inputs_)) {}

  const ::onnx::NodeProto& node() const { return node_; }
  int64_t opset() const { return opset_; }
  /// The version of the node's op in force at the model's opset (ReduceMean-18 at opset
  /// 18 to 21): what a converter branches on where the op's semantics changed.
  int version() const { return version_; }
  /// The device tensors are recorded on while importing (values are computed there).
  Device device() const { return device_; }

  /// Inputs present (optional inputs may be left out, or named "").
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  /// Input `i` as a tensor in the graph (a known value becomes a `constant`).
  Tensor input(size_t i);
  /// Input `i`'s value, which the op needs at import time; throws when it depends on a
  /// model input whose value is not fixed.
  const HostTensor& value(size_t i, std::string_view role);
  std::vector<int64_t> ints(size_t i, std::string_view role);
  /// The dtype and shape of input `i` without recording anything.
  DType dtype(size_t i);
  Shape shape(size_t i);

  bool has_attr(std::string_view name) const { return find(name) != nullptr; }
  int64_t attr_int(std::string_view name, std::optional<int64_t> fallback = std::nullopt) const;
  double attr_float(std::string_view name, std::optional<double> fallback = std::nullopt) const;
  std::string attr_string(std::string_view name, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  std::optional<std::vector<int64_t>> attr_ints_opt(std::string_view name) const;
  /// Lists of floats and strings; empty where the attribute is absent.
  std::vector<double> attr_floats(std::string_view name) const;
  std::vector<std::string> attr_strings(std::string_view name) const;
  HostTensor attr_tensor(std::string_view name) const;

  /// A result the op computes while importing (Shape's): a constant in the graph that the
  /// importer also keeps as a value.
  Tensor known(HostTensor value);
  const HostTensor* known_value(const Tensor& t) const {
    for (const auto& [k, v] : known_)
      if (k.impl() == t.impl()) return &v;
    return nullptr;
  }

  /// A rank-0 constant of `dtype`.
  Tensor scalar(double v, DType dtype) const;
  /// `v` as a constant of the same dtype as `like`, for arithmetic with it.
  Tensor scalar_like(double v, const Tensor& like) const { return scalar(v, like.dtype()); }

  [[noreturn]] void unsupported(const std::string& what) const;
  [[noreturn]] void invalid(const std::string& what) const;

 private:
  const ::onnx::AttributeProto* find(std::string_view name) const;
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  int version_;
  std::vector<Input*> inputs_;
  Device device_;
  const std::optional<std::string>& base_dir_;  // nullopt: read from memory, no folder
  std::vector<std::pair<Tensor, HostTensor>> known_;
  /// Every input is known, so the importer evaluates the node's outputs at once: its known
  /// inputs become constants of this node alone. Evaluating a constant that other nodes
  /// share would make it a computed value, which kiln::trace then takes for a captured
  /// tensor (an extra graph parameter).
  bool folding_;
  static bool all_known(const std::vector<Input*>& inputs) {
    for (const Input* in : inputs)
      if (in && !in->value) return false;
    return true;
  }
};

/// Converts one node; returns one tensor per ONNX output the op defines (an undefined
/// tensor for an optional output it does not produce).
using Converter = std::vector<Tensor> (*)(NodeContext& ctx);

/// A converter and the versions of its op it was written for: every version ONNX defines
/// from `first_version` through `last_version` (onnx/op_history.inc). A model whose opset
/// puts another version in force is refused, never imported with these semantics.
struct ConverterRow {
  std::string_view op;
  int first_version;
  int last_version;
  Converter convert;
  std::span<const std::string_view> attributes;  // every attribute it reads; others are refused
};

/// The table of converters, one row per ONNX op (onnx/ops_*.cpp contribute the rows).
std::span<const ConverterRow> converter_rows();
const ConverterRow* find_converter(std::string_view op);

}  // namespace kiln::onnx::detail
