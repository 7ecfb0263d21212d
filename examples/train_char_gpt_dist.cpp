// examples/train_char_gpt_dist.cpp - the character-level GPT of train_char_gpt.cpp, trained
// data-parallel on several processes (kiln::dist over Open MPI).
//
//   mpirun -np 4 build/bin/example_train_char_gpt_dist [device] [steps] [text file]
//   mpirun -np 8 --host a:4,b:4 build/bin/example_train_char_gpt_dist   # two machines
//
// Every rank holds the whole model (rank 0's initial values, broadcast) and reads its own
// shard of each step's 16 windows (kiln::dist::ShardSampler): with 4 ranks, 4 windows each.
// After the backward, kiln::dist::DataParallel averages the gradients over the ranks, so
// every rank takes the same AdamW step, the one a single process takes with all 16 windows.
// Rank 0 prints the loss of the global batch (the mean of the ranks'), the held-out loss at
// the end, and whether every rank ended with the same parameters. Exits 1 unless it learned
// (the thresholds of train_char_gpt.cpp: after 500 steps a mean training loss of the last 20
// under 1.7, after 20 a held-out loss under 3.2) and the ranks agree.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "char_gpt.h"
#include "kiln/dist/data_parallel.h"
#include "kiln/dist/dist.h"

using namespace kiln;
using namespace char_gpt;

int main(int argc, char** argv) {
  dist::init(&argc, &argv);
  const int rank = dist::rank(), ranks = dist::size();
  const Device device = Device::parse(argc > 1 ? argv[1] : "cpu");
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 500;
  const Text corpus = read_text(argc > 3 ? argv[3] : "/usr/share/common-licenses/GPL-3");
  if (kBatch % ranks != 0) {
    if (rank == 0)
      std::fprintf(stderr, "the %lld windows of a step do not split into %d ranks\n",
                   static_cast<long long>(kBatch), ranks);
    dist::finalize();
    return 2;
  }
  const int64_t local_batch = kBatch / ranks;
  // Windows start anywhere in the training 90% with room for the target after them.
  const dist::ShardSampler sampler(corpus.split() - kContext - 1, {.seed = 42});
  auto windows = [&](const std::vector<int64_t>& starts) {
    std::vector<int64_t> x, y;
    for (int64_t at : starts) {
      x.insert(x.end(), corpus.ids.begin() + at, corpus.ids.begin() + at + kContext);
      y.insert(y.end(), corpus.ids.begin() + at + 1, corpus.ids.begin() + at + kContext + 1);
    }
    const int64_t n = static_cast<int64_t>(starts.size());
    return std::pair{from_vector(x, {n, kContext}, device), from_vector(y, {n, kContext}, device)};
  };
  const Tensor mask = causal_mask(device);

  Model model = make_model(corpus.vocab(), device);
  std::vector<Tensor*> params = model.parameters();
  dist::DataParallel ddp(params);
  ddp.broadcast_parameters();
  train::AdamW opt(params, {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.01});
  const train::CosineSchedule schedule{.warmup_steps = 30, .total_steps = steps, .min_lr = 3e-4};
  if (rank == 0)
    std::printf(
        "%d ranks, %lld windows each per step, %zu parameter tensors in %zu buckets, on %s\n",
        ranks, static_cast<long long>(local_batch), params.size(), ddp.buckets().size(),
        device.str().c_str());
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> losses;
  for (int64_t step = 0; step < steps; ++step) {
    opt.set_lr(schedule(step, 3e-3));
    const auto [x, y] = windows(sampler.batch(step, local_batch));
    const Tensor loss = train::cross_entropy(forward(model, x, mask), y);
    loss.backward();
    ddp.average_gradients();
    train::clip_grad_norm(params, 1.0);
    opt.step();
    opt.zero_grad();
    kiln::sync();
    losses.push_back(dist::all_reduce(loss.detach(), {.op = dist::ReduceOp::Mean}).item<float>());
    if (rank == 0 && (step % 50 == 0 || step == steps - 1))
      std::printf("step %4lld  loss %.3f  %.1f s\n", static_cast<long long>(step), losses.back(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t last = std::min<size_t>(20, losses.size());
  const double tail = mean_of_last(losses, last);

  NoGradGuard no_grad;
  // The held-out loss: 8 batches of windows in the last 10%, the same on every rank.
  uint64_t state = 7;
  double held_out = 0;
  const int64_t lo = corpus.split(),
                span = static_cast<int64_t>(corpus.ids.size()) - lo - kContext - 1;
  for (int i = 0; i < 8; ++i) {
    std::vector<int64_t> starts;
    for (int64_t k = 0; k < kBatch; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      starts.push_back(lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(span)));
    }
    const auto [x, y] = windows(starts);
    held_out += train::cross_entropy(forward(model, x, mask), y).item<float>() / 8;
  }
  // Every rank's parameters, bit for bit: the largest and smallest over the ranks agree.
  bool same = true;
  for (const Tensor* p : params) {
    const std::vector<float> hi =
        dist::all_reduce(*p, {.op = dist::ReduceOp::Max}).to_vector<float>();
    same = same && hi == dist::all_reduce(*p, {.op = dist::ReduceOp::Min}).to_vector<float>();
  }
  if (rank == 0) {
    std::printf(
        "training loss (last %zu steps) %.3f, held-out loss %.3f, %lld steps in %.1f s (%.1f ms a "
        "step)\n",
        last, tail, held_out, static_cast<long long>(steps), seconds,
        1000 * seconds / static_cast<double>(steps));
    std::printf("parameters %s on every rank\n", same ? "identical" : "DIFFER");
  }
  dist::finalize();
  return learned(steps, tail, held_out) && same ? 0 : 1;
}
