// examples/train_mlp.cpp - an MLP learns to separate three interleaved spirals.
//
//   build/bin/example_train_mlp [device]      (cpu by default; opencl:0, vulkan:0, interp)
//
// 2 -> 64 -> 64 -> 3 with tanh, cross-entropy, AdamW, full batch of 600 points. Each step is
// recorded (forward, backward, the update of all six parameters) and runs as one plan when
// the loss is read; after the first step every step is a plan-cache hit that compiles nothing.
// Exits 1 unless the training accuracy reaches 97% (a linear model gets about 50%).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

#include "kiln/kiln.h"

namespace {

struct Spirals {
  std::vector<float> points;    // [n, 2]
  std::vector<int64_t> labels;  // [n]
};

// Three arms of 200 points each, with a little noise (the classic cs231n data set).
Spirals make_spirals(int per_class, uint64_t seed) {
  Spirals s;
  uint64_t state = seed;
  auto noise = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) - 0.5) * 0.3;
  };
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per_class; ++i) {
      const double r = static_cast<double>(i) / per_class;
      const double t = c * 4.0 + r * 4.0 + noise();
      s.points.push_back(static_cast<float>(r * std::sin(t)));
      s.points.push_back(static_cast<float>(r * std::cos(t)));
      s.labels.push_back(c);
    }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  const Device device = Device::parse(argc > 1 ? argv[1] : "cpu");
  const Spirals data = make_spirals(200, 7);
  const int64_t n = static_cast<int64_t>(data.labels.size());
  const Tensor x = from_vector(data.points, {n, 2}, device);
  const Tensor y = from_vector(data.labels, {n}, device);

  // nn.Linear's initialization: weights [out, in] and biases from U(-1/sqrt(in), 1/sqrt(in)).
  auto linear_params = [&](int64_t in, int64_t out, uint64_t seed) {
    const double b = 1 / std::sqrt(static_cast<double>(in));
    return std::vector<Tensor>{train::kaiming_uniform({out, in}, seed, std::sqrt(5.0), DType::F32, device),
                               train::uniform({out}, -b, b, seed + 1, DType::F32, device)};
  };
  std::vector<Tensor> params;
  for (auto [in, out, seed] : {std::tuple{2, 64, 1}, {64, 64, 3}, {64, 3, 5}})
    for (Tensor& p : linear_params(in, out, static_cast<uint64_t>(seed))) params.push_back(p.eval().requires_grad_());
  auto model = [&](const Tensor& input) {
    const Tensor h1 = linear(input, params[0], params[1]).tanh();
    const Tensor h2 = linear(h1, params[2], params[3]).tanh();
    return linear(h2, params[4], params[5]);
  };

  train::AdamW opt(train::pointers(params), {.lr = 2e-2, .weight_decay = 1e-4});
  const train::CosineSchedule schedule{.warmup_steps = 10, .total_steps = 400, .min_lr = 1e-3};
  const auto start = std::chrono::steady_clock::now();
  float loss_value = 0;
  for (int64_t step = 0; step < 400; ++step) {
    opt.set_lr(schedule(step, 2e-2));
    const Tensor loss = train::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    kiln::sync();  // forward, backward and update run here, as one plan
    loss_value = loss.item<float>();
    if (step % 50 == 0) std::printf("step %3lld  loss %.4f\n", static_cast<long long>(step), loss_value);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Tensor predicted;
  {
    NoGradGuard no_grad;
    predicted = model(x).argmax(1);
  }
  const int64_t correct = (predicted == y).to(DType::I64).sum().item<int64_t>();
  const double accuracy = static_cast<double>(correct) / static_cast<double>(n);
  std::printf("final loss %.4f, training accuracy %.1f%% (%lld of %lld), 400 steps in %.2f s on %s\n", loss_value,
              100 * accuracy, static_cast<long long>(correct), static_cast<long long>(n), seconds,
              device.str().c_str());
  return accuracy >= 0.97 ? 0 : 1;
}
