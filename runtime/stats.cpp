// runtime/stats.cpp - the counters, and KILN_STATS=1 printing them at exit.
#include "kiln/runtime/stats.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace kiln {
namespace {

template <class F>
void for_each_counter(const RuntimeCounters& c, F&& f) {
  f("plan_hits", c.plan_hits);
  f("plan_misses", c.plan_misses);
  f("kernel_memory_hits", c.kernel_memory_hits);
  f("kernel_disk_hits", c.kernel_disk_hits);
  f("kernel_disk_misses", c.kernel_disk_misses);
  f("kernel_disk_rejected", c.kernel_disk_rejected);
  f("kernel_disk_writes", c.kernel_disk_writes);
  f("llvm_compiles", c.llvm_compiles);
  f("kernels_compiled", c.kernels_compiled);
  f("compile_ms", c.compile_ns);
  f("object_loads", c.object_loads);
  f("executions", c.executions);
  f("launches", c.launches);
}

void print_at_exit() { std::fprintf(stderr, "%s", runtime_counters().str().c_str()); }

}  // namespace

std::string RuntimeCounters::str() const {
  std::string out = "kiln stats:\n";
  for_each_counter(*this, [&](std::string_view name, const std::atomic<uint64_t>& v) {
    if (name == "compile_ms") out += fmt::format("  {:<22} {:.3f}\n", name, static_cast<double>(v.load()) / 1e6);
    else out += fmt::format("  {:<22} {}\n", name, v.load());
  });
  return out;
}

void RuntimeCounters::reset() {
  for_each_counter(*this, [](std::string_view, const std::atomic<uint64_t>& v) {
    const_cast<std::atomic<uint64_t>&>(v).store(0);
  });
}

RuntimeCounters& runtime_counters() {
  static RuntimeCounters* counters = [] {
    auto* c = new RuntimeCounters();  // never destroyed: kernels may count during exit
    const char* env = std::getenv("KILN_STATS");
    if (env != nullptr && std::string_view(env) != "0" && std::string_view(env) != "") std::atexit(print_at_exit);
    return c;
  }();
  return *counters;
}

}  // namespace kiln

namespace {
// Registers the KILN_STATS printer at load time, before any kernel runs.
[[maybe_unused]] const bool kCountersReady = (kiln::runtime_counters(), true);
}  // namespace
