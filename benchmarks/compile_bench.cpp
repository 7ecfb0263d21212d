// benchmarks/compile_bench.cpp - what compiling costs on the cpu device, per kernel.
//
//   cold       a kernel no cache holds: Kernel IR -> LLVM (the default schedule's pipeline) ->
//              object code -> linked
//   disk       a new process whose kernel cache on disk is warm: objects linked, no LLVM
//   memory     a new graph whose kernels this process has compiled: passes and lowering
//              run, every kernel comes from the in-process cache
//   plan hit   a repeated graph: one hash and a comparison, no pass, no codegen
// The workloads are the peers' (W1-W5b) at small sizes, so that running them costs little
// next to compiling them. Each figure is the median over the workloads. The disk phase runs
// in a child process (this binary with --disk-phase) on the cache the cold phase filled.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/backends/cpu.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/text.h"
#include "kiln/runtime/stats.h"

namespace {

using Clock = std::chrono::steady_clock;

// The peers' workloads at 1/64 of their sizes (shapes change kernel text, not its code size).
const char* const kWorkloads[] = {
    R"(graph @w1(%x: f32[262144]) -> f32[262144] {
  %c0 = constant {value = 1.5} : f32[]
  %c1 = constant {value = 0.25} : f32[]
  %c2 = constant {value = 0.1} : f32[]
  %a = mul %x, %c0 : f32[262144]
  %b = add %a, %c1 : f32[262144]
  %t = tanh %b : f32[262144]
  %c = mul %t, %x : f32[262144]
  %d = sub %c, %c2 : f32[262144]
  %y = relu %d : f32[262144]
  return %y
})",
    R"(graph @w3(%x: f32[64,4096]) -> f32[64,4096] {
  %m = reduce_max %x {axes = [1], keepdim} : f32[64,1]
  %s = sub %x, %m : f32[64,4096]
  %e = exp %s : f32[64,4096]
  %z = reduce_sum %e {axes = [1], keepdim} : f32[64,1]
  %y = div %e, %z : f32[64,4096]
  return %y
})",
    R"(graph @w4(%x: f32[64,4096], %g: f32[4096], %b: f32[4096]) -> f32[64,4096] {
  %c0 = constant {value = 4096.0} : f32[]
  %c1 = constant {value = 1e-05} : f32[]
  %s = reduce_sum %x {axes = [1], keepdim} : f32[64,1]
  %m = div %s, %c0 : f32[64,1]
  %d = sub %x, %m : f32[64,4096]
  %q = mul %d, %d : f32[64,4096]
  %v = reduce_sum %q {axes = [1], keepdim} : f32[64,1]
  %w = div %v, %c0 : f32[64,1]
  %e = add %w, %c1 : f32[64,1]
  %r = rsqrt %e : f32[64,1]
  %n = mul %d, %r : f32[64,4096]
  %o = mul %n, %g : f32[64,4096]
  %y = add %o, %b : f32[64,4096]
  return %y
})",
    R"(graph @w5a(%x: f32[262144]) -> f32[] {
  %s = reduce_sum %x {axes = [0]} : f32[]
  return %s
})",
    R"(graph @w5b(%x: f32[64,4096]) -> f32[4096] {
  %s = reduce_sum %x {axes = [0]} : f32[4096]
  return %s
})",
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<kiln::BufferRef> inputs_for(const kiln::Graph& g) {
  std::vector<kiln::BufferRef> in;
  for (kiln::ValueId v : g.inputs()) in.push_back(kiln::engine_for(kiln::Device::cpu()).upload(kiln::HostTensor(g.type(v))));
  return in;
}

// Wall time of one run, in ms, and the kernels it compiled or loaded.
double timed_run(const kiln::Graph& g, const std::vector<kiln::BufferRef>& in) {
  const auto t0 = Clock::now();
  kiln::engine_for(kiln::Device::cpu()).run(g, in);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// `tiny`: the same graphs on a few elements, where running them costs next to nothing, to
// time what a plan-cache hit itself costs.
std::vector<kiln::Graph> graphs(bool tiny = false) {
  std::vector<kiln::Graph> out;
  for (const char* text : kWorkloads) {
    std::string t = text;
    if (tiny)
      for (const auto& [from, to] : {std::pair{"262144", "64"}, {"64,4096", "4,16"}, {"64,1]", "4,1]"}, {"4096]", "16]"}})
        for (size_t at; (at = t.find(from)) != std::string::npos;) t.replace(at, std::string(from).size(), to);
    out.push_back(kiln::parse_graph(t).take());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  auto& c = kiln::runtime_counters();
  if (argc > 1 && std::string(argv[1]) == "--disk-phase") {
    std::vector<double> per_kernel;
    for (const kiln::Graph& g : graphs()) {
      const auto in = inputs_for(g);
      const uint64_t hits = c.kernel_disk_hits;
      const double ms = timed_run(g, in);
      const double run_ms = timed_run(g, in);  // the same graph again: execution alone, roughly
      const uint64_t n = c.kernel_disk_hits - hits;
      if (n > 0) per_kernel.push_back((ms - run_ms) / static_cast<double>(n));
    }
    if (c.llvm_compiles != 0) std::fprintf(stderr, "compile_bench: the disk phase compiled %lu modules\n", c.llvm_compiles.load());
    std::printf("%.3f\n", median(per_kernel));
    return 0;
  }
  const fs::path cache = fs::temp_directory_path() / fmt::format("kiln-compile-bench-{}", ::getpid());
  fs::remove_all(cache);
  setenv("KILN_CACHE_DIR", cache.c_str(), 1);

  std::vector<double> cold, memory, hit;
  for (const kiln::Graph& g : graphs()) {
    const auto in = inputs_for(g);
    const uint64_t ns = c.compile_ns, kernels = c.kernels_compiled;
    timed_run(g, in);
    if (c.kernels_compiled > kernels)
      cold.push_back(static_cast<double>(c.compile_ns - ns) / 1e6 / static_cast<double>(c.kernels_compiled - kernels));
  }
  // A repeated graph: the plan cache (tiny sizes: the run itself is a few nanoseconds).
  for (const kiln::Graph& g : graphs(/*tiny=*/true)) {
    const auto in = inputs_for(g);
    kiln::engine_for(kiln::Device::cpu()).run(g, in);
    std::vector<double> samples;
    for (int i = 0; i < 2000; ++i) {
      const auto t0 = Clock::now();
      kiln::engine_for(kiln::Device::cpu()).run(g, in);
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    hit.push_back(median(samples));
  }
  // Kernels from memory: the plan cache emptied, so every graph goes through the passes and
  // lowering again, and finds each kernel compiled.
  kiln::plan_cache_clear(kiln::Device::cpu());
  for (const kiln::Graph& g : graphs()) {
    const auto in = inputs_for(g);
    const uint64_t mem = c.kernel_memory_hits;
    const double ms = timed_run(g, in);
    const double run_ms = timed_run(g, in);
    if (c.kernel_memory_hits > mem) memory.push_back((ms - run_ms) * 1000 / static_cast<double>(c.kernel_memory_hits - mem));
  }
  // A new process on the warm disk cache.
  std::string disk = "?";
  if (FILE* p = popen(fmt::format("'{}' --disk-phase", argv[0]).c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p)) disk = std::string(buf, strcspn(buf, "\n"));
    pclose(p);
  }
  fs::remove_all(cache);
  std::printf("| compile latency per kernel (median of W1-W5b) | figure | target |\n|---|---|---|\n");
  std::printf("| cold: Kernel IR -> LLVM (lean pipeline) -> object -> linked | %.2f ms | <= 10 ms |\n", median(cold));
  std::printf("| warm from disk, new process (object linked, no LLVM) | %s ms | <= 2 ms |\n", disk.c_str());
  std::printf("| warm in-process, new graph (passes + lowering, kernels from memory) | %.1f us | - |\n", median(memory));
  std::printf("| warm in-process, repeated graph (plan cache hit; tiny shapes, run included) | %.1f us | <= 20 us |\n", median(hit));
  return 0;
}
