// kiln/dist/data_parallel.h - data-parallel training: one model per rank, gradients averaged.
//
//   kiln::dist::init(&argc, &argv);
//   kiln::dist::DataParallel ddp(params);            // params: std::vector<kiln::Tensor*>
//   ddp.broadcast_parameters();                      // rank 0's initial values everywhere
//   kiln::dist::ShardSampler sampler(dataset_size, {.seed = 7});
//   for (int64_t step = 0; step < steps; ++step) {
//     Tensor loss = loss_of(params, sampler.batch(step, per_rank_batch));
//     loss.backward();
//     ddp.average_gradients();                       // every rank now holds the same gradients
//     opt.step();
//     opt.zero_grad();
//   }
//
// With every rank's batch the same size and a loss that is a mean over its batch, the
// averaged gradient is the gradient of the global batch, so N ranks train as one rank with
// a batch N times larger (docs/distributed.md, with the tolerance and the fixed-order option).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/dist/dist.h"
#include "kiln/frontend/tensor.h"

namespace kiln::dist {

struct DataParallelOptions {
  /// Gradients are exchanged in buckets of about this many bytes (PyTorch DDP's default, 25
  /// MiB): few enough messages that each costs its bandwidth rather than its latency.
  int64_t bucket_bytes = 25 << 20;
  /// Sums every bucket in rank order (ReduceOptions::fixed_order): the same bits as one
  /// process summing the ranks' gradients in rank order.
  bool fixed_order = false;
};

class DataParallel {
 public:
  /// Holds pointers to the caller's parameters (as an optimizer does; see
  /// kiln::train::pointers). Buckets are filled in reverse order of `params`, the order a
  /// backward produces the gradients of a model listed from input to output.
  explicit DataParallel(std::vector<Tensor*> params, DataParallelOptions options = {});

  /// Replaces every parameter with rank 0's value (a leaf requiring gradients, as before).
  /// Call once before training, so that every rank starts from the same model.
  void broadcast_parameters();

  /// Evaluates every pending gradient (one sync point: kiln::sync()) and replaces each
  /// parameter's gradient with the mean over the ranks, bucket by bucket. A parameter without
  /// a gradient on some rank counts as zeros there, and every rank gets the mean.
  void average_gradients();

  /// The parameters' indices in each bucket, in the order they are exchanged.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  std::vector<Tensor*> params_;
  DataParallelOptions options_;
  std::vector<std::vector<size_t>> buckets_;
};

struct ShardSamplerOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  /// The ranks and this rank; by default the world's (kiln::dist::size() and rank()).
  int ranks = -1;
  int rank = -1;
};

/// The indices of a data set that this rank reads, as PyTorch's DistributedSampler: each
/// epoch one permutation of [0, size) drawn from (seed, epoch), the same on every rank, of
/// which rank r takes the elements r, r + ranks, r + 2 * ranks ... (the tail that does not
/// divide by the ranks is dropped, so every rank has as many). One thread at a time: batch()
/// keeps the epoch it last drew.
class ShardSampler {
 public:
  explicit ShardSampler(int64_t dataset_size, ShardSamplerOptions options = {});
  /// This rank's indices in `epoch`, in reading order.
  std::vector<int64_t> epoch(int64_t epoch) const;
  /// This rank's `batch` indices of step `step`: steps run through the epochs in order,
  /// per_rank() / batch steps each (the rest of an epoch is skipped: a batch never spans two).
  /// Throws kiln::Error when `batch` is not in [1, per_rank()].
  std::vector<int64_t> batch(int64_t step, int64_t batch) const;
  /// Indices each rank reads per epoch.
  int64_t per_rank() const { return per_rank_; }

 private:
  int64_t size_;
  ShardSamplerOptions options_;
  int64_t per_rank_;
  // batch() reads one epoch for many steps: its indices are kept, not drawn again per step.
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

}  // namespace kiln::dist
