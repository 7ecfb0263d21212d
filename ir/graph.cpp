// ir/graph.cpp - building graphs.
#include "kiln/ir/graph.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln {

std::optional<OpKind> Node::scatter_combine() const {
  for (auto [flag, combine] : {std::pair{"add", OpKind::Add}, std::pair{"mul", OpKind::Mul}, std::pair{"max", OpKind::Max},
                               std::pair{"min", OpKind::Min}})
    if (attr(flag).present) return combine;
  return std::nullopt;
}

const AttrValue& Node::attr(std::string_view name) const {
  const int i = attr_index(op, name);
  KILN_ASSERT(i >= 0 && static_cast<size_t>(i) < attrs.size(), "node has the attribute asked for");
  return attrs[static_cast<size_t>(i)];
}

AttrValue& Node::attr(std::string_view name) {
  return const_cast<AttrValue&>(static_cast<const Node&>(*this).attr(name));
}

ValueId Graph::add_input(std::string name, TensorType type) {
  Node n;
  n.op = OpKind::Input;
  n.type = std::move(type);
  n.name = std::move(name);
  const ValueId id = add_unchecked(std::move(n));
  inputs_.push_back(id);
  return id;
}

Expected<ValueId> Graph::add(OpKind op, std::span<const ValueId> operands, Attrs attrs,
                             const TensorType* declared, std::string name) {
  const OpInfo& info = op_info(op);
  KILN_ASSERT(op != OpKind::Input, "inputs are added with add_input");
  if (attrs.size() == 0) attrs = make_attrs(op);
  if (info.arity >= 0 ? static_cast<int>(operands.size()) != info.arity : operands.empty())
    return make_error(fmt::format("'{}' takes {} operands, got {}", info.name,
                                  info.arity >= 0 ? std::to_string(info.arity) : "one or more",
                                  operands.size()));
  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (ValueId v : operands) {
    KILN_ASSERT(v < nodes_.size(), "operand defined in this graph");
    types.push_back(nodes_[v].type);
  }
  auto type = infer_type(op, types, attrs, declared);
  if (!type) return type.error();
  Node n;
  n.op = op;
  n.type = *type;
  n.operands.assign(operands.begin(), operands.end());
  n.attrs = std::move(attrs);
  n.name = std::move(name);
  return add_unchecked(std::move(n));
}

KernelIndex Graph::kernel_index() const {
  const size_t nk = kernels_.size();
  KernelIndex index{std::vector<std::vector<ValueId>>(nk), std::vector<std::vector<ValueId>>(nk),
                    std::vector<std::vector<ValueId>>(nk)};
  // A value used by a node outside its kernel (or returned) is an output of that kernel.
  std::vector<bool> escapes(nodes_.size(), false);
  for (ValueId v : outputs_) escapes[v] = true;
  // Last kernel a value was listed as an input of: dedupes in O(1) (members are consecutive).
  std::vector<int32_t> listed_in(nodes_.size(), -1);
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    for (ValueId o : n.operands) {
      if (nodes_[o].kernel != n.kernel) escapes[o] = true;
      if (n.kernel >= 0 && nodes_[o].kernel != n.kernel && listed_in[o] != n.kernel) {
        listed_in[o] = n.kernel;
        index.inputs[static_cast<size_t>(n.kernel)].push_back(o);
      }
    }
    if (n.kernel >= 0 && static_cast<size_t>(n.kernel) < nk)
      index.members[static_cast<size_t>(n.kernel)].push_back(static_cast<ValueId>(id));
  }
  for (size_t k = 0; k < nk; ++k)
    for (ValueId v : index.members[k])
      if (escapes[v]) index.outputs[k].push_back(v);
  return index;
}

std::vector<ValueId> Graph::kernel_members(int32_t k) const { return kernel_index().members[static_cast<size_t>(k)]; }
std::vector<ValueId> Graph::kernel_inputs(int32_t k) const { return kernel_index().inputs[static_cast<size_t>(k)]; }
std::vector<ValueId> Graph::kernel_outputs(int32_t k) const { return kernel_index().outputs[static_cast<size_t>(k)]; }

ValueId Graph::add_unchecked(Node node) {
  nodes_.push_back(std::move(node));
  return static_cast<ValueId>(nodes_.size() - 1);
}

}  // namespace kiln
