// benchmarks/train_bench.cpp - one AdamW step of a GPT-2-small block (issue 41, item 7).
//
//   build-release/bin/kiln_train_bench [--device cpu] [--steps 20] [--batch 4] [--tokens 128]
//                                      [--dump DIR] [--capture]
//
// The block is GPT-2's (pre-norm, 12 heads, width 768, GELU with tanh, a causal mask), its
// linear layers in nn.Linear's layout (weight [out, in]); the loss is mean(block(x)^2). A
// step records the forward, the backward and AdamW's update of the 12 parameters, and runs
// them as one plan (kiln::sync). Prints the median step time over --steps steps after two
// warm-up steps (the first compiles; the second is the first with Adam's state), the
// process's peak resident memory and a step's peak device memory (DeviceMemoryGauge). With --dump DIR it also writes the parameters, the input
// and the gradients of the first step's loss as .npy files, which
// benchmarks/train_peers.py --check compares with torch's gradients. With --capture the step
// is a kiln::capture, replayed from the third step on (docs/capture.md).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/ir/npy.h"
#include "kiln/runtime/stats.h"

namespace {

using namespace kiln;

constexpr int64_t kWidth = 768, kHeads = 12;

struct Block {
  // ln1 w/b, qkv w/b, proj w/b, ln2 w/b, fc w/b, out w/b.
  std::vector<Tensor> p;
  static constexpr const char* kNames[] = {"ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
                                           "ln2_w", "ln2_b", "fc_w",  "fc_b",  "out_w",  "out_b"};
};

Block make_block(Device device) {
  uint64_t seed = 11;
  auto normal = [&](Shape s) { return train::normal(std::move(s), 0, 0.02, seed++, DType::F32, device).eval().requires_grad_(); };
  auto small = [&](int64_t n) { return train::normal({n}, 0, 0.02, seed++, DType::F32, device).eval().requires_grad_(); };
  auto near_one = [&](int64_t n) { return (train::normal({n}, 1, 0.02, seed++, DType::F32, device)).eval().requires_grad_(); };
  return {{near_one(kWidth), small(kWidth), normal({3 * kWidth, kWidth}), small(3 * kWidth), normal({kWidth, kWidth}),
           small(kWidth), near_one(kWidth), small(kWidth), normal({4 * kWidth, kWidth}), small(4 * kWidth),
           normal({kWidth, 4 * kWidth}), small(kWidth)}};
}

Tensor block(const std::vector<Tensor>& p, const Tensor& x, const Tensor& mask) {
  const int64_t b = x.size(0), t = x.size(1), head = kWidth / kHeads;
  const Tensor qkv = linear(layer_norm(x, p[0], p[1]), p[2], p[3]);
  auto heads = [&](int64_t i) {
    return qkv.slice(-1, i * kWidth, (i + 1) * kWidth).reshape({b, t, kHeads, head}).permute({0, 2, 1, 3});
  };
  const Tensor y =
      scaled_dot_product_attention(heads(0), heads(1), heads(2), mask).permute({0, 2, 1, 3}).reshape({b, t, kWidth});
  const Tensor h = x + linear(y, p[4], p[5]);
  return h + linear(linear(layer_norm(h, p[6], p[7]), p[8], p[9]).gelu(GeluApproximation::Tanh), p[10], p[11]);
}

}  // namespace

int main(int argc, char** argv) {
  Device device;
  int steps = 20;
  int64_t batch = 4, tokens = 128;
  std::string dump;
  bool captured = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") device = Device::parse(value());
    else if (a == "--steps") steps = std::stoi(value());
    else if (a == "--batch") batch = std::stoll(value());
    else if (a == "--tokens") tokens = std::stoll(value());
    else if (a == "--dump") dump = value();
    else if (a == "--capture") captured = true;
    else {
      std::fprintf(stderr, "usage: kiln_train_bench [--device D] [--steps N] [--batch B] [--tokens T] [--dump DIR] [--capture]\n");
      return 2;
    }
  }
  Block blk = make_block(device);
  const Tensor x = train::normal({batch, tokens, kWidth}, 0, 1, 99, DType::F32, device).eval();
  std::vector<float> mask_values(static_cast<size_t>(tokens * tokens), 0.0f);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = i + 1; j < tokens; ++j) mask_values[static_cast<size_t>(i * tokens + j)] = -INFINITY;
  const Tensor mask = from_vector(mask_values, {tokens, tokens}, device);

  if (!dump.empty()) {
    std::filesystem::create_directories(dump);
    const Tensor loss = (block(blk.p, x, mask).pow(2)).mean();
    const std::vector<Tensor> grads = grad(loss, blk.p);
    write_npy(dump + "/x.npy", x.host());
    write_npy(dump + "/loss.npy", loss.host());
    for (size_t i = 0; i < blk.p.size(); ++i) {
      write_npy(dump + "/" + Block::kNames[i] + ".npy", blk.p[i].host());
      write_npy(dump + "/grad_" + Block::kNames[i] + ".npy", grads[i].host());
    }
    std::printf("dumped parameters, input and gradients to %s\n", dump.c_str());
  }

  train::AdamW opt(train::pointers(blk.p), {.lr = 1e-4, .weight_decay = 0.01});
  std::vector<double> times;
  float loss_value = 0;
  int64_t step_peak = 0;  // device memory at most at once during a step
  auto step = [&](const std::vector<Tensor>& in) {
    const Tensor loss = (block(blk.p, in[0], mask).pow(2)).mean();
    loss.backward();
    opt.step();
    opt.zero_grad();
    return std::vector<Tensor>{loss};
  };
  const CapturedFunction captured_step = capture(step);
  for (int s = 0; s < steps + 2; ++s) {
    device_memory_gauge().reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss;
    if (captured) {
      loss = captured_step({x})[0];
    } else {
      loss = step({x})[0];
      kiln::sync();
    }
    synchronize(device);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 2) times.push_back(ms);
    step_peak = std::max(step_peak, device_memory_gauge().peak.load());
    loss_value = loss.item<float>();
  }
  std::sort(times.begin(), times.end());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  if (captured && captured_step.counts().replays != static_cast<uint64_t>(steps))
    std::fprintf(stderr, "kiln_train_bench: %llu of the %d timed steps replayed\n",
                 static_cast<unsigned long long>(captured_step.counts().replays), steps);
  std::printf("kiln %s%s: GPT-2 block AdamW step (batch %lld, %lld tokens): median %.2f ms (min %.2f, max %.2f) over %d "
              "steps; loss %.5f; peak RSS %.0f MiB; a step's peak device memory %.0f MiB\n",
              device.str().c_str(), captured ? " (captured)" : "", static_cast<long long>(batch), static_cast<long long>(tokens),
              times[times.size() / 2], times.front(), times.back(), steps, loss_value,
              static_cast<double>(usage.ru_maxrss) / 1024, static_cast<double>(step_peak) / (1 << 20));
  return 0;
}
