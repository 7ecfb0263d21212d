// frontend/call.cpp - a Graph recorded into the pending stream as if written with Tensors.
#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "kiln/ir/symbolic.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln {

std::vector<Tensor> call(const Graph& g, const std::vector<Tensor>& args) {
  const auto params = g.inputs();
  if (args.size() != params.size())
    throw Error(fmt::format("call @{}: {} tensors for {} parameters", g.name(), args.size(), params.size()));
  if (has_symbolic_dims(g)) {
    // Its sizes are the arguments': recorded as the graph those sizes make.
    std::vector<TensorType> types;
    for (size_t k = 0; k < args.size(); ++k) {
      if (!args[k].defined())
        throw Error(fmt::format("call @{}: the tensor for %{} is undefined", g.name(), g.node(params[k]).name));
      types.push_back(TensorType{args[k].dtype(), args[k].shape()});
    }
    Expected<Graph> bound = specialize_for(g, types);
    if (!bound) throw Error(fmt::format("call @{}: {}", g.name(), bound.error().str()));
    return call(*bound, args);
  }
  const Device device = args.empty() ? Device{} : args.front().device();
  std::vector<Tensor> values(g.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor& a = args[k];
    const TensorType& want = g.type(params[k]);
    if (!a.defined()) throw Error(fmt::format("call @{}: the tensor for %{} is undefined", g.name(), g.node(params[k]).name));
    if (a.dtype() != want.dtype || a.shape() != want.shape)
      throw Error(fmt::format("call @{}: %{} is {}, got a tensor of {}", g.name(), g.node(params[k]).name, want.str(),
                              TensorType{a.dtype(), a.shape()}.str()));
    if (a.device() != device)
      throw Error(fmt::format("call @{}: the tensors are on different devices ({} and {})", g.name(), device.str(),
                              a.device().str()));
    values[params[k]] = a;
  }
  std::vector<const Tensor*> operands;
  for (ValueId v = 0; v < g.size(); ++v) {
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    if (n.info().category == OpCategory::Source) {
      // Sources have no operand to take a device from; the scalar slots are renumbered when
      // the stream is cut, as for full().
      values[v] = Tensor(detail::make_pending(n.op, n.type, device, {}, n.attrs));
      continue;
    }
    operands.clear();
    for (ValueId o : n.operands) operands.push_back(&values[o]);
    values[v] = detail::record(op_name(n.op), n.op, operands, n.attrs,
                               n.info().result_type_declared() ? &n.type : nullptr);
  }
  std::vector<Tensor> out;
  for (ValueId o : g.outputs()) out.push_back(values[o]);
  return out;
}

}  // namespace kiln
