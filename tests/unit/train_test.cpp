// Optimizers, losses and initializers (kiln/train), and a training step as one cached plan.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/capture.h"
#include "kiln/frontend/lazy.h"
#include "kiln/runtime/profile.h"
#include "kiln/runtime/stats.h"
#include "kiln/train/loss.h"
#include "kiln/train/optim.h"

namespace kiln {
namespace {

Shape S(std::initializer_list<int64_t> d) { return Shape(std::vector<int64_t>(d)); }

// f(p) = sum(c * p^2) / 2 has gradient c * p: the optimizers' updates are checked against the
// same formulas written out in double.
const std::vector<double> kStart{1.0, -2.0, 0.5}, kCurvature{1.0, 3.0, 0.2};

Tensor quadratic_loss(const Tensor& p) { return (from_vector(kCurvature, S({3})) * p * p).sum() * 0.5; }

std::vector<double> run(train::Optimizer& opt, Tensor& p, int steps) {
  for (int s = 0; s < steps; ++s) {
    quadratic_loss(p).backward();
    opt.step();
    opt.zero_grad();
  }
  return p.to_vector<double>();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
}

TEST(Optimizers, SgdWithMomentumNesterovAndWeightDecay) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    Tensor p = from_vector(kStart, S({3})).requires_grad_();
    std::vector<Tensor*> params{&p};
    train::SGD opt(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = nesterov});
    std::vector<double> want = kStart, buf(3);
    for (int s = 0; s < 5; ++s)
      for (size_t i = 0; i < 3; ++i) {
        const double g = kCurvature[i] * want[i] + 0.01 * want[i];
        buf[i] = s == 0 ? g : 0.9 * buf[i] + g;
        want[i] -= 0.1 * (nesterov ? g + 0.9 * buf[i] : buf[i]);
      }
    expect_near(run(opt, p, 5), want);
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
  }
}

TEST(Optimizers, AdamAndAdamW) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    Tensor p = from_vector(kStart, S({3})).requires_grad_();
    std::vector<Tensor*> params{&p};
    const train::AdamOptions o{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
    std::unique_ptr<train::Optimizer> opt;
    if (decoupled) opt = std::make_unique<train::AdamW>(params, o);
    else opt = std::make_unique<train::Adam>(params, o);
    std::vector<double> want = kStart, m(3), v(3);
    for (int s = 1; s <= 6; ++s)
      for (size_t i = 0; i < 3; ++i) {
        double g = kCurvature[i] * want[i];
        if (decoupled) want[i] *= 1 - o.lr * o.weight_decay;
        else g += o.weight_decay * want[i];
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
        const double mhat = m[i] / (1 - std::pow(o.beta1, s)), vhat = v[i] / (1 - std::pow(o.beta2, s));
        want[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
      }
    expect_near(run(*opt, p, 6), want);
  }
}

TEST(Optimizers, ParametersWithoutAGradientAreLeftAlone) {
  Tensor used = from_vector<float>({1, 2}, S({2})).requires_grad_();
  Tensor unused = from_vector<float>({3, 4}, S({2})).requires_grad_();
  train::SGD opt({&used, &unused}, {.lr = 0.5});
  used.sum().backward();
  opt.step();
  EXPECT_EQ(used.to_vector<float>(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(unused.to_vector<float>(), (std::vector<float>{3, 4}));
  Tensor not_leaf = used * 2.0f;
  EXPECT_THROW(train::SGD({&not_leaf}), Error);
  EXPECT_THROW(train::SGD({&used}, {.lr = -1}), Error);
}

TEST(Optimizers, ClipGradNormScalesEveryGradientTogether) {
  Tensor a = from_vector<float>({1, 1}, S({2})).requires_grad_();
  Tensor b = from_vector<float>({1}, S({1})).requires_grad_();
  ((a * from_vector<float>({3, 0}, S({2}))).sum() + b * 4.0f).sum().backward();  // grads (3, 0) and (4): norm 5
  const Tensor norm = train::clip_grad_norm({&a, &b}, 1.0);
  EXPECT_NEAR(norm.item<float>(), 5.0f, 1e-6);
  EXPECT_NEAR(a.grad().to_vector<float>()[0], 0.6f, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[0], 0.8f, 1e-6);
  // Below the limit nothing changes.
  train::clip_grad_norm({&a, &b}, 10.0);
  EXPECT_NEAR(a.grad().to_vector<float>()[0], 0.6f, 1e-6);
}

TEST(Optimizers, SchedulesGiveTheRateOfEachStep) {
  const train::CosineSchedule cosine{.warmup_steps = 4, .total_steps = 14, .min_lr = 0.1};
  EXPECT_DOUBLE_EQ(cosine(0, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(cosine(3, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(cosine(4, 1.0), 1.0);
  EXPECT_NEAR(cosine(9, 1.0), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(cosine(20, 1.0), 0.1);
  const train::StepSchedule steps{.step_size = 3, .gamma = 0.5};
  EXPECT_DOUBLE_EQ(steps(2, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(steps(3, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(steps(7, 1.0), 0.25);
}

TEST(Losses, CrossEntropyIgnoresAndMeansAsPyTorch) {
  const Tensor logits = from_vector<float>({1, 2, 3, 0, 0, 0, 5, 1, -1}, S({3, 3})).requires_grad_();
  const Tensor targets = from_vector<int64_t>({2, -100, 0}, S({3}));
  auto lse = [](std::vector<double> r) {
    double s = 0;
    for (double v : r) s += std::exp(v);
    return std::log(s);
  };
  const double l0 = lse({1, 2, 3}) - 3, l2 = lse({5, 1, -1}) - 5;
  EXPECT_NEAR(train::cross_entropy(logits, targets).item<float>(), (l0 + l2) / 2, 1e-6);
  EXPECT_NEAR(train::cross_entropy(logits, targets, train::Reduction::Sum).item<float>(), l0 + l2, 1e-6);
  const std::vector<float> each = train::cross_entropy(logits, targets, train::Reduction::None).to_vector<float>();
  EXPECT_NEAR(each[0], l0, 1e-6);
  EXPECT_EQ(each[1], 0.0f);
  // The gradient of the mean: (softmax - onehot) / 2 on the rows counted, 0 on the ignored.
  const std::vector<float> g = grad(train::cross_entropy(logits, targets), {logits})[0].to_vector<float>();
  EXPECT_NEAR(g[2], (std::exp(3 - lse({1, 2, 3})) - 1) / 2, 1e-6);
  EXPECT_EQ(g[4], 0.0f);
  // A label outside the classes poisons the loss instead of reading a neighbour.
  EXPECT_TRUE(std::isnan(train::cross_entropy(logits, from_vector<int64_t>({2, 3, 0}, S({3}))).item<float>()));
  EXPECT_THROW(train::cross_entropy(logits, from_vector<float>({0, 0, 0}, S({3}))), Error);
  EXPECT_THROW(train::cross_entropy(logits, from_vector<int64_t>({0, 0}, S({2}))), Error);
}

TEST(Losses, MseAndInitializers) {
  const Tensor a = from_vector<float>({1, 2, 3}, S({3}));
  EXPECT_NEAR(train::mse_loss(a, from_vector<float>({1, 0, 0}, S({3}))).item<float>(), 13.0f / 3, 1e-6);
  EXPECT_THROW(train::mse_loss(a, from_vector<float>({1, 0}, S({2}))), Error);
  // U(-b, b) with b = sqrt(6 / ((1 + 5) * 100)) = 0.1 for a [50, 100] weight.
  const std::vector<float> w = train::kaiming_uniform(S({50, 100}), 3).to_vector<float>();
  double lo = 1, hi = -1, mean = 0;
  for (float v : w) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    mean += v / static_cast<double>(w.size());
  }
  EXPECT_GE(lo, -0.1);
  EXPECT_LE(hi, 0.1);
  EXPECT_LT(lo, -0.09);
  EXPECT_GT(hi, 0.09);
  EXPECT_NEAR(mean, 0, 0.005);
  EXPECT_THROW(train::xavier_uniform(S({5}), 1), Error);
}

// The whole step (forward, backward, clipping, AdamW's update with a new learning rate every
// step) is recorded and runs as one graph: after the first, each is one plan-cache hit and
// compiles nothing.
TEST(Training, AStepIsOneCachedPlan) {
  std::vector<Tensor> params{train::kaiming_uniform(S({16, 8}), 1).eval().requires_grad_(),
                             zeros(S({16})).eval().requires_grad_(),
                             train::kaiming_uniform(S({4, 16}), 2).eval().requires_grad_()};
  const Tensor x = randn(S({32, 8}), 5).eval();
  const Tensor y = (rand(S({32}), 6) * 4).to(DType::I64).eval();
  train::AdamW opt(train::pointers(params));
  auto step = [&](int s) {
    opt.set_lr(1e-3 * (1 + s));
    const Tensor loss = train::cross_entropy(linear(linear(x, params[0], params[1]).relu(), params[2]), y);
    loss.backward();
    train::clip_grad_norm(opt.params(), 1.0);
    opt.step();
    opt.zero_grad();
    sync();
    return loss.item<float>();
  };
  const float first = step(0);
  step(1);  // the first step differs from the rest: Adam's state is new
  RuntimeCounters& c = runtime_counters();
  const uint64_t executions = stats().executions, misses = c.plan_misses.load(), hits = c.plan_hits.load();
  const uint64_t compiled = c.kernels_compiled.load();
  float last = 0;
  for (int s = 2; s < 12; ++s) last = step(s);
  EXPECT_EQ(stats().executions - executions, 10u);
  EXPECT_EQ(c.plan_hits.load() - hits, 10u);
  EXPECT_EQ(c.plan_misses.load(), misses);
  EXPECT_EQ(c.kernels_compiled.load(), compiled);
  EXPECT_LT(last, first);
}

// Two linear layers with a ReLU between them, on a fixed batch, and their cross-entropy.
struct TwoLayers {
  explicit TwoLayers(Device d = Device::cpu()) : device(d) {}
  Device device;
  Tensor on_device(const Tensor& t) const { return t.to(device).eval(); }
  std::vector<Tensor> params{on_device(train::kaiming_uniform(S({64, 32}), 1)).requires_grad_(),
                             on_device(zeros(S({64}))).requires_grad_(),
                             on_device(train::kaiming_uniform(S({16, 64}), 2)).requires_grad_(),
                             on_device(zeros(S({16}))).requires_grad_()};
  Tensor x = on_device(randn(S({128, 32}), 5));
  Tensor y = on_device((rand(S({128}), 6) * 16).to(DType::I64));
  Tensor loss() const { return train::cross_entropy(linear(linear(x, params[0], params[1]).relu(), params[2], params[3]), y); }
};

// The launches of a third call of `step`, and the profile of it alone where one is kept
// (Adam's first step creates its state, so the first two differ).
uint64_t launches_of(const std::function<void()>& step) {
  for (int warm = 0; warm < 2; ++warm) step();
  profile::reset();
  const uint64_t before = runtime_counters().launches.load();
  step();
  return runtime_counters().launches.load() - before;
}

// Without clipping, AdamW's update of every parameter runs inside the kernel that computes
// its gradient: the GEMM of a weight (as its epilogue) and the row sum of a bias. A step
// with the update launches exactly as many kernels on cpu as computing the gradients alone.
TEST(Training, TheUpdateRunsInTheKernelsThatComputeTheGradients) {
  TwoLayers net;
  std::vector<Tensor>& params = net.params;
  auto loss = [&] { return net.loss(); };
  const uint64_t gradients_only = launches_of([&] {
    std::vector<Tensor> g = grad(loss(), params);
    sync();
  });
  train::AdamW opt(train::pointers(params));
  const uint64_t with_update = launches_of([&] {
    loss().backward();
    opt.step();
    opt.zero_grad();
    sync();
  });
  EXPECT_GT(gradients_only, 0u);
  EXPECT_EQ(with_update, gradients_only);
}

// An optimizer's step reads one launch slot per bound scalar (AdamW: the decay, the step
// size, the root of the second bias correction) for all its parameters, not one per
// parameter: kernels that join the updates (after clipping) then take each once. Inside a
// captured step, where each bound scalar is read again at every replay (outside one, equal
// numbers share a slot anyway).
TEST(Optimizers, AStepRecordsEachBoundScalarOnceForAllParameters) {
  TwoLayers net;
  train::AdamW opt(train::pointers(net.params));
  std::string ir;
  CapturedFunction step = capture([&](const std::vector<Tensor>&) {
    net.loss().backward();
    opt.step();
    opt.zero_grad();
    Tensor all = net.params[0].sum();
    for (size_t i = 1; i < net.params.size(); ++i) all = all + net.params[i].sum();
    ir = dump(all);
    return std::vector<Tensor>{all};
  });
  step({net.x});
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = ir.find(text); at != std::string::npos; at = ir.find(text, at + 1)) ++n;
    return n;
  };
  // lr = 1e-3, weight decay 1e-2, betas 0.9 and 0.999, first step: the decay 1 - lr * wd, the
  // step size lr / (1 - 0.9) and the root of 1 - 0.999, each once for the four parameters.
  EXPECT_EQ(count("value = 0.99999}"), 1u) << ir;
  EXPECT_EQ(count("value = 0.031622775}"), 1u) << ir;
}

// The kernels of the profiled launches that are horizontal kernels (merge_horizontal names
// them `k18_h4`).
std::vector<std::string> horizontal_launches() {
  std::vector<std::string> merged;
  for (const profile::Launch& l : profile::launches())
    if (l.kernel.find("_h") != std::string::npos) merged.push_back(l.kernel);
  return merged;
}

// After clip_grad_norm, the updates need the norm of every gradient first, so none runs in
// the kernel that computes its gradient. On the cpu the updates of all four parameters (one
// body over four shapes, none reading what another writes) are then one launch
// (merge_horizontal), not four, and the step launches one kernel more than the gradients
// and their norm alone.
TEST(Training, ClippedUpdatesOfAGroupAreOneLaunch) {
  TwoLayers net;
  std::vector<Tensor>& params = net.params;
  auto loss = [&] { return net.loss(); };
  profile::enable("");
  const uint64_t gradients_and_norm = launches_of([&] {
    std::vector<Tensor> g = grad(loss(), params);
    Tensor total;
    for (const Tensor& gi : g) total = total.defined() ? total + (gi * gi).sum() : (gi * gi).sum();
    const Tensor scale = (1.0 / (total.sqrt() + 1e-6)).minimum(ones({}, DType::F32));
    sync();
  });
  train::AdamW opt(train::pointers(params));
  const uint64_t step = launches_of([&] {
    loss().backward();
    train::clip_grad_norm(opt.params(), 1.0);
    opt.step();
    opt.zero_grad();
    sync();
  });
  const std::vector<std::string> merged = horizontal_launches();
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_TRUE(merged[0].ends_with("_h4")) << merged[0];
  EXPECT_EQ(step, gradients_and_norm + 1);
}

// The same group on every device: one launch for the four updates after clipping (the
// C-family emitter puts each part in a branch of its own), and the parameters those launches
// leave as the interpreter's, step after step.
TEST(Training, ClippedUpdatesOfAGroupAreOneLaunchOnEveryDevice) {
  constexpr int kSteps = 3;
  // The parameters after kSteps steps, and the horizontal kernels the last step launched.
  auto train_steps = [](Device device) {
    TwoLayers net(device);
    train::AdamW opt(train::pointers(net.params), {.lr = 0.01});
    for (int s = 0; s < kSteps; ++s) {
      if (s == kSteps - 1) profile::reset();  // the first step differs: it creates Adam's state
      net.loss().backward();
      train::clip_grad_norm(opt.params(), 0.5);
      opt.step();
      opt.zero_grad();
      sync();
    }
    std::vector<std::string> merged = horizontal_launches();
    std::vector<std::vector<float>> params;
    for (const Tensor& p : net.params) params.push_back(p.to_vector<float>());
    return std::pair{params, merged};
  };
  const auto want = train_steps(Device::interp()).first;
  for (const Device device : {Device::cpu(), Device::opencl(0), Device::vulkan(0)}) {
    SCOPED_TRACE(device.str());
    profile::set_peak(device.str(), {1, 1});  // not measured: the test reads the launches only
    profile::enable("");
    const auto [got, merged] = train_steps(device);
    EXPECT_EQ(merged.size(), 1u) << "one launch updates the group";
    for (const std::string& k : merged) EXPECT_TRUE(k.ends_with("_h4")) << k;
    ASSERT_EQ(got.size(), want.size());
    for (size_t p = 0; p < want.size(); ++p) {
      ASSERT_EQ(got[p].size(), want[p].size());
      for (size_t i = 0; i < want[p].size(); ++i)
        ASSERT_NEAR(got[p][i], want[p][i], 1e-5f * (1 + std::abs(want[p][i]))) << "parameter " << p << " element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
