// ir/kernel_rules.cpp - legality of kernel regions.
#include "kiln/ir/kernel_rules.h"

#include <algorithm>

#include <fmt/format.h>

#include "kiln/ir/text.h"

namespace kiln {

bool keeps_rows(const Shape& s, const Shape& full, std::span<const int64_t> axes) {
  const int off = full.rank() - s.rank();
  if (off < 0) return false;
  for (int j = 0; j < full.rank(); ++j) {
    const int64_t d = j >= off ? s[j - off] : 1;
    const bool reduced = std::find(axes.begin(), axes.end(), j) != axes.end();
    if (reduced ? (d != 1 && d != full[j]) : d != full[j]) return false;
  }
  return true;
}

std::string reduction_row_violation(const Graph& g, const std::vector<std::vector<ValueId>>& users, ValueId r,
                                    const std::function<bool(ValueId)>& in_kernel,
                                    const std::function<std::string(ValueId)>& name, ValueId* at) {
  const Node& red = g.node(r);
  const Shape& full = g.type(red.operands[0]).shape;
  const auto& axes = red.attr("axes").ints;
  std::vector<ValueId> work{r};
  std::vector<bool> seen(g.size(), false);
  seen[r] = true;
  while (!work.empty()) {
    const ValueId u = work.back();
    work.pop_back();
    for (ValueId c : users[u]) {
      if (!in_kernel(c)) continue;
      const Node& cn = g.node(c);
      if (cn.info().category == OpCategory::Reduce) continue;  // consumes whole rows of its own
      if (at) *at = c;
      // A reshape between two shapes that keep the rows only adds or drops dims of size 1
      // (a bias's gradient, summed with keepdim, read as the bias's own [C]): each element
      // stays where it is.
      const bool unit_reshape = cn.op == OpKind::Reshape && keeps_rows(g.type(u).shape, full, axes) &&
                                keeps_rows(cn.type.shape, full, axes);
      if (cn.info().category != OpCategory::Elementwise && !unit_reshape)
        return fmt::format("the result of {} reaches {} through '{}', which moves it across the rows the kernel "
                           "streams",
                           name(r), name(c), cn.info().name);
      if (!(g.type(u).shape == cn.type.shape) &&
          !(keeps_rows(g.type(u).shape, full, axes) && keeps_rows(cn.type.shape, full, axes)))
        return fmt::format("the result of {} is broadcast across rows at {}", name(r), name(c));
      if (!seen[c]) {
        seen[c] = true;
        work.push_back(c);
      }
    }
  }
  return "";
}

Status check_kernel_rules(const Graph& g) {
  if (g.kernels().empty()) return Status::ok();
  const KernelIndex index = g.kernel_index();
  std::vector<std::vector<ValueId>> users(g.size());
  for (size_t id = 0; id < g.size(); ++id)
    for (ValueId o : g.node(static_cast<ValueId>(id)).operands) users[o].push_back(static_cast<ValueId>(id));
  const std::vector<std::string> names = value_names(g);
  for (size_t k = 0; k < index.members.size(); ++k) {
    const auto& members = index.members[k];
    if (members.empty()) continue;
    const std::string& kname = g.kernels()[k].name;
    auto fail = [&](ValueId at, std::string message) -> Status {
      return Diagnostic{g.file(), g.node(at).loc, fmt::format("kernel @{}: {}", kname, message)};
    };
    const auto in_kernel = [&](ValueId v) { return g.node(v).kernel == static_cast<int32_t>(k); };
    const Node* first_reduce = nullptr;
    int matmuls = 0;
    for (ValueId v : members) {
      const Node& n = g.node(v);
      if (n.info().category == OpCategory::Matmul) ++matmuls;
      if (n.op == OpKind::Gather && in_kernel(n.operands[0]))
        return fail(v, fmt::format("gather data %{} is computed inside the kernel; gather reads its data from memory, "
                                   "at positions known only at run time",
                                   names[n.operands[0]]));
      if (n.op == OpKind::Scatter && in_kernel(n.operands[0]))
        return fail(v, fmt::format("scatter data %{} is computed inside the kernel; scatter copies its data into its "
                                   "result before its kernel runs",
                                   names[n.operands[0]]));
      if (n.info().has(trait::WholeResult)) {  // scatter, cumsum, argsort
        const std::string_view op = n.info().name;
        for (ValueId u : users[v])
          if (in_kernel(u))
            return fail(u, fmt::format("%{} uses {} result %{} inside its kernel, where it is complete only once "
                                       "the whole kernel has run",
                                       names[u], op, names[v]));
        for (ValueId m : members) {
          if (g.node(m).info().category == OpCategory::Reduce || g.node(m).info().category == OpCategory::Matmul)
            return fail(m, fmt::format("the kernel of {} %{} computes no reduction or matmul", op, names[v]));
          if (g.node(m).info().has(trait::WholeResult) && m != v)
            return fail(m, "a kernel holds at most one scatter, cumsum or argsort");
        }
      }
      if (n.info().category != OpCategory::Reduce) continue;
      const Shape& full = g.type(n.operands[0]).shape;
      const auto& axes = n.attr("axes").ints;
      if (!first_reduce) {
        first_reduce = &n;
      } else if (axes != first_reduce->attr("axes").ints || !(full == g.type(first_reduce->operands[0]).shape)) {
        return fail(v, fmt::format("'{}' over axes [{}] of {} cannot share a kernel with a reduction over axes [{}] of "
                                   "{}: the second needs all of the first",
                                   n.info().name, fmt::join(axes, ", "), full.str(),
                                   fmt::join(first_reduce->attr("axes").ints, ", "),
                                   g.type(first_reduce->operands[0]).shape.str()));
      }
      // The result stays on its rows.
      ValueId at = v;
      const std::string why =
          reduction_row_violation(g, users, v, in_kernel, [&](ValueId x) { return "%" + names[x]; }, &at);
      if (!why.empty()) return fail(at, why);
    }
    if (matmuls == 0) continue;
    const ValueId at = members.front();
    if (matmuls > 1) return fail(at, "a kernel holds at most one matmul");
    if (first_reduce) return fail(at, "a matmul kernel holds no reduction (only the matmul's elementwise epilogue)");
    for (ValueId v : members) {
      const Node& n = g.node(v);
      if (n.info().category != OpCategory::Matmul) continue;
      for (ValueId o : n.operands) {
        ValueId src = o;
        while (in_kernel(src) && g.node(src).info().is_view()) src = g.node(src).operands[0];
        if (in_kernel(src))
          return fail(v, fmt::format("matmul operand %{} is computed inside the kernel; matmul operands are read "
                                     "from memory",
                                     names[src]));
      }
    }
  }
  return Status::ok();
}

}  // namespace kiln
