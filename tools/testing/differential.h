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

/// How closely a value must match the interpreter's.
enum class Precision : uint8_t {
  Exact,        // bit for bit (any NaN equals any NaN)
  Approximate,  // fed by a computation a backend may round differently (docs/runtime.md,
                // "Accuracy": f32 exp/log/tanh/erf/sigmoid, float sums and products, float
                // matmul): within a relative tolerance scaled by the output's magnitude
  Unbounded,    // such a difference then went through an op that amplifies it without bound
                // (a step, a pole, a compare, a periodic function): only the type is checked
};
std::vector<Precision> precision(const Graph& g, bool exact_math = true);

/// Per output of `g`: the largest finite magnitude among it and every value it is computed
/// from, as the interpreter computes them. A sum that cancels to ~0 is off by a rounding of
/// its terms, not of its result: this is the scale its tolerance needs.
std::vector<double> magnitudes(const Graph& g, const std::vector<HostTensor>& inputs);

/// "" when `got` matches `want` at each output's precision (floats of Approximate outputs
/// within relative tolerance `rtol` (float_tolerance) of the value plus a fraction of
/// `magnitude`, looser past 64 terms in the longest sum, `depth`; non-floats always exact).
std::string compare_outputs(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got,
                            const std::vector<Precision>& precision, const std::vector<double>& magnitude,
                            double rtol, int64_t depth = 1);
/// The relative tolerance of `g`'s approximate outputs: its least precise float type's
/// (an f64 output may be computed from f32 values).
double float_tolerance(const Graph& g);
/// The most terms any sum of `g` adds: a reduction's reduced elements, a matmul's depth.
int64_t longest_sum(const Graph& g);

/// `g` run on a device and on the interpreter, compared per output.
struct OutputCheck {
  std::vector<HostTensor> want, got;    // the interpreter's, the device's
  std::vector<Precision> precision;     // what each output is held to
  std::vector<std::string> verdict;     // "" within that precision, else what differs
  std::string oracle_error;             // what the interpreter threw (then nothing ran)
};
/// Throws what the device throws. With `bound_everything`, outputs that would be checked for
/// their type only are held to the tolerance of Approximate ones (a person's graph rather
/// than a random one, whose values rarely sit on a pole).
OutputCheck check_outputs(Device device, const Graph& g, const std::vector<HostTensor>& inputs,
                          bool bound_everything = false);

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
