// Differential test: the cpu device (fusion, Kernel IR, LLVM) against the reference
// interpreter on random graphs. Arithmetic, comparisons, casts, views and integer ops must
// match bit for bit; float results may differ where the backend is allowed to round
// differently (docs/runtime.md, "Accuracy"): f32 exp/log/tanh/erf/sigmoid use inline
// approximations of a few ulp, float sums accumulate in another order, and matmul
// accumulates in the operand type. Those differences can grow through later ops, so floats
// are compared with a relative tolerance scaled by the magnitude of the values involved.
// `KILN_DIFF_SEED=N` reruns one seed; a failure prints the graph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "kiln/codegen/cpu.h"
#include "kiln/ir/text.h"
#include "kiln/runtime/interpreter.h"
#include "random_graph.h"

namespace kiln {
namespace {

constexpr uint64_t kGraphs = 400;

// "" when `got` matches `want` within the documented tolerances.
std::string compare_close(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got, bool has_f32) {
  if (want.size() != got.size()) return fmt::format("{} outputs, expected {}", got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const HostTensor& w = want[o];
    const HostTensor& g = got[o];
    if (!(w.type() == g.type())) return fmt::format("output {}: type {} instead of {}", o, g.type().str(), w.type().str());
    double scale = 0;  // the largest finite magnitude in the output
    if (is_float(w.dtype()))
      for (int64_t k = 0; k < w.numel(); ++k)
        if (std::isfinite(w.get_double(k))) scale = std::max(scale, std::fabs(w.get_double(k)));
    // An f64 output may be computed from f32 values: the precision of the graph counts.
    const double rtol = has_f32 ? 2e-4 : 1e-10;
    for (int64_t k = 0; k < w.numel(); ++k) {
      if (!is_float(w.dtype())) {
        if (w.get_int(k) != g.get_int(k))
          return fmt::format("output {} element {}: {} instead of {}", o, k, g.get_int(k), w.get_int(k));
        continue;
      }
      const double a = g.get_double(k), b = w.get_double(k);
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;
      if (std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= rtol * (std::fabs(b) + 1e-3 * scale + 1e-6)) continue;
      return fmt::format("output {} element {}: {} instead of {}", o, k, a, b);
    }
  }
  return "";
}

TEST(CpuMatchesInterpreter, RandomGraphs) {
  int checked = 0;
  for (uint64_t seed : test::diff_seeds(kGraphs)) {
    const Graph g = test::random_graph(seed);
    const std::vector<HostTensor> inputs = test::random_inputs(g, seed);
    const std::vector<HostTensor> want = interpret(g, inputs);
    std::vector<BufferRef> refs;
    for (const HostTensor& t : inputs) refs.push_back(std::make_shared<const HostTensor>(t));
    std::vector<HostTensor> got;
    try {
      for (const BufferRef& r : cpu_engine().run(g, refs)) got.push_back(*r);
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": " << e.what() << "\n" << print_graph(g);
    }
    bool has_f32 = false;
    for (const Node& n : g.nodes()) has_f32 = has_f32 || n.type.dtype == DType::F32;
    const std::string diff = compare_close(want, got, has_f32);
    ASSERT_EQ(diff, "") << "seed " << seed << "\n"
                        << print_graph(g) << "fused:\n"
                        << print_graph(cpu_compile_graph(g).fused);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(test::diff_seeds(kGraphs).size()));
}

}  // namespace
}  // namespace kiln
