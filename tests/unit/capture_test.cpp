// kiln::capture: a function recorded once and replayed (kiln/frontend/capture.h).
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kiln/engine/engine.h"
#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/capture.h"
#include "kiln/frontend/lazy.h"
#include "kiln/runtime/stats.h"
#include "kiln/train/loss.h"
#include "kiln/train/optim.h"

namespace kiln {
namespace {

Shape S(std::initializer_list<int64_t> d) { return Shape(std::vector<int64_t>(d)); }

Tensor example(const Tensor& x, const Tensor& y) { return (x * 2.0f + y).tanh().sum(Axes{0}); }

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-6f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

// The same function through a capture and eagerly, on every device, with new inputs each
// call: after the first call nothing is recorded, looked up or compiled.
TEST(Capture, ReplaysNewInputsOnEveryDevice) {
  for (Device d : registered_devices()) {
    SCOPED_TRACE(d.str());
    CapturedFunction f = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{example(in[0], in[1])}; });
    RuntimeCounters& c = runtime_counters();
    for (int call = 0; call < 4; ++call) {
      const Tensor x = randn(S({5, 7}), 10 + call).to(d).eval(), y = randn(S({7}), 20 + call).to(d).eval();
      const uint64_t recorded = stats().ops_recorded, hits = c.plan_hits.load(), misses = c.plan_misses.load();
      const uint64_t compiled = c.kernels_compiled.load();
      const std::vector<Tensor> out = f({x, y});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(out[0].is_evaluated());
      if (call > 0) {
        EXPECT_EQ(stats().ops_recorded, recorded);
        EXPECT_EQ(c.plan_hits.load(), hits);
        EXPECT_EQ(c.plan_misses.load(), misses);
        EXPECT_EQ(c.kernels_compiled.load(), compiled);
      }
      expect_near(out[0].to_vector<float>(), example(x, y).to_vector<float>());
    }
    EXPECT_EQ(f.counts().captures, 1u);
    EXPECT_EQ(f.counts().replays, 3u);
  }
}

TEST(Capture, ANewShapeOrTypeCapturesAgainAndSaysWhy) {
  CapturedFunction f = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{example(in[0], in[1])}; });
  const Tensor x = randn(S({5, 7}), 1), y = randn(S({7}), 2);
  f({x, y});
  f({x, y});
  EXPECT_EQ(f.last_recapture_reason(), "");
  const Tensor x2 = randn(S({3, 7}), 3);
  expect_near(f({x2, y})[0].to_vector<float>(), example(x2, y).to_vector<float>());
  EXPECT_EQ(f.counts().captures, 2u);
  EXPECT_NE(f.last_recapture_reason().find("input 0 is f32[3,7]"), std::string::npos) << f.last_recapture_reason();
  f({x2.to(DType::F64), y.to(DType::F64)});
  EXPECT_EQ(f.counts().captures, 3u);
}

// Tensors that existed before the call and that the function assigns are its state: each
// replay computes their new values from their current ones.
TEST(Capture, StateIsCarriedFromReplayToReplay) {
  Tensor total = zeros(S({3})).eval();
  Tensor calls = zeros(S({}), DType::I64).eval();
  CapturedFunction accumulate = capture([&](const std::vector<Tensor>& in) {
    total = total + in[0];
    calls = calls + 1;
    return std::vector<Tensor>{total * 2.0f};
  });
  std::vector<float> want(3, 0);
  for (int call = 0; call < 5; ++call) {
    const std::vector<float> x{float(call), 1, -float(call)};
    for (size_t i = 0; i < 3; ++i) want[i] += x[i];
    const std::vector<Tensor> out = accumulate({from_vector(x, S({3}))});
    expect_near(total.to_vector<float>(), want);
    expect_near(out[0].to_vector<float>(), {2 * want[0], 2 * want[1], 2 * want[2]});
  }
  EXPECT_EQ(calls.item<int64_t>(), 5);
  EXPECT_EQ(accumulate.counts().replays, 4u);
  // Changed from outside between calls, the state is read as it is now.
  total = ones(S({3}));
  accumulate({zeros(S({3}))});
  expect_near(total.to_vector<float>(), {1, 1, 1});
  EXPECT_EQ(accumulate.counts().captures, 1u);
}

// Numbers the function reads through bound_scalar, and the hooks it registers, run at every
// replay: a learning rate that changes, a counter kept on the host.
TEST(Capture, BoundScalarsAndHooksRunAtEveryReplay) {
  double k = 1.5;
  int host_calls = 0;
  CapturedFunction scale = capture([&](const std::vector<Tensor>& in) {
    ++host_calls;
    on_replay([&] { ++host_calls; });
    return std::vector<Tensor>{in[0] * bound_scalar([&] { return k * host_calls; }, in[0]) + 0.5f};
  });
  const Tensor x = from_vector<float>({1, 2}, S({2}));
  for (int call = 1; call <= 4; ++call) {
    k = 0.25 * call;
    const float s = static_cast<float>(k * call);
    expect_near(scale({x})[0].to_vector<float>(), {s + 0.5f, 2 * s + 0.5f});
  }
  EXPECT_EQ(host_calls, 4);
  EXPECT_EQ(scale.counts().captures, 1u);
  // Outside a capture, bound_scalar is the number it reads now and on_replay does nothing.
  on_replay([&] { ++host_calls; });
  expect_near((x * bound_scalar([] { return 3.0; }, x)).to_vector<float>(), {3, 6});
  EXPECT_EQ(host_calls, 4);
}

// A value read from outside and not assigned is a constant of the capture; when its tensor
// is replaced (nothing but the capture holds it any more), the next call captures again.
TEST(Capture, AReplacedConstantCapturesAgain) {
  Tensor w = from_vector<float>({1, 2, 3}, S({3})).eval();
  CapturedFunction f = capture([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w}; });
  const Tensor x = ones(S({3})).eval();
  expect_near(f({x})[0].to_vector<float>(), {1, 2, 3});
  expect_near(f({x})[0].to_vector<float>(), {1, 2, 3});
  w = from_vector<float>({4, 5, 6}, S({3})).eval();
  expect_near(f({x})[0].to_vector<float>(), {4, 5, 6});
  EXPECT_EQ(f.counts().captures, 2u);
  EXPECT_NE(f.last_recapture_reason().find("replaced"), std::string::npos) << f.last_recapture_reason();
}

// What a replay could not redo is an error at capture, and the function's state is left as
// it was before the call.
TEST(Capture, HostReadsAndValuesLeftOutsideAreErrors) {
  Tensor state = from_vector<float>({1, 2}, S({2})).eval();
  CapturedFunction reads = capture([&](const std::vector<Tensor>& in) {
    state = state + in[0];
    (void)state.sum().item<float>();
    return std::vector<Tensor>{state};
  });
  const Tensor x = ones(S({2})).eval();
  try {
    reads({x});
    FAIL() << "a host read inside a captured function";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replay does not run the function"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(state.is_evaluated());
  expect_near(state.to_vector<float>(), {1, 2});

  std::vector<Tensor> kept;
  CapturedFunction leaks = capture([&](const std::vector<Tensor>& in) {
    kept.push_back(in[0] * 2.0f);
    return std::vector<Tensor>{in[0] + 1.0f};
  });
  EXPECT_THROW(leaks({x}), Error);
  kept.clear();

  Tensor p = ones(S({2})).eval().requires_grad_();
  CapturedFunction leaves_grad = capture([&](const std::vector<Tensor>& in) {
    const Tensor loss = (p * in[0]).sum();
    loss.backward();
    return std::vector<Tensor>{loss};
  });
  EXPECT_THROW(leaves_grad({x}), Error);
  EXPECT_THROW(capture([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; })({x}), Error);
}

// A whole training step (forward, backward, clipping, AdamW with a learning-rate schedule)
// captured and replayed gives the parameters the same step taken eagerly gives.
TEST(Capture, ATrainingStepReplaysAsTheEagerStepRuns) {
  auto init = [] {
    return std::vector<Tensor>{train::kaiming_uniform(S({16, 8}), 1).eval().requires_grad_(),
                               zeros(S({16})).eval().requires_grad_(),
                               train::kaiming_uniform(S({4, 16}), 2).eval().requires_grad_(),
                               ones(S({8})).eval().requires_grad_(),
                               zeros(S({8})).eval().requires_grad_(),
                               train::kaiming_uniform(S({8, 16}), 3).eval().requires_grad_()};
  };
  const Tensor x = randn(S({32, 8}), 5).eval();
  const Tensor y = (rand(S({32}), 6) * 4).to(DType::I64).eval();
  const train::CosineSchedule schedule{.warmup_steps = 3, .total_steps = 12, .min_lr = 1e-4};
  // A residual block: the tape saves parameters (evaluated) in nodes that outlive the call
  // through the values they made, as a transformer's does.
  auto loss_of = [](const std::vector<Tensor>& p, const Tensor& in, const Tensor& labels) {
    const Tensor h = linear(layer_norm(in, p[3], p[4], 1e-5), p[0], p[1]).gelu();
    return train::cross_entropy(linear((in + linear(h, p[5])).tanh(), p[0]).relu().matmul(p[2].transpose(0, 1)), labels);
  };
  auto step_of = [&](std::vector<Tensor>& p, train::Optimizer& opt) {
    return [&](const std::vector<Tensor>& in) {
      const Tensor loss = loss_of(p, in[0], in[1]);
      loss.backward();
      train::clip_grad_norm(opt.params(), 1.0);
      opt.step();
      opt.zero_grad();
      return std::vector<Tensor>{loss};
    };
  };
  std::vector<Tensor> eager = init(), replayed = init();
  train::AdamW eager_opt(train::pointers(eager)), replayed_opt(train::pointers(replayed));
  auto eager_step = step_of(eager, eager_opt);
  CapturedFunction step = capture(step_of(replayed, replayed_opt));
  RuntimeCounters& c = runtime_counters();
  for (int s = 0; s < 12; ++s) {
    eager_opt.set_lr(schedule(s, 1e-2));
    replayed_opt.set_lr(schedule(s, 1e-2));
    const float want = eager_step({x, y})[0].item<float>();
    const uint64_t recorded_before = stats().ops_recorded;
    const uint64_t compiled_before = c.kernels_compiled.load(), misses_before = c.plan_misses.load();
    const float got = step({x, y})[0].item<float>();
    if (s >= 2) {
      EXPECT_EQ(stats().ops_recorded, recorded_before) << "step " << s;
      EXPECT_EQ(c.kernels_compiled.load(), compiled_before) << "step " << s;
      EXPECT_EQ(c.plan_misses.load(), misses_before) << "step " << s;
    }
    EXPECT_NEAR(got, want, 1e-5f * (1 + std::abs(want))) << "step " << s;
  }
  for (size_t i = 0; i < eager.size(); ++i) {
    expect_near(replayed[i].to_vector<float>(), eager[i].to_vector<float>(), 1e-5f);
    EXPECT_TRUE(replayed[i].is_leaf());
    EXPECT_TRUE(replayed[i].requires_grad());
  }
  EXPECT_EQ(replayed_opt.steps(), 12);
  // The first step differs from the rest (Adam's moments are new): two captures.
  EXPECT_EQ(step.counts().captures, 2u);
  EXPECT_EQ(step.counts().replays, 10u);
}

TEST(Capture, ThreadsReplayOneCaptureAtOnce) {
  CapturedFunction f = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{example(in[0], in[1])}; });
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const Tensor x = randn(S({5, 7}), 100 * t + i).eval(), y = randn(S({7}), 7).eval();
        const std::vector<float> got = f({x, y})[0].to_vector<float>(), want = example(x, y).to_vector<float>();
        for (size_t j = 0; j < got.size(); ++j)
          if (std::abs(got[j] - want[j]) > 1e-5f) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.counts().captures + f.counts().replays, 80u);
  EXPECT_LE(f.counts().captures, 4u);
}

}  // namespace
}  // namespace kiln
