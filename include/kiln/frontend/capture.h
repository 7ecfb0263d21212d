// kiln/frontend/capture.h - functions recorded once and replayed (docs/capture.md).
//
//   kiln::CapturedFunction step = kiln::capture([&](const std::vector<kiln::Tensor>& in) {
//     kiln::Tensor loss = train::cross_entropy(model(in[0]), in[1]);
//     loss.backward();
//     opt.step();
//     return std::vector<kiln::Tensor>{loss};
//   });
//   for (...) losses.push_back(step({x, y})[0]);   // from the second call on: a replay
//
// The first call runs the function with placeholder inputs, cuts what it recorded into one
// graph and prepares it on the device's engine. Later calls whose inputs match (shape, dtype,
// device) replay that graph: nothing is recorded, hashed or looked up; the inputs' buffers,
// the function's state and its bound scalars are bound and the kernels launched. A guard
// that fails captures again, logged with its reason under KILN_LOG=recompile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

/// A function from tensors to tensors, recorded at its first call and replayed after.
///
/// What a replay reproduces, besides the returned tensors (which are evaluated values without
/// gradient history):
///  - Tensor objects that existed before the call and that the function assigned (an
///    optimizer's parameters and moments): at every replay they receive their new values,
///    computed from their current ones. A leaf that required gradients stays one.
///  - Values read from outside that the function does not assign (frozen weights, a data
///    set) are read as they were at capture, like jax.jit's closed-over arrays; once nothing
///    but the capture refers to one (its tensor was replaced), the next call captures again.
///  - Numbers made with bound_scalar are read again at every replay, after the hooks that
///    on_replay registered have run.
/// Host reads inside the function (item, to_vector, eval, sync) are errors: a replay would
/// not do them. So is a value computed from the inputs that the function leaves in a tensor
/// it neither returns nor assigns before the call (a gradient left on a leaf).
class CapturedFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  explicit CapturedFunction(Fn fn);

  /// Replays when the guards hold, else captures (again). Inputs must be defined and on one
  /// device; pending ones are evaluated first.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  struct Counts {
    uint64_t captures = 0;  // calls that ran the function
    uint64_t replays = 0;   // calls that did not
  };
  Counts counts() const;
  /// Why the last capture after the first happened ("" before any): the failed guard.
  std::string last_recapture_reason() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// `fn` wrapped to be recorded once and replayed (CapturedFunction).
CapturedFunction capture(CapturedFunction::Fn fn);

/// Inside a function being captured: `hook` runs at the start of every replay, before bound
/// scalars are read (an optimizer counts its steps there). Outside a capture: does nothing,
/// since the code calling it already does its work.
void on_replay(std::function<void()> hook);

/// A rank-0 tensor holding `value()` now, typed for an operation with `like` (as `like * 0.5`
/// types its scalar). Inside a captured function the number is read again at every replay: a
/// learning rate from a schedule, an optimizer's bias corrections. Outside, it is the same as
/// the plain number (a launch-bound scalar: a new value does not recompile either way).
Tensor bound_scalar(std::function<double()> value, const Tensor& like);

}  // namespace kiln
