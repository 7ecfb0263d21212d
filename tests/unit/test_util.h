// tests/unit/test_util.h - helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/codegen/cpu.h"
#include "kiln/ir/text.h"
#include "kiln/runtime/host_tensor.h"
#include "kiln/runtime/interpreter.h"

namespace kiln::test {

/// Parses (and verifies) `text`, failing the test with the diagnostic if it does not parse.
inline Graph parse_or_fail(const std::string& text) {
  auto g = parse_graph(text, "test.kir");
  if (!g) ADD_FAILURE() << g.error().str();
  return g ? std::move(*g) : Graph();
}

/// Runs the graph in `text` on the interpreter and returns its outputs.
inline std::vector<HostTensor> run(const std::string& text, std::vector<HostTensor> inputs = {}) {
  return interpret(parse_or_fail(text), inputs);
}

/// The single output of a graph with no parameters whose body is `body` and whose result
/// type is `result`: `graph @t() -> result { body }`.
inline HostTensor eval(const std::string& result, const std::string& body) {
  return run("graph @t() -> " + result + " {\n" + body + "\n}\n").at(0);
}

/// Runs `g` on the cpu engine (fusion, Kernel IR, LLVM) and returns copies of its outputs.
inline std::vector<HostTensor> run_cpu(const Graph& g, const std::vector<HostTensor>& inputs) {
  std::vector<BufferRef> refs;
  for (const HostTensor& t : inputs) refs.push_back(std::make_shared<const HostTensor>(t));
  std::vector<HostTensor> out;
  for (const BufferRef& r : cpu_engine().run(g, refs)) out.push_back(*r);
  return out;
}

}  // namespace kiln::test
