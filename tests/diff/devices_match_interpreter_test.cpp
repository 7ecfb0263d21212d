// Differential test: every registered device against the reference interpreter on random
// graphs (tools/testing: the same check as `kiln fuzz`), in two sizes. The small graphs (dims up to 4) reach every op, dtype, broadcast and
// view chain; the large ones (dims up to 96) reach vector loops and their remainders, the
// split across cores, split-reductions and the GEMM path, for matmuls and for einsum-style
// contractions.
//
// Comparisons are exact (bit for bit; any NaN equals any NaN) for every output whose value
// no approximated computation feeds. What a backend may compute differently is listed in
// docs/runtime.md ("Accuracy"): f32 exp/log/tanh/erf/sigmoid (inline approximations of a few
// ulp), float sums and products (another order of accumulation), float matmul (accumulates in
// the operand type). An output that depends on any of those is compared with a relative
// tolerance scaled by its magnitude and that of the values it is computed from, unless the difference then went through
// an op that amplifies it without bound (a step, a pole, a compare, sin/cos): then only its
// type is checked (test::Precision). `KILN_DIFF_SEED=N` reruns one seed; a failure prints
// the graph and what the device's pipeline made of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kiln/backends/backend.h"
#include "kiln/codegen/c_source.h"
#include "kiln/engine/compile.h"
#include "kiln/engine/engine.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/text.h"
#include "kiln/passes/pass_manager.h"
#include "differential.h"
#include "random_graph.h"

namespace kiln {

// gtest prints parameters with this (not as raw bytes, padding included).
void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }

namespace {

struct Mode {
  const char* name;
  uint64_t graphs;
  test::RandomGraphOptions options;
  bool gradients = false;  // check each graph's backward (test::gradient_graph) instead
};

// Which code paths of a compiling backend the graphs reached (for the large mode's claim).
struct Reached {
  int vector_loops = 0, thread_splits = 0, split_reductions = 0, gemms = 0;
  int contraction_gemms = 0;  // GEMM steps of regions with no matmul: einsum-style sums
  int group_reductions = 0;  // work-group devices: a row per group (tree or subgroups)
  int vector_lanes = 0;      // a work-item's lanes held as vector values (c_lanes_as_vectors)
  int im2col_gemms = 0;      // convolutions whose GEMM gathers the windows (Gemm::im2col)
  int conv_kernels = 0;      // convolutions expanded into a reduction kernel (expand-convs)
  int attentions = 0;        // attention steps (fuse-attention)
  int differentiated = 0;    // graphs whose backward was checked (Mode::gradients)
};

void tally(Backend& backend, const Graph& g, Reached& r) {
  const Compilation c = compile_graph(backend, g);
  for (size_t i = 0; i < c.plan.kernels.size(); ++i) {
    const kir::Kernel& k = c.plan.kernels[i];
    const kir::Schedule& s = c.plan.schedules[i];
    if (k.domain.rank() > 0 && s.vector_width > 1 && k.domain[k.domain.rank() - 1] > s.vector_width) ++r.vector_loops;
    if (s.task_grain() < s.iterations) ++r.thread_splits;
    if (s.lanes_reduce && s.work_items.reduction != kir::ReductionStrategy::Serial) ++r.group_reductions;
    if (backend.capabilities().vector_values && kir::c_lanes_as_vectors(k, s.vector_width)) ++r.vector_lanes;
  }
  for (const LaunchPlan::Step& st : c.plan.steps) {
    r.attentions += st.attention.has_value();
    if (!st.is_gemm()) continue;
    ++r.gemms;
    r.im2col_gemms += st.gemm.im2col.has_value();
    const auto of_matmul = [&](const Node& n) {
      return n.info().category == OpCategory::Matmul && n.kernel >= 0 &&
             c.fused.kernels()[static_cast<size_t>(n.kernel)].name == st.gemm.name;
    };
    r.contraction_gemms += std::none_of(c.fused.nodes().begin(), c.fused.nodes().end(), of_matmul);
  }
  const auto conv = [](const Node& n) { return n.op == OpKind::Conv; };
  if (std::any_of(g.nodes().begin(), g.nodes().end(), conv) && std::none_of(c.fused.nodes().begin(), c.fused.nodes().end(), conv))
    ++r.conv_kernels;
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
  test::RandomGraphOptions options = mode.options;
  options.f64_math = device.kind != Device::Kind::Vulkan;  // GLSL has no f64 exp, log...
  for (uint64_t seed : seeds) {
    const Graph g = mode.gradients ? test::gradient_graph(test::random_graph(seed, options))
                                   : test::random_graph(seed, options);
    if (g.size() == 0) {  // no gradient flows through this one
      ++checked;
      continue;
    }
    reached.differentiated += mode.gradients;
    auto explain = [&] {
      std::string s = print_graph(g);
      if (Backend* b = engine_for(device).backend()) s += "fused:\n" + print_graph(compile_graph(*b, g).fused);
      return s + "smallest failing graph:\n" + print_graph(test::minimize(device, g, seed));
    };
    const std::string diff = test::check_on_device(device, g, seed);
    // A kernel past the device's loop budget (Capabilities::max_loop_iterations: lavapipe's)
    // is refused with an error saying so; such a graph checks that error, not values.
    if (diff.find("loop iterations per work-item") != std::string::npos && engine_for(device).backend() &&
        engine_for(device).backend()->capabilities().max_loop_iterations > 0) {
      tally(*engine_for(device).backend(), g, reached);  // what its plan reaches still counts
      ++checked;
      continue;
    }
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
  o.scans = false;  // the seeds below reach every path with the draws of before
  const Reached r = check_device(GetParam(), {"large", 40, o});
  if (engine_for(GetParam()).backend() == nullptr || test::diff_seeds(40).size() < 40) return;
  // The large graphs must reach the paths small ones never do.
  EXPECT_GT(r.split_reductions, 0);
  EXPECT_GT(r.gemms, 0);
  EXPECT_GT(r.contraction_gemms, 0);
  if (engine_for(GetParam()).backend()->capabilities().family == DeviceFamily::WorkItems) {  // work-groups
    EXPECT_GT(r.group_reductions, 0);
    if (engine_for(GetParam()).backend()->capabilities().vector_values) {
      EXPECT_GT(r.vector_lanes, 0);
    }
    return;
  }
  EXPECT_GT(r.vector_loops, 0);
  EXPECT_GT(r.thread_splits, 0);
}

// Convolutions (strided, padded, dilated, grouped, depthwise; 1 and 2 spatial dims) with
// the ops around them: on the GEMM with its windows gathered, and expanded into reductions.
TEST_P(DevicesMatchInterpreter, RandomGraphsWithConvolutions) {
  test::RandomGraphOptions o;
  o.nodes = 10;
  o.max_dim = 8;
  o.zero_size = false;
  o.convs = true;
  const Reached r = check_device(GetParam(), {"convs", 60, o});
  if (engine_for(GetParam()).backend() == nullptr || test::diff_seeds(60).size() < 60) return;
  EXPECT_GT(r.im2col_gemms, 0);
  EXPECT_GT(r.conv_kernels, 0);
}

// Attention in the forms fuse-attention matches, with the ops around them: one attention
// step each, its online softmax against the interpreter's softmax and products.
TEST_P(DevicesMatchInterpreter, RandomGraphsWithAttention) {
  test::RandomGraphOptions o;
  o.nodes = 8;
  o.max_dim = 12;
  o.zero_size = false;
  o.attention = true;
  const Reached r = check_device(GetParam(), {"attention", 40, o});
  if (engine_for(GetParam()).backend() == nullptr || test::diff_seeds(40).size() < 40) return;
  EXPECT_GT(r.attentions, 0);
}

// Gradients: each random graph's backward (every op's gradient rule, recorded by
// kiln::grad and traced into a graph) run on the device against the interpreter, with the
// forward's tolerances; small graphs reach every op, convolution and attention graphs the
// transposed convolutions and the attention's recomputed softmax.
TEST_P(DevicesMatchInterpreter, RandomGraphsDifferentiated) {
  const Reached r = check_device(GetParam(), {"gradients", 200, {}, true});
  if (test::diff_seeds(200).size() == 200) {
    EXPECT_GT(r.differentiated, 130);
  }
  test::RandomGraphOptions conv;
  conv.nodes = 8;
  conv.max_dim = 8;
  conv.zero_size = false;
  conv.convs = true;
  check_device(GetParam(), {"convolution gradients", 20, conv, true});
  test::RandomGraphOptions attention = conv;
  attention.convs = false;
  attention.attention = true;
  check_device(GetParam(), {"attention gradients", 15, attention, true});
}

// The minimizer shrinks a failing graph to what the failure needs: here, "contains an exp".
TEST(Minimizer, ShrinksToWhatTheFailureNeeds) {
  // An exp that an output needs: the minimizer keeps only those (a random graph may hold
  // dead ones, as seed 26 has since graphs draw argsort).
  auto has_exp = [](const Graph& g) {
    std::vector<bool> need(g.size(), false);
    for (ValueId v : g.outputs()) need[v] = true;
    for (size_t id = g.size(); id-- > 0;) {
      if (!need[id]) continue;
      if (g.node(static_cast<ValueId>(id)).op == OpKind::Exp) return true;
      for (ValueId o : g.node(static_cast<ValueId>(id)).operands) need[o] = true;
    }
    return false;
  };
  int tried = 0;
  for (uint64_t seed = 0; seed < 200 && tried < 5; ++seed) {
    const Graph g = test::random_graph(seed);
    if (!has_exp(g) || g.size() < 8) continue;
    ++tried;
    const Graph small = test::minimize(g, has_exp);
    EXPECT_TRUE(has_exp(small)) << print_graph(small);
    EXPECT_TRUE(static_cast<bool>(verify(small))) << print_graph(small);
    EXPECT_LE(small.size(), 2u) << "from " << g.size() << " nodes:\n" << print_graph(small);  // a parameter and exp
    EXPECT_EQ(small.outputs().size(), 1u);
  }
  EXPECT_EQ(tried, 5);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DevicesMatchInterpreter, testing::ValuesIn(registered_devices()),
                         [](const testing::TestParamInfo<Device>& i) {
                           std::string name = i.param.str();  // opencl:0 -> opencl0
                           std::erase(name, ':');
                           return name;
                         });

}  // namespace
}  // namespace kiln
