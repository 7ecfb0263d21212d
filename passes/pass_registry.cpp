// passes/pass_registry.cpp - the table of passes, the pipelines, and the pipeline runner.
#include <fmt/format.h>

#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {
namespace {

Graph run_dce(const Graph& g, const PassOptions& o) { return dead_code_elimination(g, o); }
Graph run_cse(const Graph& g, const PassOptions& o) { return common_subexpression_elimination(g, o); }
Graph run_fold(const Graph& g, const PassOptions& o) { return constant_folding(g, o); }
Graph run_simplify(const Graph& g, const PassOptions& o) { return simplify(g, o); }

// One row per pass: the name --passes takes, what it does, the function.
constexpr PassInfo kPasses[] = {
    {"constant-fold", "evaluate nodes whose operands are all constants; splats of any size, literals up to a limit", run_fold},
    {"simplify", "algebraic rewrites: x+0, x*1, double negation, idempotent ops, cast/reshape/permute chains, identity views", run_simplify},
    {"cse", "merge structurally identical nodes across the whole graph", run_cse},
    {"dce", "drop nodes that no output depends on", run_dce},
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
  // TODO: -O2 adds view lowering, fusion and memory planning (issue 4); until they land it
  // runs the clean-up twice, which catches what CSE exposes to simplify.
  if (level >= 2)
    for (const char* name : {"simplify", "cse", "dce"}) out.push_back(find_pass(name));
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

GraphStats graph_stats(const Graph& g) {
  GraphStats s;
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::Input) continue;
    ++s.nodes;
    const OpCategory cat = n.info().category;
    if (cat == OpCategory::Source || cat == OpCategory::Movement) continue;  // no launch of their own
    ++s.kernels;
    s.bytes_moved += n.type.shape.numel() * static_cast<int64_t>(dtype_size(n.type.dtype));
    for (ValueId o : n.operands)
      s.bytes_moved += g.type(o).shape.numel() * static_cast<int64_t>(dtype_size(g.type(o).dtype));
  }
  return s;
}

Expected<Graph> run_pipeline(Graph g, std::span<const PassInfo* const> passes, const PassOptions& options,
                             const PipelineOptions& pipeline) {
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
