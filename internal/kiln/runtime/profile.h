// kiln/runtime/profile.h - every launch on every device timed: KILN_PROFILE and
// `kiln run --profile`.
//
// While profiling, the engine waits for each launch to finish (so a GPU's time is its
// launch's, not the queue's) and records it here with the bytes it moves (its buffers, each
// once: the least traffic it can have) and the FLOPs it computes (a GEMM's 2mnk; a kernel's
// arithmetic per point times its points). The report groups launches by kernel, rates them
// against the device's peak (copy bandwidth and multiply-add rate, measured once per device and
// kept in the disk cache), and writes a Chrome trace-event file that Perfetto and
// chrome://tracing open. docs/runtime.md, "Profiling".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::profile {

struct Launch {
  std::string device;  // "cpu", "opencl:0"
  std::string graph;   // the compiled graph: its name and plan hash, "@resnet18 3f2a..."
  std::string kernel;  // the fused graph's kernel region, "k12"
  std::string kind;    // "kernel" or "gemm"
  std::string values;  // the fused graph's values the launch writes, "%y, %relu_3"
  int64_t start_ns = 0, duration_ns = 0;  // since the profile started
  int64_t bytes = 0, flops = 0;
};

/// What a device reaches at best, measured on the device itself: its copy bandwidth (a copy
/// kernel over 64 MiB) and its f32 multiply-add rate (on the cpu, the GEMM micro-kernel on
/// L1-resident panels on every core; elsewhere kiln's GEMM at 512^3).
struct Peak {
  double copy_gbs = 0, fma_gflops = 0;
};

/// Whether launches are recorded: KILN_PROFILE set to anything but "" or "0", or enable().
bool enabled();
/// Starts recording. `trace_path` is where write_report() puts the trace ("" for none).
void enable(std::string trace_path);
/// The trace file: KILN_PROFILE's value when it ends in .json, else kiln-profile.json.
std::string trace_path();
/// Nanoseconds since the profile started (a launch's start_ns).
int64_t now_ns();

void record(Launch launch);
std::vector<Launch> launches();
/// Forgets every launch (not the peaks).
void reset();

void set_peak(const std::string& device, Peak peak);
std::optional<Peak> peak(const std::string& device);

/// The table grouped by kernel, slowest first: launches, total and mean time, GB/s,
/// GFLOP/s, the share of the device's peak (the larger of the two shares, named) and of the
/// total time.
std::string summary();
/// The launches as Chrome trace events, one track per device.
std::string trace_json();
/// Prints summary() to stderr and writes trace_json() to trace_path(), naming it.
void write_report();

}  // namespace kiln::profile
