// tests/fuzz/ir_fuzzer.cpp - a libFuzzer target over IR text: parse, verify, print round
// trip, -O2 with verification after every pass, and the interpreter at -O0 against -O2.
//
// Every input must either be rejected with a diagnostic or survive all of it: the printed
// form parses back to the same text, every pass leaves a verified graph, and the optimized
// graph computes the same bits as the original (passes are exact without fast-math; any NaN
// equals any NaN). Graphs too large to interpret quickly are only parsed and optimized. A
// graph with symbolic dims is bound (every size 2) before the passes.
// Build and run: scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/host_tensor.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/support/error.h"
#include "fuzz_inputs.h"

namespace {

using kiln::Graph;
using kiln::HostTensor;

[[noreturn]] void bug(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "ir_fuzzer: %s\n--- input ---\n%s\n", what.c_str(), text.c_str());
  std::abort();
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  if (!(a.type() == b.type())) return false;
  for (int64_t k = 0; k < a.numel(); ++k) {
    if (kiln::is_float(a.dtype())) {
      const double x = a.get_double(k), y = b.get_double(k);
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::memcmp(&x, &y, sizeof x) != 0) return false;
    } else if (a.get_int(k) != b.get_int(k)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = kiln::parse_graph(text, "fuzz.kir");
  if (!parsed) return 0;  // rejected with a diagnostic: fine
  // Round trip: print, parse, print again.
  const std::string printed = kiln::print_graph(*parsed);
  auto again = kiln::parse_graph(printed, "printed.kir");
  if (!again) bug("the printed form does not parse: " + again.error().str() + "\n--- printed ---\n" + printed, text);
  if (kiln::print_graph(*again) != printed) bug("print -> parse -> print changed the text", text);
  // Symbolic dims (docs/ir.md 3.3): the passes take sizes, so every size is bound to 2 (a
  // size of 2 broadcasts nothing); a graph those sizes make invalid is rejected with a
  // diagnostic, as a parse error would be.
  Graph bound_graph;
  const Graph* graph = &*parsed;
  if (kiln::has_symbolic_dims(*parsed)) {
    kiln::DimBindings sizes;
    for (const kiln::Node& n : parsed->nodes())
      for (int64_t d : n.type.shape.dims())
        for (const std::string& name : kiln::dim_symbols(d)) sizes[name] = 2;
    for (const kiln::Node& n : parsed->nodes())
      for (size_t i = 0; i < n.attrs.size(); ++i)
        if (n.info().attrs[i].kind == kiln::AttrKind::Dims)
          for (int64_t d : n.attrs[i].ints)
            for (const std::string& name : kiln::dim_symbols(d)) sizes[name] = 2;
    auto bound = kiln::specialize(*parsed, sizes);
    if (!bound) return 0;
    bound_graph = std::move(*bound);
    graph = &bound_graph;
  }
  const Graph& g = *graph;
  // -O2, verified after every pass.
  kiln::PipelineOptions po;
  po.verify_each = true;
  const auto passes = kiln::pipeline_for_level(2);
  auto optimized = kiln::run_pipeline(g, passes, kiln::PassOptions{}, po);
  if (!optimized) bug("-O2 failed: " + optimized.error().str(), text);
  if (!kiln::fuzz::small_enough(g) || !kiln::fuzz::small_enough(*optimized)) return 0;
  // The same values at -O0 and -O2.
  const auto runs = kiln::fuzz::interpret_both(g, *optimized);
  if (!runs) return 0;
  if (!runs->optimized_failure.empty())
    bug("the optimized graph fails where the original runs: " + runs->optimized_failure, text);
  const std::vector<HostTensor>& want = runs->want;
  const std::vector<HostTensor>& got = runs->got;
  if (want.size() != got.size()) bug("-O2 changed the number of outputs", text);
  for (size_t i = 0; i < want.size(); ++i)
    if (!same_bits(want[i], got[i])) bug("-O2 changed output " + std::to_string(i), text);
  return 0;
}
