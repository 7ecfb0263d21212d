// tests/fuzz/onnx_fuzzer.cpp - a libFuzzer target over ONNX model bytes: import from memory
// (kiln::onnx::load_bytes), verify, -O2 with verification after every pass, and the
// interpreter at -O0 against -O2.
//
// Every input must be refused with a kiln::Error (onnx::Unsupported included) or survive all
// of it; the values at -O2 match -O0's as the device tests hold a device to the interpreter
// (bit for bit, or within tolerance where a lowering reorders a float sum). Nothing a file only claims may be allocated: the run's memory is bounded by
// -rss_limit_mb, and an initializer that claims 10^12 elements must be refused before its
// buffer exists. Build and run: scripts/fuzz.sh SECONDS JOBS onnx (clang,
// -fsanitize=fuzzer,address,undefined), seeded with ONNX's node tests and the model suite's
// small fixtures.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/host_tensor.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/text.h"
#include "kiln/onnx/onnx.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/error.h"
#include "fuzz_inputs.h"
#include "differential.h"

namespace {

using kiln::Graph;
using kiln::HostTensor;

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "onnx_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::onnx::ImportOptions options;
  options.weights = kiln::onnx::Weights::Inline;  // the parameters left are the model's inputs
  Graph g;
  try {
    g = kiln::onnx::load_bytes(std::string_view(reinterpret_cast<const char*>(data), size), options, "fuzz.onnx").graph;
  } catch (const kiln::Error&) {
    return 0;  // refused with a message: fine
  }
  if (kiln::Status st = kiln::verify(g); !st) bug("the imported graph does not verify: " + st.error().str());
  kiln::PipelineOptions po;
  po.verify_each = true;
  auto optimized = kiln::run_pipeline(g, kiln::pipeline_for_level(2), kiln::PassOptions{}, po);
  if (!optimized) bug("-O2 failed: " + optimized.error().str() + "\n" + kiln::print_graph(g));
  if (!kiln::fuzz::small_enough(g) || !kiln::fuzz::small_enough(*optimized)) return 0;
  const auto runs = kiln::fuzz::interpret_both(g, *optimized);
  if (!runs) return 0;  // a runtime error of the model itself
  if (!runs->optimized_failure.empty())
    bug("the optimized graph fails where the imported one runs: " + runs->optimized_failure + "\n" + kiln::print_graph(g));
  const std::vector<HostTensor>& want = runs->want;
  const std::vector<HostTensor>& got = runs->got;
  if (want.size() != got.size()) bug("-O2 changed the number of outputs");
  // Lowerings such as expand-convs sum a convolution's taps in another order: outputs fed by
  // such sums are held to the tolerance the device tests use (tools/testing), the rest bit
  // for bit.
  const std::vector<kiln::test::Precision> per_value = kiln::test::precision(g);
  std::vector<kiln::test::Precision> per_output;
  for (kiln::ValueId v : g.outputs()) per_output.push_back(per_value[v]);
  const std::string diff = kiln::test::compare_outputs(want, got, per_output, kiln::test::magnitudes(g, runs->inputs),
                                                       kiln::test::float_tolerance(g), kiln::test::longest_sum(g));
  if (!diff.empty()) bug("-O2 changed the values: " + diff + "\n" + kiln::print_graph(g));
  return 0;
}
