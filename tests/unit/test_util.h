// tests/unit/test_util.h - helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "kiln/backends/cpu.h"
#include "kiln/codegen/lower.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/text.h"
#include "kiln/ir/host_tensor.h"
#include "kiln/ir/interpreter.h"
#include "kiln/passes/memory_plan.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::test {

/// Op coverage is derived from the cases that ran: every graph the helpers below run adds
/// its op names to the file named by $KILN_OP_COVERAGE, when it is set.
inline void record_ops(const Graph& g) {
  const char* path = std::getenv("KILN_OP_COVERAGE");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::app);
  for (const Node& n : g.nodes()) out << op_name(n.op) << "\n";
}

/// Runs this test binary's tests matching `filter` in a child process and returns the names
/// of the ops their graphs used (an op-coverage meta-test calls this, so that it sees every
/// case even when ctest runs each test in a process of its own).
inline std::set<std::string> ops_exercised_by(const std::string& filter) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("kiln-op-coverage-" + std::to_string(::getpid()) + ".txt");
  std::filesystem::remove(file);
  const std::string cmd = "KILN_OP_COVERAGE='" + file.string() + "' /proc/" + std::to_string(::getpid()) +
                          "/exe --gtest_filter='" + filter + "' > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the covered tests themselves fail: " << cmd;
  std::set<std::string> ops;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) ops.insert(line);
  std::filesystem::remove(file);
  return ops;
}

/// The bytes of file `p` ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Parses (and verifies) `text`, failing the test with the diagnostic if it does not parse.
inline Graph parse_or_fail(const std::string& text) {
  auto g = parse_graph(text, "test.kir");
  if (!g) ADD_FAILURE() << g.error().str();
  return g ? std::move(*g) : Graph();
}

/// The one kernel `text` fuses into at -O2, before any backend's passes.
inline kir::Kernel only_kernel(const std::string& text) {
  const Graph fused = run_pipeline(parse_or_fail(text), pipeline_for_level(2)).take();
  LaunchPlan plan = lower_to_kernels(fused, plan_memory(fused));
  EXPECT_EQ(plan.kernels.size(), 1u) << print_graph(fused);
  return plan.kernels.at(0);
}

/// Runs the graph in `text` on the interpreter and returns its outputs.
inline std::vector<HostTensor> run(const std::string& text, std::vector<HostTensor> inputs = {}) {
  const Graph g = parse_or_fail(text);
  record_ops(g);
  register_custom_host();  // custom kernels run through the cpu backend's compiler
  return interpret(g, inputs);
}

/// The single output of a graph with no parameters whose body is `body` and whose result
/// type is `result`: `graph @t() -> result { body }`.
inline HostTensor eval(const std::string& result, const std::string& body) {
  return run("graph @t() -> " + result + " {\n" + body + "\n}\n").at(0);
}

/// The device the every-op tests (device_ops_test) run on: `cpu`, or $KILN_TEST_DEVICE (ctest
/// runs them once more as `opencl.*` with opencl:0).
inline Device device_under_test() {
  const char* d = std::getenv("KILN_TEST_DEVICE");
  return d && *d ? Device::parse(d) : Device::cpu();
}

inline std::vector<HostTensor> run_on_device_under_test(const Graph& g, const std::vector<HostTensor>& inputs) {
  record_ops(g);
  return run_on_host(device_under_test(), g, inputs);
}

/// Runs `g` on the cpu engine (fusion, Kernel IR, LLVM) and returns copies of its outputs.
inline std::vector<HostTensor> run_cpu(const Graph& g, const std::vector<HostTensor>& inputs) {
  record_ops(g);
  return run_on_host(Device::cpu(), g, inputs);
}

}  // namespace kiln::test
