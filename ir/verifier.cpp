// ir/verifier.cpp - every invariant of a Graph, checked; errors point at source locations.
#include <fmt/format.h>

#include "kiln/ir/kernel_rules.h"
#include "kiln/ir/text.h"

#include <unordered_map>

namespace kiln {

Status verify(const Graph& g) {
  auto fail = [&](const Node& n, std::string message) -> Status {
    return Diagnostic{g.file(), n.loc, std::move(message)};
  };
  size_t next_input = 0;
  std::vector<TensorType> operand_types;
  std::unordered_map<int64_t, ValueId> slot_owner;  // scalar slot -> its node
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    const OpInfo& info = n.info();
    if (n.type.shape.symbolic() ? !valid_shape(n.type.shape) : !checked_bytes(n.type))
      return fail(n, fmt::format("type {} has a negative dimension or more bytes than an int64 counts",
                                 n.type.str()));
    if (n.op == OpKind::Input) {
      if (next_input >= g.inputs().size() || g.inputs()[next_input] != id)
        return fail(n, fmt::format("input node %{} is not a graph parameter", id));
      ++next_input;
      continue;
    }
    if (n.attrs.size() != info.attrs.size())
      return fail(n, fmt::format("'{}' has {} attribute slots, its schema {}", info.name,
                                 n.attrs.size(), info.attrs.size()));
    const size_t arity = n.operands.size();
    if (info.arity >= 0 ? arity != static_cast<size_t>(info.arity) : arity == 0)
      return fail(n, fmt::format("'{}' takes {} operands, got {}", info.name,
                                 info.arity >= 0 ? std::to_string(info.arity) : "one or more", arity));
    operand_types.clear();
    for (ValueId v : n.operands) {
      if (v >= id) return fail(n, fmt::format("'{}' uses a value defined after it", info.name));
      operand_types.push_back(g.type(v));
    }
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      const AttrValue& v = n.attrs[i];
      if (info.attrs[i].required && !v.present)
        return fail(n, fmt::format("'{}' needs attribute '{}'", info.name, info.attrs[i].name));
      if (v.present && info.attrs[i].kind == AttrKind::Scalars && !v.scalars)
        return fail(n, fmt::format("'{}' attribute '{}' has no values", info.name, info.attrs[i].name));
    }
    auto inferred = infer_type(n.op, operand_types, n.attrs, &n.type);
    if (!inferred) return fail(n, inferred.error().message);
    if (!(*inferred == n.type))
      return fail(n, fmt::format("'{}' result is declared {} but its operands give {}", info.name,
                                 n.type.str(), inferred->str()));
    if (n.op == OpKind::ScalarParam) {
      // One value per slot: the launch binds each slot once. Slots survive passes that
      // remove nodes, so they are bounded by a constant, not by the graph's size.
      const int64_t slot = n.attr("slot").i;
      if (slot > kMaxScalarSlot)
        return fail(n, fmt::format("'scalar' slot {} is out of range (at most {})", slot, kMaxScalarSlot));
      if (auto [it, fresh] = slot_owner.emplace(slot, static_cast<ValueId>(id)); !fresh)
        return fail(n, fmt::format("'scalar' slot {} is already bound by node {}", slot, it->second));
    }
  }
  // Kernel regions: valid indices, members consecutive in node order (one region each).
  std::vector<bool> closed(g.kernels().size(), false);
  int32_t current = -1;
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    if (n.op == OpKind::Input) continue;
    if (n.kernel < -1 || n.kernel >= static_cast<int32_t>(g.kernels().size()))
      return fail(n, fmt::format("node belongs to kernel {}, which does not exist", n.kernel));
    if (n.kernel != current) {
      if (current >= 0) closed[static_cast<size_t>(current)] = true;
      if (n.kernel >= 0 && closed[static_cast<size_t>(n.kernel)])
        return fail(n, fmt::format("kernel @{} is split: its operations must be consecutive",
                                   g.kernels()[static_cast<size_t>(n.kernel)].name));
      current = n.kernel;
    }
  }
  if (Status st = check_kernel_rules(g); !st) return st;
  if (next_input != g.inputs().size())
    return Diagnostic{g.file(), {}, "graph parameters must be input nodes in order"};
  if (g.outputs().empty()) return Diagnostic{g.file(), {}, "graph returns nothing"};
  for (ValueId v : g.outputs())
    if (v >= g.size()) return Diagnostic{g.file(), {}, fmt::format("graph returns undefined value {}", v)};
  return Status::ok();
}

}  // namespace kiln
