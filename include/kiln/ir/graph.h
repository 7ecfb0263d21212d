// kiln/ir/graph.h - the SSA graph: typed nodes in definition order.
#pragma once

#include <cstdint>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/op.h"
#include "kiln/ir/shape.h"
#include "kiln/support/error.h"

namespace kiln {

/// Index of a node in its Graph; a node defines exactly one value.
using ValueId = uint32_t;

/// The largest slot of a `scalar` node (the values a launch binds are indexed by slot).
inline constexpr int64_t kMaxScalarSlot = (int64_t{1} << 24) - 1;

/// One operation. Operands always refer to earlier nodes (SSA in definition order).
struct Node {
  OpKind op = OpKind::Input;
  TensorType type;
  std::vector<ValueId> operands;
  Attrs attrs;
  std::string name;  // SSA name without '%'; empty: the printer makes one up
  SourceLoc loc;     // where the parser found it; unknown for built nodes
  int32_t kernel = -1;  // the fused kernel region it belongs to (Graph::kernels), or -1

  const OpInfo& info() const { return op_info(op); }
  /// Attribute `name` of this node's op; asserts that the op has it.
  const AttrValue& attr(std::string_view name) const;
  AttrValue& attr(std::string_view name);
  /// A scatter's combining op (add, mul, max or min), or nullopt where it replaces.
  std::optional<OpKind> scatter_combine() const;
};

/// A fused kernel: the nodes whose `kernel` names it run as one launch. Its members are
/// consecutive in node order, so the text form prints them as one region.
struct KernelRegion {
  std::string name;  // "k0"
  std::string note;  // why the planner stopped here (what it refused to fuse), or ""
};

/// Members, inputs and outputs of every kernel region, computed in one pass over a graph
/// (Graph::kernel_index); the per-kernel queries below each scan the whole graph.
struct KernelIndex {
  std::vector<std::vector<ValueId>> members;  // in node order
  std::vector<std::vector<ValueId>> inputs;   // values read from outside, in first-use order
  std::vector<std::vector<ValueId>> outputs;  // members used outside or returned, in node order
};

/// A function from input tensors to output tensors.
class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  /// The file the graph was parsed from, used in diagnostics ("" when built in code).
  const std::string& file() const { return file_; }
  void set_file(std::string file) { file_ = std::move(file); }

  /// Appends a graph input (a parameter in the text form).
  ValueId add_input(std::string name, TensorType type);

  /// Appends a node after checking it with its op's type rule; `declared` is required for
  /// ops whose result type is not derivable (see OpInfo::result_type_declared).
  Expected<ValueId> add(OpKind op, std::span<const ValueId> operands, Attrs attrs = {},
                        const TensorType* declared = nullptr, std::string name = {});

  /// Appends a node with the given type, unchecked (the parser's path; run verify() after).
  ValueId add_unchecked(Node node);

  void add_output(ValueId v) { outputs_.push_back(v); }
  void set_outputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }

  size_t size() const { return nodes_.size(); }
  const Node& node(ValueId v) const { return nodes_[v]; }
  Node& node(ValueId v) { return nodes_[v]; }
  const TensorType& type(ValueId v) const { return nodes_[v].type; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const ValueId> inputs() const { return inputs_; }
  std::span<const ValueId> outputs() const { return outputs_; }

  // ---- fused kernels (see KernelRegion) ----------------------------------------------
  int32_t add_kernel(KernelRegion k) {
    kernels_.push_back(std::move(k));
    return static_cast<int32_t>(kernels_.size() - 1);
  }
  std::span<const KernelRegion> kernels() const { return kernels_; }
  KernelRegion& kernel(int32_t k) { return kernels_[static_cast<size_t>(k)]; }
  /// Values that kernel `k` reads from outside itself, in first-use order.
  std::vector<ValueId> kernel_inputs(int32_t k) const;
  /// Values of kernel `k` used outside it or returned, in definition order.
  std::vector<ValueId> kernel_outputs(int32_t k) const;
  /// Members of kernel `k`, in node order.
  std::vector<ValueId> kernel_members(int32_t k) const;
  /// All of the above for every kernel, in time linear in the graph's size.
  KernelIndex kernel_index() const;

  /// Attributes sized for `op`'s schema, all absent.
  static Attrs make_attrs(OpKind op) { return Attrs(op_info(op).attrs); }

 private:
  std::string name_;
  std::string file_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<KernelRegion> kernels_;
};

}  // namespace kiln
