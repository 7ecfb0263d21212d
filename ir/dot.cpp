// ir/dot.cpp - Graphviz rendering of a graph.
#include <fmt/format.h>

#include "kiln/ir/dim.h"

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/text.h"

namespace kiln {
namespace {

// `text` inside a Graphviz double-quoted string.
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string graph_to_dot(const Graph& g) {
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", g.name());
  // A fused graph's kernels are clusters around their members (one launch each), with the
  // fusion planner's note where it left a value out.
  std::vector<std::string> clusters(g.kernels().size());
  for (size_t id = 0; id < g.size(); ++id)
    if (const int32_t k = g.nodes()[id].kernel; k >= 0) clusters[static_cast<size_t>(k)] += fmt::format(" n{};", id);
  for (size_t k = 0; k < clusters.size(); ++k) {
    if (clusters[k].empty()) continue;
    const KernelRegion& region = g.kernels()[k];
    std::string label = "kernel @" + region.name;
    if (!region.note.empty()) label += "\\n" + escaped(region.note);
    out += fmt::format("  subgraph cluster_k{} {{\n    label=\"{}\"; style=rounded; color=\"#7a9cc6\"; fontname=\"monospace\";\n   {}\n  }}\n",
                       k, label, clusters[k]);
  }
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
        case AttrKind::Dims: {
          std::vector<std::string> dims;
          for (int64_t d : v.ints) dims.push_back(dim_str(d));
          label += fmt::format("=[{}]", fmt::join(dims, ","));
          break;
        }
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
