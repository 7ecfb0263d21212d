// ir/dot.cpp - Graphviz rendering of a graph.
#include <fmt/format.h>

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/text.h"

namespace kiln {

std::string graph_to_dot(const Graph& g) {
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", g.name());
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    const OpInfo& info = n.info();
    std::string label = n.op == OpKind::Input ? "%" + n.name : std::string(info.name);
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      const AttrValue& v = n.attrs[i];
      if (!v.present) continue;
      label += fmt::format("\\n{}", info.attrs[i].name);
      switch (info.attrs[i].kind) {
        case AttrKind::Flag: break;
        case AttrKind::Int: label += fmt::format("={}", v.i); break;
        case AttrKind::Ints: label += fmt::format("=[{}]", fmt::join(v.ints, ",")); break;
        case AttrKind::Scalar: label += "=" + format_scalar(v.scalar, n.type.dtype); break;
        case AttrKind::Scalars: label += fmt::format("=<{} values>", v.scalars->size()); break;
        case AttrKind::Custom: label += "=@" + v.custom->name; break;
      }
    }
    label += "\\n" + n.type.str();
    const char* style = n.op == OpKind::Input ? ", style=filled, fillcolor=\"#dde8f5\"" : "";
    out += fmt::format("  n{} [label=\"{}\"{}];\n", id, label, style);
    for (size_t k = 0; k < n.operands.size(); ++k)
      out += fmt::format("  n{} -> n{}{};\n", n.operands[k], id,
                         n.operands.size() > 1 ? fmt::format(" [label=\"{}\"]", k) : "");
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += fmt::format("  out{} [label=\"return {}\", shape=oval];\n  n{} -> out{};\n", i, i,
                       g.outputs()[i], i);
  }
  return out + "}\n";
}

}  // namespace kiln
