// passes/pass_registry.cpp - the table of passes, the pipelines, and the pipeline runner.
#include <algorithm>

#include <fmt/format.h>

#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {
namespace {

Graph run_dce(const Graph& g, const PassOptions& o) { return dead_code_elimination(g, o); }
Graph run_cse(const Graph& g, const PassOptions& o) { return common_subexpression_elimination(g, o); }
Graph run_fold(const Graph& g, const PassOptions& o) { return constant_folding(g, o); }
Graph run_simplify(const Graph& g, const PassOptions& o) { return simplify(g, o); }
Graph run_fuse(const Graph& g, const PassOptions& o) { return fuse(g, o); }
Graph run_split(const Graph& g, const PassOptions& o) { return split_reductions(g, o); }
Graph run_contract(const Graph& g, const PassOptions& o) { return contract_matmul(g, o); }
Graph run_expand_convs(const Graph& g, const PassOptions& o) { return expand_convs(g, o); }
Graph run_fuse_attention(const Graph& g, const PassOptions& o) { return fuse_attention(g, o); }

// One row per pass: the name --passes takes, what it does, the function.
constexpr PassInfo kPasses[] = {
    {"constant-fold", "evaluate nodes whose operands are all constants; splats of any size, literals up to a limit", run_fold},
    {"simplify", "algebraic rewrites: x+0, x*1, double negation, idempotent ops, cast/reshape/permute chains, identity views", run_simplify},
    {"cse", "merge structurally identical nodes across the whole graph", run_cse},
    {"dce", "drop nodes that no output depends on", run_dce},
    {"contract-matmul", "matmul becomes a broadcast product summed over the contracting axis (one generated reduction kernel, epilogue fused)", run_contract},
    {"fuse-attention", "softmax(q k^T * scale + bias) v written in primitives (the frontend's and the ONNX exporters' form) becomes one attention node: one kernel, online softmax, no T x S scores in memory", run_fuse_attention},
    {"expand-convs", "convolutions with fewer than 8 filters per group (depthwise) or 8 output positions become the sum of their windows' products, one reduction kernel", run_expand_convs},
    {"split-reductions", "reductions to a few values become two-level reductions over blocks (parallel rows; float sums round the partials)", run_split},
    {"fuse", "group operations into kernel regions: elementwise chains, reductions with prologue and epilogue, row-wise chains, matmul epilogues", run_fuse},
};

}  // namespace

std::span<const PassInfo> all_passes() { return kPasses; }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : kPasses)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<const PassInfo*> pipeline_for_level(int level) {
  std::vector<const PassInfo*> out;
  if (level <= 0) return out;
  // -O1: clean-up. Folding first exposes splats to simplify; CSE then sees the canonical
  // forms; DCE removes what the others left behind.
  for (const char* name : {"constant-fold", "simplify", "cse", "dce"}) out.push_back(find_pass(name));
  // -O2: then fusion. The memory plan is an analysis of the result (plan_memory), computed
  // by whoever allocates the buffers.
  if (level >= 2) {
    out.push_back(find_pass("fuse-attention"));
    out.push_back(find_pass("expand-convs"));
    out.push_back(find_pass("fuse"));
  }
  return out;
}

Expected<std::vector<const PassInfo*>> parse_pipeline(std::string_view names) {
  std::vector<const PassInfo*> out;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    const std::string_view name = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    if (name.empty()) continue;
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string known;
      for (const PassInfo& q : kPasses) known += (known.empty() ? "" : ", ") + std::string(q.name);
      return make_error(fmt::format("unknown pass '{}' (known passes: {})", name, known));
    }
    out.push_back(p);
  }
  return out;
}

namespace {
// What reading or writing `v` once costs; a splat constant is a kernel argument, not memory.
int64_t bytes_of(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  if ((n.op == OpKind::Constant && n.attr("value").present) || n.op == OpKind::ScalarParam) return 0;
  return n.type.bytes();
}
}  // namespace

GraphStats graph_stats(const Graph& g) {
  GraphStats s;
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    if (n.op == OpKind::Input) continue;
    ++s.nodes;
    const OpCategory cat = n.info().category;
    // A node in a kernel is counted with its kernel; sources and views launch nothing
    // (concat is no view: it writes its operands side by side).
    if (n.kernel >= 0 || cat == OpCategory::Source || n.info().is_view()) continue;
    ++s.kernels;
    s.bytes_moved += bytes_of(g, static_cast<ValueId>(id));
    std::vector<ValueId> read = n.operands;  // each distinct operand is read once
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (ValueId o : read) s.bytes_moved += bytes_of(g, o);
  }
  const KernelIndex index = g.kernel_index();
  for (size_t k = 0; k < g.kernels().size(); ++k) {
    if (index.members[k].empty()) continue;
    ++s.kernels;
    for (ValueId v : index.inputs[k]) s.bytes_moved += bytes_of(g, v);
    for (ValueId v : index.outputs[k]) s.bytes_moved += bytes_of(g, v);
  }
  return s;
}

Expected<Graph> run_pipeline(Graph g, std::span<const PassInfo* const> passes, const PassOptions& options,
                             const PipelineOptions& pipeline) {
  // Passes decide by sizes (what fits a kernel, what is cheap to recompute): a graph with
  // symbolic dims is bound first (specialize; kiln opt --bind).
  if (!passes.empty() && has_symbolic_dims(g)) {
    std::vector<std::string> names;
    for (const Node& n : g.nodes())
      for (int64_t d : n.type.shape.dims())
        for (const std::string& s : dim_symbols(d))
          if (std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
    return make_error(fmt::format("pass '{}' works on sizes, and @{} has symbolic dims ({}): bind them first "
                                  "(kiln opt --bind NAME=SIZE)",
                                  passes.front()->name, g.name(), fmt::join(names, ", ")));
  }
  for (const PassInfo* p : passes) {
    g = p->run(g, options);
    if (pipeline.verify_each) {
      if (Status st = verify(g); !st)
        return make_error(fmt::format("kiln bug: the graph after pass '{}' does not verify: {}", p->name,
                                      st.error().str()));
    }
    if (pipeline.after_each) pipeline.after_each(*p, g);
  }
  return g;
}

}  // namespace kiln
