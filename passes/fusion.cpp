// passes/fusion.cpp - the fusion planner: group operations into as few kernels as possible.
//
// Walk the graph from its outputs back to its parameters. An operation joins the kernel of
// its consumers when all of them are in that one kernel and the kernel accepts it:
//   - elementwise ops join anything (a chain with broadcasts; a reduction's prologue or
//     epilogue; a matmul's epilogue), except that a matmul's operands are read from memory,
//     not recomputed for every output tile;
//   - views (movement ops) join as index maps: no data moves for them;
//   - a reduction joins a kernel with no reduction (its epilogue broadcasts back over the
//     rows), or one whose reductions reduce the same axes of the same shape: a row-wise chain
//     such as softmax or layer norm, which then streams each row once;
//   - a matmul joins a kernel that is only its elementwise epilogue (bias, activation,
//     residual);
//   - a gather joins like an elementwise op of its indices; its data is read from memory at
//     positions known only at run time, so nothing computes the data inside the kernel, not
//     even a view;
//   - a scatter's kernel runs over its updates, which fuse (with its indices) as elementwise
//     ops do; its result is complete only once the whole kernel has run, so no consumer
//     joins it, and its data is copied into the result first. A cumsum likewise (both walk
//     their points in order: trait InOrder), over its operand's points, and an argsort,
//     whose sorting network runs as several launches (all three: trait WholeResult).
// Otherwise the operation starts a kernel of its own, whose note says why. Sources
// (constants, rand, arange) and parameters stay outside kernels, which read them. A value
// that several kernels need is stored once, or recomputed in each when the policy allows and
// it is cheap (FusionPolicy). Joining only kernels that all consumers share keeps the kernel
// graph acyclic. Kernels are then laid out in dependency order, members consecutive.
#include <algorithm>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/ir/kernel_rules.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {
namespace {

struct Kernel {
  bool has_reduce = false;
  std::vector<int64_t> reduce_axes;
  Shape reduce_input;
  bool has_matmul = false;  // a matmul or a conv (a GEMM step)
  std::string_view gemm_op;   // which
  bool whole = false;  // holds a scatter, cumsum or argsort (trait::WholeResult)
  int64_t members = 0;
  std::vector<std::string> notes;
};

// Notes name values before their final names exist: "\x03<value in the planned graph>\x04",
// resolved once the fused graph is built.
std::string value_name(ValueId v) { return fmt::format("\x03{}\x04", v); }

bool is_view(const Node& n) { return n.info().is_view(); }
bool stays_outside(const Node& n) { return n.info().category == OpCategory::Source; }

// Values already in memory: parameters, sources, and views of them.
bool in_memory(const Graph& g, ValueId v) {
  for (;;) {  // down a chain of views (a loop: chains can be long)
    const Node& n = g.node(v);
    if (n.op == OpKind::Input || stays_outside(n)) return true;
    if (!is_view(n)) return false;
    v = n.operands[0];
  }
}

// One elementwise op on values in memory, which MultiConsumer::RecomputeCheap recomputes in
// every kernel that needs it instead of storing it.
bool cheap_to_recompute(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  return n.info().category == OpCategory::Elementwise &&
         std::all_of(n.operands.begin(), n.operands.end(), [&](ValueId o) { return in_memory(g, o); });
}

// Clones each value in `dup` once per further use, so that every consumer has its own copy.
Graph duplicate_values(const Graph& g, const std::vector<bool>& dup) {
  std::vector<int> uses(g.size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId o : n.operands) ++uses[o];
  passes::Rewriter r(g);
  std::vector<std::vector<ValueId>> copies(g.size());  // old value -> clones not yet handed out
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) {
      if (!copies[o].empty()) {
        operands.push_back(copies[o].back());
        copies[o].pop_back();
      } else {
        operands.push_back(r.map(o));
      }
    }
    const ValueId first = r.add(passes::with_operands(n, operands));
    r.set(v, first);
    if (!dup[id]) continue;
    // The first use (and the outputs) take `first`; each further use gets a clone.
    for (int k = 1; k < uses[id]; ++k) {
      Node clone = passes::with_operands(n, r.out().node(first).operands);
      clone.name.clear();
      copies[id].push_back(r.add(std::move(clone)));
    }
  }
  return r.finish();
}

class Planner {
 public:
  Planner(const Graph& g, const FusionPolicy& policy)
      : g_(g), policy_(policy), kernel_of_(g.size(), -1), users_(g.size()), outside_views_(g.size(), 0) {
    for (size_t id = 0; id < g.size(); ++id)
      for (ValueId o : g.node(static_cast<ValueId>(id)).operands) users_[o].push_back(static_cast<ValueId>(id));
  }

  void plan() {
    for (size_t id = g_.size(); id-- > 0;) {
      const auto v = static_cast<ValueId>(id);
      const Node& n = g_.node(v);
      if (n.op == OpKind::Input || stays_outside(n)) continue;
      // The kernel every consumer is in, if there is exactly one.
      int32_t target = -1;
      bool shared = !users_[v].empty();
      for (ValueId u : users_[v]) {
        const int32_t k = kernel_of_[u];
        if (k < 0 || (target >= 0 && k != target)) shared = false;
        target = k;
      }
      std::string why;
      if (shared && accepts(static_cast<size_t>(target), v, why)) {
        join(static_cast<size_t>(target), v);
        continue;
      }
      if (auto it = stored_views_.find(v); it != stored_views_.end()) {
        start(v, it->second);
        continue;
      }
      if (is_view(n)) {
        // A view read by several kernels (or returned, or refused by a full kernel) stays an
        // index map, with no launch, unless the chain of such views above it is already as
        // long as a kernel may be: each kernel that reads through it would compute the
        // whole chain's index arithmetic.
        int64_t above = 0;
        for (ValueId u : users_[v])
          if (kernel_of_[u] < 0 && is_view(g_.node(u))) above = std::max(above, outside_views_[u]);
        outside_views_[v] = above + 1;
        if (policy_.max_kernel_ops <= 0 || outside_views_[v] < policy_.max_kernel_ops) continue;
        outside_views_[v] = 0;
        start(v, fmt::format("{} is stored: {} views read through it (FusionPolicy::max_kernel_ops)", value_name(v),
                             policy_.max_kernel_ops));
        continue;
      }
      if (shared) {
        start(v, fmt::format("{} not fused into {}: {}", value_name(v), kernel_ref(target), why));
        continue;
      }
      std::string note;
      std::vector<int32_t> kernels;
      for (ValueId u : users_[v])
        if (kernel_of_[u] >= 0 && std::find(kernels.begin(), kernels.end(), kernel_of_[u]) == kernels.end())
          kernels.push_back(kernel_of_[u]);
      if (kernels.size() > 1) {
        std::vector<std::string> names;
        for (int32_t k : kernels) names.push_back(kernel_ref(k));
        note = fmt::format("{} is stored once for {}", value_name(v), fmt::join(names, ", "));
        shared_by_kernels_.push_back(v);
      }
      start(v, note);
    }
  }

  int32_t kernel_of(ValueId v) const { return kernel_of_[v]; }
  const std::vector<Kernel>& kernels() const { return kernels_; }
  /// Values stored because kernels of their own consumers needed them.
  const std::vector<ValueId>& shared_by_kernels() const { return shared_by_kernels_; }

  /// Notes name kernels before their final names exist: "\x01<planner index>\x02".
  static std::string kernel_ref(int32_t k) { return fmt::format("\x01{}\x02", k); }

 private:
  void start(ValueId v, std::string note) {
    kernels_.emplace_back();
    if (!note.empty()) kernels_.back().notes.push_back(std::move(note));
    join(kernels_.size() - 1, v);
  }

  void join(size_t k, ValueId v) {
    kernel_of_[v] = static_cast<int32_t>(k);
    const Node& n = g_.node(v);
    Kernel& kern = kernels_[k];
    ++kern.members;
    if (n.info().category == OpCategory::Reduce && !kern.has_reduce) {
      kern.has_reduce = true;
      kern.reduce_axes = n.attr("axes").ints;
      kern.reduce_input = g_.type(n.operands[0]).shape;
    }
    const bool gemm = n.info().category == OpCategory::Matmul;  // matmul, conv
    if (gemm) {
      kern.has_matmul = true;
      kern.gemm_op = n.info().name;
    }
    // Operands of a matmul or conv (and views feeding them) are read from memory.
    if (gemm || (is_view(n) && matmul_operand_.count(v))) {
      const std::string_view op = gemm ? n.info().name : matmul_operand_.at(v);
      for (ValueId o : n.operands) matmul_operand_.emplace(o, op);
    }
    if (n.op == OpKind::Gather)
      from_memory_.emplace(n.operands[0], "gather reads its data from memory, at positions known only at run time");
    if (n.op == OpKind::Unfold) {
      // Overlapping windows read each element several times (a 3x3 window nine): what
      // computes the element is stored once rather than recomputed at every read.
      const AttrValue& dil = n.attr("dilation");
      const int64_t span = (n.attr("size").i - 1) * (dil.present ? dil.i : 1) + 1;
      if (n.attr("step").i < span) {
        const int64_t reads = (span + n.attr("step").i - 1) / n.attr("step").i;
        from_memory_.emplace(n.operands[0], fmt::format("unfold's windows overlap: each element is read by up to {} "
                                                        "of them, so it is computed once, into memory",
                                                        reads));
        // Views join as index maps, but a permute that moves the last axis makes adjacent
        // windows read elements far apart: a gather per lane at every read (ConvNeXt's first
        // depthwise 7x7 read its stem's channels-last layer norm so, 4.2 ms against 0.3 for
        // the others). The permute starts a kernel of its own instead, which what computes
        // the value may join: it is stored once, in the permuted order.
        for (ValueId u = n.operands[0]; is_view(g_.node(u)); u = g_.node(u).operands[0]) {
          const Node& view = g_.node(u);
          if (view.op != OpKind::Permute) continue;
          const std::vector<int64_t>& perm = view.attr("perm").ints;
          if (perm.empty() || perm.back() == view.type.shape.rank() - 1) continue;
          stored_views_.emplace(u, fmt::format("{} is stored: overlapping windows read each of its elements up to "
                                               "{} times, and it moves the last axis (a gather per lane at each read)",
                                               value_name(u), reads));
          break;
        }
      }
    }
    if (n.info().has(trait::WholeResult)) kern.whole = true;
    if (n.op == OpKind::Scatter)
      from_memory_.emplace(n.operands[0], "scatter copies its data into its result before its kernel runs");
  }

  bool accepts(size_t k, ValueId v, std::string& why) const {
    const Node& n = g_.node(v);
    const Kernel& kern = kernels_[k];
    const OpCategory cat = n.info().category;
    // A bounded kernel: code generation and compile time grow with it, and a chain of a
    // million ops becomes a chain of kernels instead of one function no compiler handles.
    if (policy_.max_kernel_ops > 0 && kern.members >= policy_.max_kernel_ops) {
      why = fmt::format("the kernel has {} operations already (FusionPolicy::max_kernel_ops)", kern.members);
      return false;
    }
    if (auto it = from_memory_.find(v); it != from_memory_.end()) {
      why = it->second;
      return false;
    }
    if (n.info().has(trait::WholeResult)) {
      const std::string_view name = n.info().name;
      why = fmt::format("{} {}'s result is complete only once its {} has run",
                        std::string_view("aeiou").find(name[0]) == std::string_view::npos ? "a" : "an", name,
                        n.info().has(trait::InOrder) ? "whole kernel" : "last kernel");
      return false;
    }
    if (is_view(n)) return true;  // an index map, free in any kernel
    if (auto it = matmul_operand_.find(v); it != matmul_operand_.end()) {
      why = fmt::format("{} operands are read from memory, not recomputed for every output tile", it->second);
      return false;
    }
    if (cat == OpCategory::Elementwise || n.op == OpKind::Gather) return true;
    if (n.op == OpKind::Concat) {
      why = "concat writes its operands side by side: it is a kernel of its own";
      return false;
    }
    if (kern.whole && (cat == OpCategory::Reduce || cat == OpCategory::Matmul)) {
      why = "a scatter's, cumsum's or argsort's kernel computes no reduction or matmul";
      return false;
    }
    if (cat == OpCategory::Reduce) {
      if (!policy_.reductions) {
        why = "reduction fusion is off (FusionPolicy::reductions)";
        return false;
      }
      if (kern.has_matmul) {
        why = fmt::format("a reduction does not join a {} kernel", kern.gemm_op);
        return false;
      }
      const auto& axes = n.attr("axes").ints;
      const Shape& in = g_.type(n.operands[0]).shape;
      if (!row_aligned(k, v, why)) return false;
      if (kern.has_reduce && !(axes == kern.reduce_axes && in == kern.reduce_input)) {
        why = fmt::format("'{}' over axes [{}] of {} cannot join a kernel that reduces axes [{}] of {}: the second "
                          "reduction needs all of the first",
                          n.info().name, fmt::join(axes, ", "), in.str(), fmt::join(kern.reduce_axes, ", "),
                          kern.reduce_input.str());
        return false;
      }
      return true;
    }
    if (cat == OpCategory::Matmul) {
      if (!policy_.matmul_epilogue) {
        why = "matmul epilogue fusion is off (FusionPolicy::matmul_epilogue)";
        return false;
      }
      if (kern.has_reduce || kern.has_matmul) {
        why = fmt::format("a {} joins only an elementwise epilogue", n.info().name);
        return false;
      }
      return true;
    }
    why = "not fusable";
    return false;
  }

  // A kernel streams a reduction's rows: row i's result may only be used for row i. So the
  // result must reach the kernel's other operations through elementwise ops only (a view
  // would move it across rows), and a broadcast may only spread it along the reduced axes.
  bool row_aligned(size_t k, ValueId r, std::string& why) const {
    why = reduction_row_violation(
        g_, users_, r, [&](ValueId c) { return kernel_of_[c] == static_cast<int32_t>(k); }, value_name);
    return why.empty();
  }

  const Graph& g_;
  const FusionPolicy& policy_;
  std::vector<int32_t> kernel_of_;
  std::vector<std::vector<ValueId>> users_;
  std::vector<int64_t> outside_views_;  // views left outside kernels: how many such views above, on the longest path
  std::vector<Kernel> kernels_;
  std::vector<ValueId> shared_by_kernels_;
  std::unordered_map<ValueId, std::string_view> matmul_operand_;  // -> the op that reads it
  std::unordered_map<ValueId, std::string> from_memory_;  // operands no kernel may compute: why
  std::unordered_map<ValueId, std::string> stored_views_;  // views stored by a kernel of their own: why
};

}  // namespace

Graph fuse(const Graph& input, const PassOptions& options) {
  // Plan; if the plan stores cheap values only because several kernels need them, recompute
  // those in each kernel instead and plan again.
  Graph g = input;
  if (options.fusion.multi_consumer == MultiConsumer::RecomputeCheap) {
    Planner first(g, options.fusion);
    first.plan();
    std::vector<bool> dup(g.size(), false);
    bool any = false;
    std::vector<bool> returned(g.size(), false);
    for (ValueId v : g.outputs()) returned[v] = true;
    for (ValueId v : first.shared_by_kernels())  // a returned value is stored anyway
      if (cheap_to_recompute(g, v) && !returned[v]) any = dup[v] = true;
    if (any) g = duplicate_values(g, dup);
  }
  Planner planner(g, options.fusion);
  planner.plan();

  // Groups: one per kernel, one per node outside kernels. Lay them out in dependency order
  // (Kahn's algorithm, earliest original position first), each kernel's members together.
  const size_t nk = planner.kernels().size();
  std::vector<int64_t> group(g.size());
  for (size_t id = 0; id < g.size(); ++id) {
    const int32_t k = planner.kernel_of(static_cast<ValueId>(id));
    group[id] = k >= 0 ? k : static_cast<int64_t>(nk + id);
  }
  const size_t ngroups = nk + g.size();
  std::vector<std::vector<ValueId>> members(ngroups);
  std::vector<size_t> first(ngroups, SIZE_MAX), indegree(ngroups, 0);
  std::vector<std::vector<size_t>> next(ngroups);
  for (size_t id = 0; id < g.size(); ++id) {
    const auto gi = static_cast<size_t>(group[id]);
    members[gi].push_back(static_cast<ValueId>(id));
    first[gi] = std::min(first[gi], id);
    for (ValueId o : g.node(static_cast<ValueId>(id)).operands) {
      const auto go = static_cast<size_t>(group[o]);
      if (go != gi) {
        next[go].push_back(gi);
        ++indegree[gi];
      }
    }
  }
  using Entry = std::pair<size_t, size_t>;  // (first original position, group)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (size_t gi = 0; gi < ngroups; ++gi)
    if (!members[gi].empty() && indegree[gi] == 0) ready.push({first[gi], gi});
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t gi = ready.top().second;
    ready.pop();
    order.push_back(gi);
    for (size_t nx : next[gi])
      if (--indegree[nx] == 0) ready.push({first[nx], nx});
  }
  KILN_ASSERT(order.size() == static_cast<size_t>(std::count_if(members.begin(), members.end(),
                                                                [](const auto& m) { return !m.empty(); })),
              "the kernel graph is acyclic");

  // Rebuild in that order; kernels are numbered k0, k1... as they appear (any earlier
  // grouping is replaced: fusing a fused graph plans it afresh).
  passes::Rewriter r(g, /*keep_kernels=*/false);
  Graph& out = r.out();
  std::vector<int32_t> renumber(nk, -1);
  for (size_t gi : order) {
    int32_t k = -1;
    if (gi < nk) {
      renumber[gi] = out.add_kernel(KernelRegion{});
      k = renumber[gi];
    }
    for (ValueId v : members[gi]) {
      if (g.node(v).op == OpKind::Input) continue;
      const ValueId nv = r.copy(v);
      out.node(nv).kernel = k;
    }
  }
  // Name the kernels, and the kernels and values their notes mention, by their final names.
  // A value a note mentions keeps the name it prints with, so later passes cannot shift it.
  const std::vector<std::string> names = value_names(out);
  for (size_t old = 0; old < nk; ++old) {
    KernelRegion& region = out.kernel(renumber[old]);
    region.name = fmt::format("k{}", renumber[old]);
    std::string note;
    for (const std::string& raw : planner.kernels()[old].notes) {
      if (!note.empty()) note += "; ";
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] != '\x01' && raw[i] != '\x03') {
          note += raw[i];
          continue;
        }
        const size_t end = raw.find(raw[i] == '\x01' ? '\x02' : '\x04', i);
        const auto index = static_cast<size_t>(std::stoul(raw.substr(i + 1, end - i - 1)));
        if (raw[i] == '\x01') {
          note += fmt::format("@k{}", renumber[index]);
        } else {
          const ValueId v = r.map(static_cast<ValueId>(index));
          if (out.node(v).name.empty()) out.node(v).name = names[v];
          note += "%" + out.node(v).name;
        }
        i = end;
      }
    }
    region.note = std::move(note);
  }
  return r.finish();
}

}  // namespace kiln
