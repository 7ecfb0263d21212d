// kiln/dist/dist.h - kiln tensors across processes and machines, on Open MPI.
//
//   kiln::dist::init(&argc, &argv);                      // once, before anything else of MPI
//   kiln::Tensor total = kiln::dist::all_reduce(x);      // sum over every rank's x
//   kiln::Tensor w0 = kiln::dist::broadcast(w, 0);       // rank 0's w on every rank
//   kiln::dist::finalize();
//
// Run with `mpirun -np 4 ./program` on one machine, or `mpirun -np 8 --host a:4,b:4` across
// two (docs/distributed.md). The library is kiln::dist (libkiln_dist), apart from kiln::kiln,
// so that a program without MPI links no MPI.
//
// Every collective is a sync point, not a node of the op stream: it evaluates its operand,
// exchanges the values in host memory (in place for `cpu` tensors, through a download and an
// upload for `opencl` and `vulkan` ones) and returns an evaluated tensor on the operand's
// device. Why: MPI requires every rank to call the same collectives in the same order, and a
// collective inside a fused plan would tie that order to what the optimizer does with each
// rank's graph (and to which plans a rank found in its cache); at a sync point it is the
// program's order, which the ranks share. docs/distributed.md says what this costs.
//
// A collective that waits longer than the timeout for the other ranks (a rank stopped, hung
// or took another branch) prints which collective, how much data and how long, and ends
// every rank with MPI_Abort: an MPI collective cannot be cancelled, so nothing after it
// could run. A rank that exits without finalize() is seen by mpirun, which ends the others.
#pragma once

#include <cstdint>

#include "kiln/frontend/tensor.h"

namespace kiln::dist {

struct InitOptions {
  /// Longest wait of one collective for the other ranks, in seconds; 0 waits forever. The
  /// environment's KILN_DIST_TIMEOUT (seconds) overrides it.
  double timeout_s = 300;
};

/// Initializes MPI (MPI_Init_thread; it may take MPI's own arguments out of argc and argv).
/// Throws kiln::Error when called twice or after finalize().
void init(int* argc, char*** argv, InitOptions options = {});
/// Finalizes MPI after a barrier. Does nothing when init() was not called.
void finalize();
/// True between init() and finalize().
bool initialized();
/// This process's rank in the world (0 .. size() - 1), and the number of ranks. Both throw
/// kiln::Error before init().
int rank();
int size();
/// The wait of every collective from now on (see InitOptions::timeout_s).
void set_timeout(double seconds);

enum class ReduceOp { Sum, Mean, Max, Min };

struct ReduceOptions {
  ReduceOp op = ReduceOp::Sum;
  /// Sums in rank order on every rank ((x0 + x1) + x2 ...), the same bits whatever the number
  /// of processes per machine and MPI's choice of algorithm (the all-reduce gathers every
  /// rank's values: size() times the traffic). Otherwise MPI chooses the order, and ranks
  /// may differ in the last bits from a run with another layout.
  bool fixed_order = false;
};

/// The element-wise reduction of every rank's `t` (same shape and dtype on every rank; a
/// mismatch is an error naming both). f16 and bf16 are reduced in f32, bool with Sum and Max
/// as `or`, with Min as `and`. Mean divides a sum by size() (floats only).
Tensor all_reduce(const Tensor& t, ReduceOptions options = {});
/// `root`'s `t` on every rank (every rank passes a tensor of the same shape and dtype).
Tensor broadcast(const Tensor& t, int root = 0);
/// Every rank's `t` concatenated along dim 0, in rank order: [size() * n, ...].
Tensor all_gather(const Tensor& t);
/// The reduction of every rank's `t`, split along dim 0 into size() equal parts: rank r
/// gets part r, [n / size(), ...]. Dim 0 must divide by size().
Tensor reduce_scatter(const Tensor& t, ReduceOptions options = {});
/// Returns once every rank has called it (with the timeout of the collectives).
void barrier();

}  // namespace kiln::dist
