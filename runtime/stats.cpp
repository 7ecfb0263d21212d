// runtime/stats.cpp - the counters, and KILN_STATS=1 printing them at exit.
#include "kiln/runtime/stats.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "kiln/support/log.h"

namespace kiln {
namespace {

template <class F>
void for_each_counter(const RuntimeCounters& c, F&& f) {
#define KILN_VISIT_COUNTER(name, what) f(#name, c.name);
  KILN_RUNTIME_COUNTERS(KILN_VISIT_COUNTER)
#undef KILN_VISIT_COUNTER
}

void print_at_exit() { std::fprintf(stderr, "%s", runtime_counters().str().c_str()); }

}  // namespace

std::string RuntimeCounters::str() const {
  std::string out = "kiln stats:\n";
  for_each_counter(*this, [&](std::string_view name, const std::atomic<uint64_t>& v) {
    if (name == "compile_ns") out += fmt::format("  {:<22} {:.3f}\n", "compile_ms", static_cast<double>(v.load()) / 1e6);
    else out += fmt::format("  {:<22} {}\n", name, v.load());
  });
  const DeviceMemoryGauge& m = device_memory_gauge();
  out += fmt::format("  {:<22} {}\n  {:<22} {}\n", "device_bytes_live", m.live.load(), "device_bytes_peak", m.peak.load());
  return out;
}

void DeviceMemoryGauge::allocated(int64_t bytes) {
  const int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void DeviceMemoryGauge::freed(int64_t bytes) { live.fetch_sub(bytes, std::memory_order_relaxed); }

DeviceMemoryGauge& device_memory_gauge() {
  static DeviceMemoryGauge* gauge = new DeviceMemoryGauge();  // never destroyed: memory may be freed during exit
  return *gauge;
}

void RuntimeCounters::reset() {
  for_each_counter(*this, [](std::string_view, const std::atomic<uint64_t>& v) {
    const_cast<std::atomic<uint64_t>&>(v).store(0);
  });
}

RuntimeCounters& runtime_counters() {
  static RuntimeCounters* counters = [] {
    auto* c = new RuntimeCounters();  // never destroyed: kernels may count during exit
    // Read when the library loads, where an error cannot be thrown to anyone: a value other
    // than 1 or 0 is reported and ignored.
    const char* env = std::getenv("KILN_STATS");
    const std::string_view v = env ? env : "";
    if (v == "1") std::atexit(print_at_exit);
    else if (!v.empty() && v != "0") warn(fmt::format("ignoring KILN_STATS='{}' (want 1 or 0)", v));
    return c;
  }();
  return *counters;
}

}  // namespace kiln

namespace {
// Registers the KILN_STATS printer at load time, before any kernel runs.
[[maybe_unused]] const bool kCountersReady = (kiln::runtime_counters(), true);
}  // namespace
