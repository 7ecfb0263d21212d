// kiln/ir/interpreter.h - the reference interpreter: the oracle for every backend.
//
// Runs any verified Graph on host memory, op by op, with the scalar semantics of
// kiln/ir/scalar_semantics.h: elementwise math in double (f32 results rounded once),
// float sums accumulated in double with Neumaier compensation, matmul in double (Eigen).
#pragma once

#include <span>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"

namespace kiln {

/// Evaluates `g` on `inputs` (one per graph parameter, in order, of the declared types).
/// Throws kiln::Error when an input does not match its parameter.
std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor* const> inputs);
std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs);

}  // namespace kiln
