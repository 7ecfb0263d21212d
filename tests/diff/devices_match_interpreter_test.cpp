// Differential test: every registered device against the reference interpreter on random
// graphs, in two sizes. The small graphs (dims up to 4) reach every op, dtype, broadcast and
// view chain; the large ones (dims up to 96) reach vector loops and their remainders, the
// split across cores, split-reductions and the GEMM path.
//
// Comparisons are exact (bit for bit; any NaN equals any NaN) for every output whose value
// no approximated computation feeds. What a backend may compute differently is listed in
// docs/runtime.md ("Accuracy"): f32 exp/log/tanh/erf/sigmoid (inline approximations of a few
// ulp), float sums and products (another order of accumulation), float matmul (accumulates in
// the operand type). An output that depends on any of those is compared with a relative
// tolerance scaled by the magnitude of its values. `KILN_DIFF_SEED=N` reruns one seed; a
// failure prints the graph and what the device's pipeline made of it.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "kiln/backend/backend.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "random_graph.h"

namespace kiln {

// gtest prints parameters with this (not as raw bytes, padding included).
void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }

namespace {

// Per value: whether an approximated computation (see the file comment) feeds it.
std::vector<bool> approximated(const Graph& g) {
  std::vector<bool> approx(g.size(), false);
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    bool a = false;
    for (ValueId o : n.operands) a = a || approx[o];
    const bool float_in = !n.operands.empty() && is_float(g.type(n.operands[0]).dtype);
    if (n.info().has(trait::VectorMath) && n.type.dtype == DType::F32) a = true;
    if ((n.op == OpKind::ReduceSum || n.op == OpKind::ReduceProd) && float_in) a = true;
    if (n.op == OpKind::Matmul && float_in) a = true;
    approx[id] = a;
  }
  return approx;
}

// "" when `got` matches `want`: exactly where `exact[o]`, else within tolerance.
std::string compare(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got,
                    const std::vector<bool>& exact, bool has_f32) {
  if (want.size() != got.size()) return fmt::format("{} outputs, expected {}", got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const HostTensor& w = want[o];
    const HostTensor& g = got[o];
    if (!(w.type() == g.type())) return fmt::format("output {}: type {} instead of {}", o, g.type().str(), w.type().str());
    if (exact[o] || !is_float(w.dtype())) {
      if (std::string d = test::compare_exact({w}, {g}); !d.empty()) return fmt::format("output {} (exact): {}", o, d);
      continue;
    }
    double scale = 0;  // the largest finite magnitude in the output
    for (int64_t k = 0; k < w.numel(); ++k)
      if (std::isfinite(w.get_double(k))) scale = std::max(scale, std::fabs(w.get_double(k)));
    // An f64 output may be computed from f32 values: the precision of the graph counts.
    const double rtol = has_f32 ? 2e-4 : 1e-10;
    for (int64_t k = 0; k < w.numel(); ++k) {
      const double a = g.get_double(k), b = w.get_double(k);
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;
      if (std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= rtol * (std::fabs(b) + 1e-3 * scale + 1e-6)) continue;
      return fmt::format("output {} element {}: {} instead of {}", o, k, a, b);
    }
  }
  return "";
}

struct Mode {
  const char* name;
  uint64_t graphs;
  test::RandomGraphOptions options;
};

// Which code paths of a compiling backend the graphs reached (for the large mode's claim).
struct Reached {
  int vector_loops = 0, thread_splits = 0, split_reductions = 0, gemms = 0;
};

void tally(Backend& backend, const Graph& g, Reached& r) {
  const Compilation c = compile_graph(backend, g);
  for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
    const kir::Kernel& k = c.plan.kernels[i];
    const kir::Schedule& s = c.plan.schedules[i];
    if (k.domain.rank() > 0 && s.vector_width > 1 && k.domain[k.domain.rank() - 1] > s.vector_width) ++r.vector_loops;
    if (s.grain < s.iterations) ++r.thread_splits;
  }
  for (const LaunchPlan::Step& st : c.plan.steps) r.gemms += st.kernel < 0;
  PipelineOptions po;
  po.verify_each = false;
  const std::vector<const PassInfo*> split_only{find_pass("split-reductions")};
  if (Expected<Graph> split = run_pipeline(g, split_only, PassOptions{}, po); split && split->size() > g.size())
    ++r.split_reductions;
}

Reached check_device(Device device, const Mode& mode) {
  Reached reached;
  size_t checked = 0;
  const std::vector<uint64_t> seeds = test::diff_seeds(mode.graphs);
  for (uint64_t seed : seeds) {
    const Graph g = test::random_graph(seed, mode.options);
    const std::vector<HostTensor> inputs = test::random_inputs(g, seed);
    const std::vector<HostTensor> want = interpret(g, inputs);
    std::vector<HostTensor> got;
    auto explain = [&] {
      std::string s = print_graph(g);
      if (Backend* b = engine_for(device).backend()) s += "fused:\n" + print_graph(compile_graph(*b, g).fused);
      return s;
    };
    try {
      got = run_on_host(device, g, inputs);
    } catch (const std::exception& e) {
      ADD_FAILURE() << device.str() << " seed " << seed << ": " << e.what() << "\n" << explain();
      return reached;
    }
    const std::vector<bool> approx = approximated(g);
    std::vector<bool> exact;
    for (ValueId v : g.outputs()) exact.push_back(!approx[v]);
    bool has_f32 = false;
    for (const Node& n : g.nodes()) has_f32 = has_f32 || n.type.dtype == DType::F32;
    const std::string diff = compare(want, got, exact, has_f32);
    EXPECT_EQ(diff, "") << device.str() << " seed " << seed << " (" << mode.name << ")\n" << explain();
    if (!diff.empty()) return reached;
    if (Backend* b = engine_for(device).backend()) tally(*b, g, reached);
    ++checked;
  }
  EXPECT_EQ(checked, seeds.size());
  return reached;
}

class DevicesMatchInterpreter : public testing::TestWithParam<Device> {};

TEST_P(DevicesMatchInterpreter, SmallRandomGraphs) { check_device(GetParam(), {"small", 400, {}}); }

TEST_P(DevicesMatchInterpreter, LargeRandomGraphs) {
  test::RandomGraphOptions o;
  o.nodes = 12;
  o.max_rank = 3;
  o.max_dim = 96;
  o.zero_size = false;
  const Reached r = check_device(GetParam(), {"large", 40, o});
  if (engine_for(GetParam()).backend() == nullptr || test::diff_seeds(40).size() < 40) return;
  // The large graphs must reach the paths small ones never do.
  EXPECT_GT(r.vector_loops, 0);
  EXPECT_GT(r.thread_splits, 0);
  EXPECT_GT(r.split_reductions, 0);
  EXPECT_GT(r.gemms, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DevicesMatchInterpreter, testing::ValuesIn(registered_devices()),
                         [](const testing::TestParamInfo<Device>& i) { return i.param.str(); });

}  // namespace
}  // namespace kiln
