// kiln/frontend/lazy.h - sync points, capture, inspection and counters of the lazy frontend.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/graph.h"

namespace kiln {

/// Computes every pending value of the calling thread that some tensor still refers to,
/// in one execution per device; intermediates only other pending values need are computed
/// inside those executions, not returned.
void sync();

/// Blocks until the work already handed to `device` has finished; computes nothing pending.
/// Queue devices (`opencl:N`) return from eval() once their kernels are enqueued: time them
/// with this, as one times CUDA with cudaDeviceSynchronize. A no-op on `cpu` and `interp`.
void synchronize(Device device);

/// The graph that `fn` computes from inputs shaped like `example_inputs` (their values are
/// not used). Parameters are %arg0, %arg1...; tensors that `fn` captures from outside and
/// that are already evaluated become extra parameters %capture0, %capture1... after them;
/// pending captured values are traced through. Nothing is executed; a sync inside `fn` on a
/// value computed from an input throws kiln::Error.
Graph trace(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& example_inputs);
/// Single-input, single-output convenience.
Graph trace(const std::function<Tensor(const Tensor&)>& fn, const Tensor& example_input);

/// Records `g`'s nodes on `args` (one per graph parameter, of its type, all on one device)
/// and returns one pending tensor per graph output: a graph from IR text or an importer
/// used like any other tensor code, fused with what comes before and after it. A graph with
/// symbolic dims (`f32[n,768]`) takes its sizes from the arguments' shapes. Throws
/// kiln::Error naming the parameter whose tensor does not match.
std::vector<Tensor> call(const Graph& g, const std::vector<Tensor>& args);

/// The IR text of the pending stream that produces `t`: evaluated values it reads are the
/// parameters %in0, %in1... Reads as `kiln opt` input. Executes nothing.
std::string dump(const Tensor& t);
/// The same as a Graph.
Graph pending_graph(const Tensor& t);

/// Counters of the calling process (all threads), for tests and tuning.
struct Stats {
  uint64_t executions = 0;       // graphs handed to an engine
  uint64_t nodes_executed = 0;   // nodes in those graphs (parameters excluded)
  uint64_t ops_recorded = 0;     // nodes recorded by the frontend
  uint64_t cap_flushes = 0;      // executions forced by the pending-stream cap
  uint64_t donated_inputs = 0;   // inputs handed to an engine as dead after the run (no tensor
                                 // holds them): their buffers may be written over in place
  int64_t live_values = 0;       // lazy values alive now (pending or evaluated)
  int64_t live_buffer_bytes = 0; // bytes of evaluated values alive now
};
Stats stats();

/// The pending-stream cap: when the calling thread has more than this many pending values,
/// the ones tensors hold are evaluated at once (as kiln::sync does), so a loop that never
/// syncs runs in bounded memory. Never while kiln::trace records. Default 4096, or
/// $KILN_MAX_PENDING. `KILN_LOG=flush` prints one line to stderr per such flush.
void set_max_pending(uint32_t nodes);
uint32_t max_pending();

}  // namespace kiln
