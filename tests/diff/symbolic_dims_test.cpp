// Random graphs made symbolic: one size of a random graph becomes the symbolic dim `n`
// wherever it appears, and the graph is run at n = 0, 1, an odd size and a large one on
// every device against the interpreter (kiln/ir/symbolic.h; docs/ir.md, 3.3).
//
// The graph bound back to its own size must print as the graph it came from: binding
// substitutes and nothing else. A size where the generalized graph does not verify (a
// reshape whose product only that size made equal) is skipped, as is a bound size that
// makes an op invalid (a reduction of an empty axis that needs an element): the symbolic
// form proved what it could and the bound graph's verification refuses the rest.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "kiln/engine/engine.h"
#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"
#include "differential.h"
#include "random_graph.h"

namespace kiln {
namespace {

// `g` with every dim equal to `size` (in types and in dims attributes) replaced by `n`.
Graph generalize(const Graph& g, int64_t size) {
  Graph out = g;
  const int64_t n = dim_symbol("n");
  for (ValueId id = 0; id < out.size(); ++id) {
    Node& node = out.node(id);
    Shape s = node.type.shape;
    for (int d = 0; d < s.rank(); ++d)
      if (s[d] == size) s[d] = n;
    node.type.shape = s;
    for (size_t i = 0; i < node.attrs.size(); ++i)
      if (node.info().attrs[i].kind == AttrKind::Dims)
        for (int64_t& v : node.attrs[i].ints)
          if (v == size) v = n;
  }
  return out;
}

TEST(SymbolicRandomGraphs, EveryDeviceMatchesTheInterpreterAtEverySize) {
  test::RandomGraphOptions options;
  options.max_dim = 6;
  options.f64_math = false;  // vulkan:0 is among the devices
  int generalized = 0, runs = 0;
  for (uint64_t seed : test::diff_seeds(80)) {
    const Graph g = test::random_graph(seed, options);
    if (g.inputs().empty() || g.type(g.inputs()[0]).shape.rank() == 0) continue;
    const int64_t size = g.type(g.inputs()[0]).shape[0];
    if (size < 2) continue;  // 0 and 1 are too common to stand for one size
    const Graph symbolic = generalize(g, size);
    if (!verify(symbolic) || !has_symbolic_dims(symbolic)) continue;
    ++generalized;
    const Expected<Graph> same = specialize(symbolic, {{"n", size}});
    ASSERT_TRUE(static_cast<bool>(same)) << same.error().str();
    ASSERT_EQ(print_graph(*same), print_graph(g)) << "seed " << seed;
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{37}}) {
      const Expected<Graph> bound = specialize(symbolic, {{"n", n}});
      if (!bound) continue;
      for (Device d : registered_devices()) {
        if (d == Device::interp()) continue;
        const std::string diff = test::check_on_device(d, *bound, seed);
        // lavapipe's loop budget refuses some kernels outright, with an error saying so.
        if (diff.find("loop iterations per work-item") != std::string::npos) continue;
        EXPECT_EQ(diff, "") << d.str() << " seed " << seed << " n = " << n << "\n" << print_graph(symbolic);
        // The engine given the symbolic graph binds it from its inputs: the same results.
        const std::vector<HostTensor> inputs = test::random_inputs(*bound, seed);
        EXPECT_EQ(test::compare_exact(run_on_host(d, *bound, inputs), run_on_host(d, symbolic, inputs)), "")
            << d.str() << " seed " << seed << " n = " << n;
        ++runs;
      }
    }
  }
  // The draw must reach enough generalized graphs for the test to mean something (all 80
  // seeds: a sanitizer build or KILN_DIFF_SEED runs fewer).
  if (test::diff_seeds(80).size() < 80) return;
  EXPECT_GE(generalized, 15);
  EXPECT_GE(runs, 60);
}

}  // namespace
}  // namespace kiln
