// kiln/runtime/engine.h - the one interface through which graphs are executed.
//
// The frontend hands a verified Graph and its input buffers to the Engine of the device
// and gets the output buffers back; it never knows which backend ran them.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/host_tensor.h"

namespace kiln {

/// Device memory holding one tensor, immutable once written. Host devices keep it in a
/// HostTensor; device backends will add their own buffer kinds behind this handle.
using BufferRef = std::shared_ptr<const HostTensor>;

class Engine {
 public:
  virtual ~Engine() = default;
  /// A short name for logs and errors: "interp".
  virtual const char* name() const = 0;
  /// Runs `g` on `inputs` (one per graph parameter, of the declared types) and returns
  /// one buffer per graph output. `donated[i]` says nothing else will read input i after
  /// this run, so its buffer may be overwritten (plan_memory's in-place writes); empty means
  /// none is. Must be safe to call from several threads at once.
  virtual std::vector<BufferRef> run(const Graph& g, std::span<const BufferRef> inputs,
                                     const std::vector<bool>& donated = {}) = 0;
};

/// The engine that executes graphs for `device`: the LLVM backend for `cpu`, the reference
/// interpreter for `interp`.
Engine& engine_for(Device device);

}  // namespace kiln
