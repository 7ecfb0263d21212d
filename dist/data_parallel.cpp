// dist/data_parallel.cpp - parameters broadcast, gradients averaged in buckets, and the
// sampler that shards a data set by rank.
#include "kiln/dist/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "communicator.h"
#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/lazy.h"
#include "kiln/support/error.h"

namespace kiln::dist {

DataParallel::DataParallel(std::vector<Tensor*> params, DataParallelOptions options)
    : params_(std::move(params)), options_(options) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i] == nullptr || !params_[i]->defined())
      throw Error(fmt::format("kiln::dist::DataParallel: parameter {} is undefined", i));
  // Reverse order (the backward's), one dtype per bucket, a new bucket past the size.
  std::vector<size_t> current;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = *params_[k];
    const int64_t b = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    const bool other_dtype = !current.empty() && params_[current.front()]->dtype() != p.dtype();
    if (!current.empty() && (other_dtype || bytes + b > options_.bucket_bytes)) {
      buckets_.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
    current.push_back(k);
    bytes += b;
  }
  if (!current.empty()) buckets_.push_back(std::move(current));
}

void DataParallel::broadcast_parameters() {
  detail::require_initialized("DataParallel::broadcast_parameters");
  NoGradGuard no_grad;
  for (Tensor* p : params_) {
    const bool leaf = p->requires_grad();
    Tensor value = broadcast(p->detach(), 0);
    if (leaf) value.requires_grad_();
    *p = value;
  }
}

void DataParallel::average_gradients() {
  detail::require_initialized("DataParallel::average_gradients");
  // Every gradient in one plan first: a bucket evaluated alone would run the part of the
  // backward (and of the forward) that it needs, and the next bucket that part again.
  kiln::sync();
  NoGradGuard no_grad;
  const ReduceOptions mean{.op = ReduceOp::Mean, .fixed_order = options_.fixed_order};
  for (const std::vector<size_t>& bucket : buckets_) {
    std::vector<Tensor> flat;
    for (size_t k : bucket) {
      const Tensor& p = *params_[k];
      const Tensor g = p.grad();
      flat.push_back(g.defined() ? g.reshape({p.numel()})
                                 : zeros({p.numel()}, p.dtype(), p.device()));
    }
    // One exchange per bucket; the gradients become views of its result, which the
    // optimizer's update reads in its own fused kernel.
    const Tensor averaged = all_reduce(flat.size() == 1 ? flat[0] : cat(flat, 0), mean);
    int64_t at = 0;
    for (size_t k : bucket) {
      const Tensor& p = *params_[k];
      const std::vector<int64_t> dims(p.shape().dims().begin(), p.shape().dims().end());
      p.set_grad(averaged.slice(0, at, at + p.numel()).reshape(dims));
      at += p.numel();
    }
  }
}

ShardSampler::ShardSampler(int64_t dataset_size, ShardSamplerOptions options)
    : size_(dataset_size), options_(options) {
  if (options_.ranks < 0) options_.ranks = size();
  if (options_.rank < 0) options_.rank = rank();
  if (options_.ranks < 1 || options_.rank >= options_.ranks)
    throw Error(fmt::format("kiln::dist::ShardSampler: rank {} of {} ranks", options_.rank,
                            options_.ranks));
  if (dataset_size < 0)
    throw Error(fmt::format("kiln::dist::ShardSampler: a data set of {} elements", dataset_size));
  per_rank_ = dataset_size / options_.ranks;
}

std::vector<int64_t> ShardSampler::epoch(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    // A Fisher-Yates shuffle driven by the 64-bit Mersenne Twister, whose output the C++
    // standard fixes: the same permutation on every rank, compiler and machine
    // (std::shuffle's use of its engine is left to the library).
    std::mt19937_64 engine(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[engine() % i]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (int64_t i = 0; i < per_rank_; ++i)
    mine.push_back(order[static_cast<size_t>(i * options_.ranks + options_.rank)]);
  return mine;
}

std::vector<int64_t> ShardSampler::batch(int64_t step, int64_t batch) const {
  if (batch < 1 || batch > per_rank_)
    throw Error(fmt::format(
        "kiln::dist::ShardSampler::batch: a batch of {} from {} indices per rank and epoch", batch,
        per_rank_));
  const int64_t steps_per_epoch = per_rank_ / batch;
  if (step / steps_per_epoch != cached_epoch_) {
    cached_epoch_ = step / steps_per_epoch;
    cached_ = epoch(cached_epoch_);
  }
  const int64_t first = (step % steps_per_epoch) * batch;
  return {cached_.begin() + first, cached_.begin() + first + batch};
}

}  // namespace kiln::dist
