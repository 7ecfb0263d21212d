// Kernels compiled once for every number of rows (kir::rows_at_launch, and the engine's
// choice of them: engine/row_classes.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kiln/codegen/rows_at_launch.h"
#include "kiln/engine/engine.h"
#include "kiln/frontend/lazy.h"
#include "kiln/runtime/stats.h"
#include "test_util.h"

namespace kiln {
namespace {

Shape S(std::initializer_list<int64_t> d) { return Shape(std::vector<int64_t>(d)); }

// A layer norm's kernel at `rows` rows of 24: what a decoder step runs at each length.
kir::Kernel layer_norm_kernel(int64_t rows) {
  const std::string t = fmt::format("f32[{},24]", rows);
  return test::only_kernel(fmt::format(
      "graph @ln(%x: {0}) -> {0} {{\n"
      "  %n = constant {{value = 0.041666668}} : f32[]\n"
      "  %s = reduce_sum %x {{axes = [1], keepdim}} : f32[{1},1]\n"
      "  %m = mul %s, %n : f32[{1},1]\n"
      "  %c = sub %x, %m : {0}\n"
      "  %q = mul %c, %c : {0}\n"
      "  %v = reduce_sum %q {{axes = [1], keepdim}} : f32[{1},1]\n"
      "  %r = rsqrt %v : f32[{1},1]\n"
      "  %y = mul %c, %r : {0}\n"
      "  return %y\n}}\n",
      t, rows));
}

kir::Schedule schedule_for(const kir::Kernel& k, const Capabilities& caps) { return kir::default_schedule(k, caps); }

TEST(RowsAtLaunch, TheClassOfEverySizeIsOneText) {
  const Capabilities caps;
  const kir::Kernel a = layer_norm_kernel(3), b = layer_norm_kernel(700);
  ASSERT_FALSE(kir::rows_at_launch_refusal(a, schedule_for(a, caps), caps));
  const kir::RowsAtLaunch ga = kir::rows_at_launch(a, schedule_for(a, caps));
  const kir::RowsAtLaunch gb = kir::rows_at_launch(b, schedule_for(b, caps));
  EXPECT_EQ(ga.kernel.str(false), gb.kernel.str(false));
  EXPECT_EQ(ga.schedule.str(), gb.schedule.str());
  EXPECT_NE(a.str(false), b.str(false));
  // The size is the last scalar, and the domain says so.
  EXPECT_EQ(ga.kernel.rows_arg, static_cast<int32_t>(a.scalars.size()));
  EXPECT_EQ(ga.kernel.scalars.back(), DType::I64);
  EXPECT_EQ(ga.kernel.domain[0], kir::kRowsAtLaunchBound);
  EXPECT_NE(ga.kernel.str().find("over [$0 <= 2147483648, reduce 24]"), std::string::npos) << ga.kernel.str();
}

// A batch of one is no dim of a reduction's kernel (kir::coalesce_dims): its rows are the
// sequence's, bound at launch as any batch's.
TEST(RowsAtLaunch, ABatchOfOneIsNoDimOfTheKernel) {
  const Capabilities caps;
  auto kernel = [](int64_t t) {
    return test::only_kernel(fmt::format(
        "graph @b(%x: f32[1,{0},24], %g: f32[24]) -> f32[1,{0},24] {{\n"
        "  %s = reduce_sum %x {{axes = [2], keepdim}} : f32[1,{0},1]\n"
        "  %c = sub %x, %s : f32[1,{0},24]\n"
        "  %y = mul %c, %g : f32[1,{0},24]\n"
        "  return %y\n}}\n",
        t));
  };
  const kir::Kernel a = kernel(5), b = kernel(61);
  ASSERT_EQ(a.domain_str(), "[5, reduce 24]");
  ASSERT_EQ(kir::rows_dim(a), 0);
  ASSERT_FALSE(kir::rows_at_launch_refusal(a, schedule_for(a, caps), caps));
  const kir::RowsAtLaunch ga = kir::rows_at_launch(a, schedule_for(a, caps));
  EXPECT_EQ(ga.kernel.str(false), kir::rows_at_launch(b, schedule_for(b, caps)).kernel.str(false));
  EXPECT_NE(ga.kernel.str().find("over [$0 <= 2147483648, reduce 24]"), std::string::npos) << ga.kernel.str();
  EXPECT_EQ(kir::rows_dim(ga.kernel), 0);
}

TEST(RowsAtLaunch, ThirtyTwoBitPositionsBoundTheClassWhereTheyStillFit) {
  const Capabilities caps;
  const kir::Kernel k = layer_norm_kernel(5);
  kir::Schedule s = schedule_for(k, caps);
  s.work_items.index_bits = 32;
  const kir::RowsAtLaunch g = kir::rows_at_launch(k, s);
  EXPECT_EQ(g.kernel.scalars.back(), DType::I32);
  EXPECT_TRUE(kir::index_fits_32(g.kernel));
  kir::Kernel past = g.kernel;
  past.domain[0] += 1;
  EXPECT_FALSE(kir::index_fits_32(past)) << g.kernel.domain[0];
  // Every size of the class finds the same bound.
  kir::Kernel other = layer_norm_kernel(9000);
  EXPECT_EQ(kir::rows_at_launch(other, s).kernel.str(false), g.kernel.str(false));
}

TEST(RowsAtLaunch, KernelsThatNeedTheirFirstSizeAreRefused) {
  const Capabilities caps;
  auto refusal = [&](const std::string& text) {
    const kir::Kernel k = test::only_kernel(text);
    return kir::rows_at_launch_refusal(k, schedule_for(k, caps), caps).value_or("");
  };
  EXPECT_EQ(refusal("graph @s(%x: f32[6,4]) -> f32[4] {\n  %y = reduce_sum %x {axes = [0]} : f32[4]\n  return %y\n}\n"),
            "its rows are reduced");
  EXPECT_EQ(refusal("graph @e(%x: f32[64]) -> f32[64] {\n  %y = exp %x : f32[64]\n  return %y\n}\n"),
            "it has no dim of size other than 1 before its lane dim");
  const kir::Kernel k = layer_norm_kernel(4);
  kir::Kernel once = kir::rows_at_launch(k, schedule_for(k, caps)).kernel;
  EXPECT_EQ(kir::rows_at_launch_refusal(once, schedule_for(k, caps), caps).value_or(""),
            "its rows are bound at launch already");
}

// A decoder-like step at each length T on every device, against the interpreter: the
// first length of each kernel compiles it for that length, the second for every length,
// and from then on no kernel is compiled or even looked up on disk.
TEST(RowsAtLaunch, ALoopOverLengthsCompilesEachKernelAtMostTwiceOnEveryDevice) {
  const Tensor w = randn(S({24}), 7).eval(), bias = randn(S({24}), 8).eval();
  auto step = [](const Tensor& x, const Tensor& scale, const Tensor& shift) {
    const Tensor h = layer_norm(x, scale, shift);
    return (h * 0.5f).softmax(-1) + x.relu() * shift;
  };
  for (Device d : registered_devices()) {
    if (d == Device::interp()) continue;
    SCOPED_TRACE(d.str());
    const Tensor wd = w.to(d).eval(), bd = bias.to(d).eval();
    RuntimeCounters& c = runtime_counters();
    // Rows first ([T, 24]), then a batch of one ([1, T, 24]): its own kernels and class.
    for (int64_t t : {1, 2, 3, 4, 5, 9, 16, 37, 100, 0, -2, -3, -4, -7, -40}) {
      SCOPED_TRACE(t);
      const int64_t n = std::abs(t);
      const Tensor x = (t >= 0 ? randn(S({n, 24}), 100 + static_cast<uint64_t>(n))
                               : randn(S({1, n, 24}), 200 + static_cast<uint64_t>(n))).eval();
      const uint64_t looked_up = c.kernel_disk_hits.load() + c.kernel_disk_misses.load();
      const std::vector<float> got = step(x.to(d), wd, bd).to_vector<float>();
      if (t > 3 || t < -3) {
        EXPECT_EQ(c.kernel_disk_hits.load() + c.kernel_disk_misses.load(), looked_up);
      }
      const std::vector<float> want = step(x.to(Device::interp()), w.to(Device::interp()), bias.to(Device::interp()))
                                          .to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;
    }
  }
}

// Threads that meet new lengths at once, in different orders, on one engine: each run
// agrees with the interpreter whichever thread compiled the class.
TEST(RowsAtLaunch, ThreadsMeetingNewLengthsAtOnceAgree) {
  const Tensor w = randn(S({24}), 9).eval();
  auto step = [](const Tensor& x, const Tensor& scale) { return (x * scale).softmax(-1) + x.tanh(); };
  const std::vector<int64_t> lengths = {6, 11, 3, 29, 8, 17, 2, 45};
  std::vector<Tensor> inputs;
  std::vector<std::vector<float>> want;
  for (int64_t t : lengths) {
    inputs.push_back(randn(S({t, 24}), 300 + static_cast<uint64_t>(t)).eval());
    want.push_back(step(inputs.back().to(Device::interp()), w.to(Device::interp())).to_vector<float>());
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (size_t j = 0; j < lengths.size(); ++j) {
        const size_t i = (j * 3 + static_cast<size_t>(th) * 5) % lengths.size();
        const std::vector<float> got = step(inputs[i], w).to_vector<float>();
        for (size_t e = 0; e < got.size(); ++e)
          if (!(std::abs(got[e] - want[i][e]) <= 1e-5f * (1 + std::abs(want[i][e])))) ++wrong[static_cast<size_t>(th)];
      }
    });
  for (std::thread& t : threads) t.join();
  for (int th = 0; th < 4; ++th) EXPECT_EQ(wrong[static_cast<size_t>(th)], 0) << "thread " << th;
}

}  // namespace
}  // namespace kiln
