// engine/prepared_graph.cpp - the default PreparedGraph: the graph kept, its scalars rebound.
//
// An engine without a plan cache (the interpreter) has nothing to skip: it runs a copy of the
// graph with this call's scalars. The kernel engine overrides both calls with its executable.
#include <fmt/format.h>

#include "kiln/engine/engine.h"
#include "kiln/ir/canonical.h"

namespace kiln {
namespace {

struct KeptGraph final : PreparedGraph {
  Graph graph;
  std::vector<bool> donated;
};

}  // namespace

std::shared_ptr<const PreparedGraph> Engine::prepare(const Graph& g, const std::vector<bool>& donated) {
  auto kept = std::make_shared<KeptGraph>();
  kept->graph = g;
  kept->donated = donated;
  return kept;
}

std::vector<BufferRef> Engine::run_prepared(const PreparedGraph& p, std::span<const BufferRef> inputs,
                                            std::span<const Scalar> scalars) {
  const auto* kept = dynamic_cast<const KeptGraph*>(&p);
  if (!kept) throw Error(fmt::format("run_prepared: the graph was prepared by another engine than {}'s", device().str()));
  Graph g = kept->graph;
  bind_launch_scalars(g, scalars);
  return run(g, inputs, kept->donated);
}

}  // namespace kiln
