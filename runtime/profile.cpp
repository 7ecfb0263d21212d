// runtime/profile.cpp - see kiln/runtime/profile.h.
#include "kiln/runtime/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "kiln/runtime/stats.h"
#include "kiln/support/log.h"

namespace kiln::profile {
namespace {

struct State {
  std::mutex mutex;
  bool on = false;
  std::string trace_path;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<Launch> launches;
  std::map<std::string, Peak> peaks;
};

void report_at_exit();

State& state() {
  static State* s = [] {
    auto* st = new State();  // never destroyed: launches may be recorded during exit
    // 1, or the trace's path; 0 or unset is off. Read once, where an error could reach no
    // caller: another value is reported and ignored.
    const char* env = std::getenv("KILN_PROFILE");
    const std::string_view v = env ? env : "";
    const bool path = v.size() > 5 && v.substr(v.size() - 5) == ".json";
    if (v == "1" || path) {
      st->on = true;
      st->trace_path = path ? std::string(v) : "kiln-profile.json";
      std::atexit(report_at_exit);
    } else if (!v.empty() && v != "0") {
      warn(fmt::format("ignoring KILN_PROFILE='{}' (want 1, 0 or the trace's path ending in .json)", v));
    }
    return st;
  }();
  return *s;
}

void report_at_exit() { write_report(); }

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool enabled() { return state().on; }

void enable(std::string trace_path) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.on = true;
  s.trace_path = std::move(trace_path);
}

std::string trace_path() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.trace_path;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - state().start).count();
}

void record(Launch launch) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.launches.push_back(std::move(launch));
}

std::vector<Launch> launches() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.launches;
}

void reset() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.launches.clear();
}

void set_peak(const std::string& device, Peak peak) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.peaks[device] = peak;
}

std::optional<Peak> peak(const std::string& device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.peaks.find(device);
  if (it == s.peaks.end()) return std::nullopt;
  return it->second;
}

std::string summary() {
  struct Group {
    std::string device, graph, kernel, kind, values;
    int64_t count = 0, ns = 0, bytes = 0, flops = 0;
  };
  std::map<std::string, Group> groups;
  int64_t total_ns = 0;
  const std::vector<Launch> all = launches();
  for (const Launch& l : all) {
    Group& g = groups[l.device + "|" + l.graph + "|" + l.kernel + "|" + l.kind];
    g.device = l.device;
    g.graph = l.graph;
    g.kernel = l.kernel;
    g.kind = l.kind;
    g.values = l.values;
    ++g.count;
    g.ns += l.duration_ns;
    g.bytes += l.bytes;
    g.flops += l.flops;
    total_ns += l.duration_ns;
  }
  std::vector<const Group*> order;
  for (const auto& [key, g] : groups) order.push_back(&g);
  std::sort(order.begin(), order.end(), [](const Group* a, const Group* b) { return a->ns > b->ns; });
  std::string out = fmt::format("kiln profile: {} launches, {:.3f} ms\n", all.size(), static_cast<double>(total_ns) / 1e6);
  out += fmt::format("  {:>6} {:>6} {:>10} {:>10} {:>8} {:>9} {:>12}  {:<10} {:<6} {}\n", "time%", "calls", "total ms",
                     "mean us", "GB/s", "GFLOP/s", "of peak", "device", "kind", "kernel (graph: values)");
  for (const Group* g : order) {
    const double s = static_cast<double>(g->ns) / 1e9;
    const double gbs = s > 0 ? static_cast<double>(g->bytes) / s / 1e9 : 0;
    const double gflops = s > 0 ? static_cast<double>(g->flops) / s / 1e9 : 0;
    std::string share = "-";
    if (const std::optional<Peak> p = peak(g->device); p && (p->copy_gbs > 0 || p->fma_gflops > 0)) {
      const double bw = p->copy_gbs > 0 ? gbs / p->copy_gbs : 0, fma = p->fma_gflops > 0 ? gflops / p->fma_gflops : 0;
      share = bw >= fma ? fmt::format("{:.0f}% copy", 100 * bw) : fmt::format("{:.0f}% fma", 100 * fma);
    }
    std::string values = g->values;
    if (values.size() > 60) values = values.substr(0, 57) + "...";
    out += fmt::format("  {:>5.1f}% {:>6} {:>10.3f} {:>10.1f} {:>8.1f} {:>9.1f} {:>12}  {:<10} {:<6} {} ({}: {})\n",
                       total_ns > 0 ? 100.0 * static_cast<double>(g->ns) / static_cast<double>(total_ns) : 0.0,
                       g->count, static_cast<double>(g->ns) / 1e6, static_cast<double>(g->ns) / 1e3 / static_cast<double>(g->count),
                       gbs, gflops, share, g->device, g->kind, g->kernel, g->graph, values);
  }
  State& st = state();
  std::lock_guard lock(st.mutex);
  for (const auto& [device, p] : st.peaks)
    if (p.copy_gbs > 0 || p.fma_gflops > 0)
      out += fmt::format("  peak of {}: copy {:.1f} GB/s, multiply-add {:.1f} GFLOP/s (measured once, kept in the disk cache)\n",
                       device, p.copy_gbs, p.fma_gflops);
  const DeviceMemoryGauge& m = device_memory_gauge();
  auto size = [](int64_t bytes) {
    return bytes < (1 << 20) ? fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024)
                             : fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  };
  out += fmt::format("  device memory: {} at most at once (since the start or the last reset_peak), {} now\n",
                     size(m.peak.load()), size(m.live.load()));
  return out;
}

std::string trace_json() {
  const std::vector<Launch> all = launches();
  std::map<std::string, int> tid;  // one track per device
  for (const Launch& l : all) tid.emplace(l.device, static_cast<int>(tid.size()) + 1);
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto event = [&](const std::string& text) {
    out += first ? "  " : ",\n  ";
    out += text;
    first = false;
  };
  for (const auto& [device, id] : tid)
    event(fmt::format(R"({{"ph": "M", "pid": 1, "tid": {}, "name": "thread_name", "args": {{"name": {}}}}})", id,
                      json_string(device)));
  for (const Launch& l : all) {
    const double us = static_cast<double>(l.duration_ns) / 1e3;
    const double s = static_cast<double>(l.duration_ns) / 1e9;
    event(fmt::format(
        R"({{"ph": "X", "pid": 1, "tid": {}, "ts": {:.3f}, "dur": {:.3f}, "name": {}, "cat": {}, "args": {{"graph": {}, "values": {}, "bytes": {}, "flops": {}, "GB/s": {:.2f}, "GFLOP/s": {:.2f}}}}})",
        tid[l.device], static_cast<double>(l.start_ns) / 1e3, us, json_string(l.kernel + " " + l.values),
        json_string(l.kind), json_string(l.graph), json_string(l.values), l.bytes, l.flops,
        s > 0 ? static_cast<double>(l.bytes) / s / 1e9 : 0.0, s > 0 ? static_cast<double>(l.flops) / s / 1e9 : 0.0));
  }
  out += "\n], \"displayTimeUnit\": \"ns\"}\n";
  return out;
}

void write_report() {
  std::fprintf(stderr, "%s", summary().c_str());
  const std::string path = trace_path();
  if (path.empty()) return;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << trace_json();
  if (f.good()) std::fprintf(stderr, "kiln profile: trace written to %s (open it in https://ui.perfetto.dev)\n", path.c_str());
  else std::fprintf(stderr, "kiln profile: cannot write the trace to %s\n", path.c_str());
}

}  // namespace kiln::profile

namespace {
// Registers the KILN_PROFILE report at load time, before any kernel runs.
[[maybe_unused]] const bool kProfileReady = (kiln::profile::enabled(), true);
}  // namespace
