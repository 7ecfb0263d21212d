// kiln/engine/compile.h - what a compiling device makes of a graph, and its plan cache.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kiln/codegen/lower.h"
#include "kiln/codegen/schedule.h"
#include "kiln/engine/device.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass_manager.h"

namespace kiln {

class Backend;

/// The optimized graph (the target's pipeline: -O1's clean-up, the backend's extra passes,
/// then fusion: -O2 with the target's additions)
/// and its launch plan, with every kernel's schedule chosen by `backend` and the autotuner
/// (KILN_AUTOTUNE, docs/autotune.md). Runs nothing.
/// `donated` as for Engine::run.
struct Compilation {
  Graph fused;
  LaunchPlan plan;
};
Compilation compile_graph(Backend& backend, const Graph& g, const std::vector<bool>& donated = {});
/// The same for a target given by its capabilities and extra passes, with no device at hand
/// (a code generator's tests, `kiln autotune warmup`): default schedules, and split-reductions
/// cuts each reduction into the blocks `splits` chooses (empty: its default count).
Compilation compile_graph(const Capabilities& caps, std::span<const PassInfo* const> extra_passes, const Graph& g,
                          const std::vector<bool>& donated = {}, const SplitChooser& splits = {});

/// The launch plan of `site`'s reduction alone on `backend`, cut into `blocks` (1: not cut),
/// every kernel at its default schedule: what the autotuner times for the knob `split_blocks`.
LaunchPlan split_plan(Backend& backend, const ReductionSplit& site, int64_t blocks);

/// Executables in `device`'s plan cache (0 for the interpreter), and its capacity
/// (KILN_PLAN_CACHE_SIZE, default 1024).
size_t plan_cache_size(Device device);
size_t plan_cache_capacity(Device device);
/// Empties `device`'s plan cache; compiled kernels stay in the backend's kernel cache.
void plan_cache_clear(Device device);

}  // namespace kiln
