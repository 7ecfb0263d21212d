// tools/testing/random_graph.h - reproducible random graphs for differential testing.
//
// A seed gives the same graph on every machine. Graphs mix every op category (sources,
// elementwise with broadcasting and promotion, reductions, views, matmul) and plant the
// patterns the passes look for (splat constants such as 0, -0.0 and 1, repeated
// subexpressions, chains of views and casts, dead nodes).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"

namespace kiln::test {

struct RandomGraphOptions {
  int nodes = 20;        // operations to attempt
  int max_rank = 3;
  int64_t max_dim = 4;
  bool zero_size = true;  // occasionally a dimension of 0
  /// exp, log, tanh, sin, cos, sigmoid, erf and pow on f64 values; false casts such operands
  /// to f32 first (for devices without them: GLSL has no f64 versions).
  bool f64_math = true;
  /// Now and then a cumsum or an argsort where a reduction would be drawn (false keeps the
  /// draws of the graphs made before cumsum existed: the large-graph test counts the paths
  /// they reach).
  bool scans = true;
  /// Now and then a convolution where a matmul would be drawn: strided, padded, dilated,
  /// grouped and depthwise, with 8 or more filters per group half the time so that it runs
  /// on the GEMM (false keeps the draws of the graphs made before conv existed).
  bool convs = false;
  /// Now and then attention where a matmul would be drawn (fuse-attention's forms: scaled or
  /// not, with a bias or not, NaN rows zeroed or not, keys shared by heads or not).
  bool attention = false;
};

Graph random_graph(uint64_t seed, const RandomGraphOptions& options = {});

/// The graph of the gradients of `g` (of the sum of its float outputs, each summed in f64)
/// with respect to its float parameters, recorded by kiln::grad and traced: every op's
/// backward on a random graph, to run through the same checks as the forward. Its
/// parameters are g's. An empty graph when no gradient flows (no float output depends on a
/// float parameter).
Graph gradient_graph(const Graph& g);

/// Seeds 0..count-1 (0..count/4-1 in a sanitizer build), or only $KILN_DIFF_SEED when it is
/// set (to rerun one failure).
std::vector<uint64_t> diff_seeds(uint64_t count);

/// Inputs for `g`: floats in [-3, 3] with 4% each of 0 and -0.0, 1% each of inf and nan; integers in
/// [-5, 5]; fair bools.
std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed);

/// Compares outputs bit for bit (any NaN equals any NaN); on a difference returns a message
/// naming the output and element, else "".
std::string compare_exact(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got);

}  // namespace kiln::test
