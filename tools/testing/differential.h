// tools/testing/differential.h - one random graph on one device against the interpreter,
// and the minimizer that shrinks a failing graph. Used by `kiln fuzz` and tests/diff.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/engine/device.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/host_tensor.h"

namespace kiln::test {

/// Per value of `g`: whether an approximated computation feeds it, one a backend may round
/// differently from the interpreter (docs/runtime.md, "Accuracy"): f32 exp/log/tanh/erf/
/// sigmoid (ops with the VectorMath trait), float sums and products, float matmul.
std::vector<bool> approximated(const Graph& g);

/// "" when `got` matches `want`: bit for bit (any NaN equals any NaN) where `exact[o]` or the
/// output is not floating point, else within a relative tolerance scaled by the output's
/// magnitude (tighter when `has_f32` is false).
std::string compare_outputs(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got,
                            const std::vector<bool>& exact, bool has_f32);

/// Runs `g` on `device` with random_inputs(g, seed) and compares with the interpreter:
/// "" on a match, else what differs (or the error thrown).
std::string check_on_device(Device device, const Graph& g, uint64_t seed);

/// The smallest graph found for which `fails` still holds (greedy, to a fixed point: drop
/// outputs, cut values loose into new parameters, drop what no output needs), from a `g`
/// for which it holds. Only verified graphs are offered to `fails`.
Graph minimize(const Graph& g, const std::function<bool(const Graph&)>& fails);
/// The same for "check_on_device(device, candidate, seed) reports a difference".
Graph minimize(Device device, const Graph& g, uint64_t seed);

}  // namespace kiln::test
