// passes/rewriter.cpp - rebuilding graphs.
#include "rewriter.h"

namespace kiln::passes {

Rewriter::Rewriter(const Graph& src, bool keep_kernels) : src_(src), out_(src.name()), map_(src.size(), 0) {
  out_.set_file(src.file());
  if (keep_kernels)
    for (const KernelRegion& k : src.kernels()) out_.add_kernel(k);  // members keep their kernel
  for (ValueId v : src.inputs()) {
    const Node& n = src.node(v);
    map_[v] = out_.add_input(n.name, n.type);
    out_.node(map_[v]).loc = n.loc;
  }
}

ValueId Rewriter::copy(ValueId v) {
  const Node& n = src_.node(v);
  std::vector<ValueId> operands;
  operands.reserve(n.operands.size());
  for (ValueId o : n.operands) operands.push_back(map_[o]);
  map_[v] = add(with_operands(n, std::move(operands)));
  return map_[v];
}

Graph Rewriter::finish() {
  std::vector<ValueId> outputs;
  for (ValueId v : src_.outputs()) outputs.push_back(map_[v]);
  out_.set_outputs(std::move(outputs));
  return std::move(out_);
}

Node with_operands(const Node& n, std::vector<ValueId> operands) {
  Node copy;
  copy.op = n.op;
  copy.type = n.type;
  copy.operands = std::move(operands);
  copy.attrs = n.attrs;
  copy.name = n.name;
  copy.loc = n.loc;
  copy.kernel = n.kernel;
  return copy;
}

std::optional<double> splat_value(const Node& n) {
  if (n.op != OpKind::Constant) return std::nullopt;
  if (n.attr("value").present) return n.attr("value").scalar.as_double();
  const auto& data = *n.attr("data").scalars;
  if (data.empty()) return std::nullopt;
  for (const Scalar& s : data)
    if (!(s == data[0])) return std::nullopt;
  return data[0].as_double();
}

}  // namespace kiln::passes
