// passes/dce.cpp - dead code elimination.
//
// Keeps every node that an output depends on, and every parameter (the signature does not
// change); drops the rest. Guarantees: outputs bit-identical; no node is added.
#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {

Graph dead_code_elimination(const Graph& g, const PassOptions&) {
  std::vector<bool> live(g.size(), false);
  for (ValueId v : g.outputs()) live[v] = true;
  for (size_t id = g.size(); id-- > 0;) {
    if (!live[id]) continue;
    for (ValueId o : g.node(static_cast<ValueId>(id)).operands) live[o] = true;
  }
  passes::Rewriter r(g);
  for (size_t id = 0; id < g.size(); ++id)
    if (live[id] && g.node(static_cast<ValueId>(id)).op != OpKind::Input) r.copy(static_cast<ValueId>(id));
  return r.finish();
}

}  // namespace kiln
