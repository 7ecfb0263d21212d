// kiln/codegen/cpu.h - the CPU backend: compile a graph for the host, inspect what it made.
#pragma once

#include <string>

#include "kiln/codegen/lower.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/engine.h"

namespace kiln {

/// The engine of device `cpu`: graphs are optimized (-O2), fused, lowered to Kernel IR,
/// compiled with LLVM for the host CPU and cached (plan cache in memory, kernel objects on
/// disk). See docs/runtime.md.
Engine& cpu_engine();

/// Number of executables in the CPU engine's plan cache.
size_t cpu_plan_cache_size();
/// Empties the plan cache; compiled kernels stay in the in-process kernel cache (tests of
/// the disk cache start new processes instead).
void cpu_plan_cache_clear();

/// What the CPU backend makes of `g`: the optimized graph and its launch plan, without
/// running anything. `donated` as for Engine::run.
struct CpuCompilation {
  Graph fused;
  LaunchPlan plan;
};
CpuCompilation cpu_compile_graph(const Graph& g, const std::vector<bool>& donated = {});

/// The LLVM IR (before or after optimization) or the assembly of one kernel, for the host.
std::string cpu_kernel_llvm_ir(const kir::Kernel& k, bool optimized = true);
std::string cpu_kernel_assembly(const kir::Kernel& k);
/// "x86_64-pc-linux-gnu znver4 (64-byte vectors)"
std::string cpu_target_description();

}  // namespace kiln
