// ir/printer.cpp - the IR text form, written.
#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/index_map.h"
#include "kiln/ir/text.h"
#include "kiln/ir/dim.h"
#include "lexer.h"

namespace kiln {
// Given names are kept; unnamed values get %0, %1... skipping names already taken.
std::vector<std::string> value_names(const Graph& g) {
  std::unordered_set<std::string> taken;
  for (const Node& n : g.nodes())
    if (!n.name.empty()) taken.insert(n.name);
  std::vector<std::string> names(g.size());
  int next = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!n.name.empty()) {
      names[i] = n.name;
      continue;
    }
    std::string candidate;
    do candidate = std::to_string(next++);
    while (taken.count(candidate));
    taken.insert(candidate);
    names[i] = candidate;
  }
  return names;
}

namespace {

void print_attr(std::string& out, const AttrSpec& spec, const AttrValue& v, DType dtype) {
  out += spec.name;
  switch (spec.kind) {
    case AttrKind::Flag: return;
    case AttrKind::Int: out += fmt::format(" = {}", v.i); return;
    case AttrKind::Ints: out += fmt::format(" = [{}]", fmt::join(v.ints, ", ")); return;
    case AttrKind::Dims: {
      out += " = [";
      for (size_t i = 0; i < v.ints.size(); ++i) out += (i ? ", " : "") + dim_str(v.ints[i]);
      out += "]";
      return;
    }
    case AttrKind::Scalar: out += " = " + format_scalar(v.scalar, dtype); return;
    case AttrKind::Scalars:
      out += " = [";
      for (size_t i = 0; i < v.scalars->size(); ++i) {
        if (i) out += ", ";
        out += format_scalar((*v.scalars)[i], dtype);
      }
      out += "]";
      return;
    case AttrKind::Custom: return;  // written in the op's place: custom @name(...)
  }
}

}  // namespace

std::string print_graph(const Graph& g) {
  const std::vector<std::string> names = value_names(g);
  // The custom kernels the graph calls, declared before it, so that the text stands alone.
  std::string out;
  std::unordered_set<std::string> declared;
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Custom && declared.insert(n.attrs[0].custom->digest).second)
      out += custom_declaration(*n.attrs[0].custom) + "\n";
  out += fmt::format("graph @{}(", g.name());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId v = g.inputs()[i];
    out += fmt::format("{}%{}: {}", i ? ", " : "", names[v], g.type(v).str());
  }
  out += ") -> ";
  const auto outputs = g.outputs();
  if (outputs.size() != 1) out += "(";
  for (size_t i = 0; i < outputs.size(); ++i) out += (i ? ", " : "") + g.type(outputs[i]).str();
  if (outputs.size() != 1) out += ")";
  out += " {\n";
  const KernelIndex index = g.kernel_index();
  int32_t open_kernel = -1;
  auto value_list = [&](const std::vector<ValueId>& values) {
    std::string s;
    for (size_t i = 0; i < values.size(); ++i) s += fmt::format("{}%{}", i ? ", " : "", names[values[i]]);
    return s;
  };
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    if (n.op == OpKind::Input) continue;
    if (n.kernel != open_kernel) {
      if (open_kernel >= 0) out += "  }\n";
      open_kernel = n.kernel;
      if (open_kernel >= 0) {
        const KernelRegion& k = g.kernels()[static_cast<size_t>(open_kernel)];
        const auto ki = static_cast<size_t>(open_kernel);
        out += fmt::format("  kernel @{}({}) -> ({})", k.name, value_list(index.inputs[ki]),
                           value_list(index.outputs[ki]));
        if (!k.note.empty()) out += " note " + text::quote(k.note);
        // The index maps are derived: shown for the reader as a comment, not parsed back.
        out += " {  // " + format_index_maps(kernel_index_maps(g, index, open_kernel), names) + "\n";
      }
    }
    const OpInfo& info = n.info();
    out += fmt::format("{}%{} = {}", open_kernel >= 0 ? "    " : "  ", names[id], info.name);
    if (n.op == OpKind::Custom) {
      out += fmt::format(" @{}(", n.attrs[0].custom->name);
      for (size_t i = 0; i < n.operands.size(); ++i) out += fmt::format("{}%{}", i ? ", " : "", names[n.operands[i]]);
      out += ")";
    } else {
      for (size_t i = 0; i < n.operands.size(); ++i)
        out += fmt::format("{}%{}", i ? ", " : " ", names[n.operands[i]]);
    }
    bool first = true;
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      if (!n.attrs[i].present || info.attrs[i].kind == AttrKind::Custom) continue;
      out += first ? " {" : ", ";
      first = false;
      print_attr(out, info.attrs[i], n.attrs[i], n.type.dtype);
    }
    if (!first) out += "}";
    out += " : " + n.type.str() + "\n";
  }
  if (open_kernel >= 0) out += "  }\n";
  out += "  return";
  for (size_t i = 0; i < outputs.size(); ++i) out += fmt::format("{}%{}", i ? ", " : " ", names[outputs[i]]);
  out += "\n}\n";
  return out;
}

}  // namespace kiln
