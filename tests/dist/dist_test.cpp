// tests/dist/dist_test.cpp - kiln::dist on several ranks. ctest runs it under `mpirun -np 2
// --oversubscribe` (tests/dist/CMakeLists.txt); by hand it runs with any number of ranks,
// and with one as an ordinary program.
#include "kiln/dist/dist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "kiln/dist/data_parallel.h"
#include "kiln/kiln.h"

namespace {

using namespace kiln;
using testing::HasSubstr;

// Rank r's values: different on every rank and at every position, exact in f32 and in sums.
std::vector<float> values_of(int r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + r * 3) % 11) - 5.0f + 0.25f * r;
  return v;
}

class Collectives : public testing::TestWithParam<const char*> {
 protected:
  Device device() const { return Device::parse(GetParam()); }
};

TEST_P(Collectives, AllReduceCombinesEveryRanksValues) {
  const int ranks = dist::size(), me = dist::rank();
  const int64_t n = 1000;
  // Pending, on the device: the collective evaluates it.
  const Tensor x = from_vector(values_of(me, n), {10, 100}, device()) * 1.0f;
  std::vector<double> sum(n, 0), hi(n, -1e30), lo(n, 1e30);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> v = values_of(r, n);
    for (int64_t i = 0; i < n; ++i) {
      sum[i] += v[i];
      hi[i] = std::max<double>(hi[i], v[i]);
      lo[i] = std::min<double>(lo[i], v[i]);
    }
  }
  const Tensor s = dist::all_reduce(x);
  EXPECT_EQ(s.device(), device());
  EXPECT_EQ(s.shape(), x.shape());
  const std::vector<float> got_sum = s.to_vector<float>();
  const std::vector<float> got_mean =
      dist::all_reduce(x, {.op = dist::ReduceOp::Mean}).to_vector<float>();
  const std::vector<float> got_max =
      dist::all_reduce(x, {.op = dist::ReduceOp::Max}).to_vector<float>();
  const std::vector<float> got_min =
      dist::all_reduce(x, {.op = dist::ReduceOp::Min}).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_sum[i], sum[i]) << i;  // small integers and quarters: exact in any order
    ASSERT_FLOAT_EQ(got_mean[i], sum[i] / ranks) << i;
    ASSERT_EQ(got_max[i], hi[i]) << i;
    ASSERT_EQ(got_min[i], lo[i]) << i;
  }
}

TEST_P(Collectives, FixedOrderSumsInRankOrder) {
  const int ranks = dist::size(), me = dist::rank();
  // Values whose sum depends on the order: a large one on rank 0 and small ones after it.
  std::vector<float> mine(64);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = me == 0 ? 1e8f + static_cast<float>(i) : 0.7f * static_cast<float>(me + i);
  std::vector<float> expected(64);
  for (size_t i = 0; i < expected.size(); ++i) {
    float acc = 1e8f + static_cast<float>(i);
    for (int r = 1; r < ranks; ++r) acc += 0.7f * static_cast<float>(r + i);
    expected[i] = acc;
  }
  const Tensor s = dist::all_reduce(from_vector(mine, {64}, device()), {.fixed_order = true});
  EXPECT_EQ(s.to_vector<float>(), expected);
}

TEST_P(Collectives, IntegersBoolsAndHalfFloats) {
  const int ranks = dist::size(), me = dist::rank();
  const Tensor i = from_vector(std::vector<int64_t>{me, 10 * me, -me}, {3}, device());
  const int64_t t = ranks * (ranks - 1) / 2;
  EXPECT_EQ(dist::all_reduce(i).to_vector<int64_t>(), (std::vector<int64_t>{t, 10 * t, -t}));
  const Tensor b =
      from_vector(std::vector<float>{me == 0 ? 1.0f : 0.0f, 1.0f}, {2}, device()) > 0.5f;
  EXPECT_EQ(dist::all_reduce(b).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(dist::all_reduce(b, {.op = dist::ReduceOp::Min}).to_vector<bool>(),
            (std::vector<bool>{ranks == 1, true}));
  const Tensor h = from_vector(std::vector<float>{1.5f, -2.0f}, {2}, device()).to(DType::F16);
  const Tensor hs = dist::all_reduce(h);
  EXPECT_EQ(hs.dtype(), DType::F16);
  EXPECT_EQ(hs.to(DType::F32).to_vector<float>(),
            (std::vector<float>{1.5f * ranks, -2.0f * ranks}));
  EXPECT_THROW(dist::all_reduce(i, {.op = dist::ReduceOp::Mean}), Error);
}

TEST_P(Collectives, BroadcastGatherAndScatter) {
  const int ranks = dist::size(), me = dist::rank();
  const int root = ranks - 1;
  const Tensor mine = from_vector(values_of(me, 6), {2, 3}, device());
  EXPECT_EQ(dist::broadcast(mine, root).to_vector<float>(), values_of(root, 6));
  const Tensor all = dist::all_gather(mine);
  EXPECT_EQ(all.shape(), Shape({2 * ranks, 3}));
  std::vector<float> expected;
  for (int r = 0; r < ranks; ++r)
    for (float v : values_of(r, 6)) expected.push_back(v);
  EXPECT_EQ(all.to_vector<float>(), expected);
  // Each rank contributes [ranks * 2, 3]; rank r gets rows [2r, 2r + 2) of the sum.
  const Tensor big = from_vector(values_of(me, 6 * ranks), {2 * ranks, 3}, device());
  const Tensor part = dist::reduce_scatter(big);
  EXPECT_EQ(part.shape(), Shape({2, 3}));
  std::vector<float> sum(6, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> v = values_of(r, 6 * ranks);
    for (int k = 0; k < 6; ++k) sum[k] += v[static_cast<size_t>(6 * me + k)];
  }
  EXPECT_EQ(part.to_vector<float>(), sum);
  EXPECT_EQ(dist::reduce_scatter(big, {.fixed_order = true}).to_vector<float>(), sum);
  EXPECT_THROW(dist::broadcast(mine, ranks), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, Collectives,
                         testing::Values("cpu", "interp", "opencl:0", "vulkan:0"),
                         [](const testing::TestParamInfo<const char*>& param_info) {
                           std::string name = param_info.param;
                           std::erase(name, ':');
                           return name;
                         });

TEST(CollectiveErrors, RanksWhoseTensorsDifferAllThrowNamingEach) {
  if (dist::size() < 2) GTEST_SKIP() << "needs two ranks";
  const Tensor x = zeros({2, 1 + dist::rank()});
  try {
    dist::all_reduce(x);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("all_reduce: the ranks' tensors differ"));
    EXPECT_THAT(e.what(), HasSubstr("rank 0: f32[2,1]"));
    EXPECT_THAT(e.what(), HasSubstr("rank 1: f32[2,2]"));
  }
  // The world is still usable.
  EXPECT_EQ(dist::all_reduce(ones({1})).item<float>(), static_cast<float>(dist::size()));
}

// A small regression model: tanh(x W1^T + b1) W2^T + b2 against y, mean squared error.
struct Model {
  Tensor w1, b1, w2, b2;
  std::vector<Tensor*> params() { return {&w1, &b1, &w2, &b2}; }
};

Model make_model(int salt) {
  auto param = [&](Shape s, float scale) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = scale * std::sin(0.7f * static_cast<float>(i) + static_cast<float>(salt));
    return from_vector(v, s).requires_grad_();
  };
  return {param({8, 4}, 0.5f), param({8}, 0.1f), param({1, 8}, 0.5f), param({1}, 0.1f)};
}

constexpr int64_t kGlobalBatch = 16;

// Rows [first, first + n) of the data set.
std::pair<Tensor, Tensor> rows(int64_t first, int64_t n) {
  std::vector<float> x, y;
  for (int64_t i = first; i < first + n; ++i) {
    for (int j = 0; j < 4; ++j)
      x.push_back(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(j)));
    y.push_back(std::cos(0.11f * static_cast<float>(i)));
  }
  return {from_vector(x, {n, 4}), from_vector(y, {n, 1})};
}

Tensor loss_of(const Model& m, const std::pair<Tensor, Tensor>& batch) {
  const Tensor h = linear(batch.first, m.w1, m.b1).tanh();
  const Tensor d = linear(h, m.w2, m.b2) - batch.second;
  return (d * d).mean();
}

std::vector<float> flat(Model& m) {
  std::vector<float> all;
  for (Tensor* p : m.params())
    for (float v : p->to_vector<float>()) all.push_back(v);
  return all;
}

TEST(DataParallel, RanksTrainAsOneRankWithTheGlobalBatch) {
  const int ranks = dist::size(), me = dist::rank();
  if (kGlobalBatch % ranks) GTEST_SKIP() << "the global batch does not split into " << ranks;
  const int64_t local = kGlobalBatch / ranks;
  Model model = make_model(me);  // differs by rank until the broadcast
  dist::DataParallel ddp(model.params(), {.bucket_bytes = 64});  // several buckets
  EXPECT_GT(ddp.buckets().size(), 1u);
  ddp.broadcast_parameters();
  train::AdamW opt(model.params(), {.lr = 0.05});
  Model reference = make_model(0);
  train::AdamW ref_opt(reference.params(), {.lr = 0.05});
  for (int step = 0; step < 5; ++step) {
    loss_of(model, rows(step * kGlobalBatch + me * local, local)).backward();
    ddp.average_gradients();
    opt.step();
    opt.zero_grad();
    loss_of(reference, rows(step * kGlobalBatch, kGlobalBatch)).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    kiln::sync();
  }
  const std::vector<float> got = flat(model), want = flat(reference);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
  // Every rank holds the same bits.
  const Tensor mine = from_vector(got, {static_cast<int64_t>(got.size())});
  EXPECT_EQ(dist::all_reduce(mine, {.op = dist::ReduceOp::Max}).to_vector<float>(), got);
  EXPECT_EQ(dist::all_reduce(mine, {.op = dist::ReduceOp::Min}).to_vector<float>(), got);
}

TEST(DataParallel, FixedOrderIsBitwiseOneProcessSummingTheShardsInRankOrder) {
  const int ranks = dist::size(), me = dist::rank();
  if (kGlobalBatch % ranks) GTEST_SKIP() << "the global batch does not split into " << ranks;
  const int64_t local = kGlobalBatch / ranks;
  Model model = make_model(0);
  dist::DataParallel ddp(model.params(), {.bucket_bytes = 100, .fixed_order = true});
  train::SGD opt(model.params(), {.lr = 0.1, .momentum = 0.9});
  Model reference = make_model(0);
  train::SGD ref_opt(reference.params(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 4; ++step) {
    loss_of(model, rows(step * kGlobalBatch + me * local, local)).backward();
    ddp.average_gradients();
    opt.step();
    opt.zero_grad();
    // The reference: every shard's gradient in turn, summed in rank order in f32, divided.
    std::vector<std::vector<float>> sums(4);
    for (int r = 0; r < ranks; ++r) {
      loss_of(reference, rows(step * kGlobalBatch + r * local, local)).backward();
      std::vector<Tensor*> ps = reference.params();
      for (size_t k = 0; k < ps.size(); ++k) {
        const std::vector<float> g = ps[k]->grad().to_vector<float>();
        if (r == 0)
          sums[k] = g;
        else
          for (size_t i = 0; i < g.size(); ++i) sums[k][i] += g[i];
        ps[k]->set_grad(Tensor());
      }
    }
    std::vector<Tensor*> ps = reference.params();
    for (size_t k = 0; k < ps.size(); ++k) {
      for (float& v : sums[k]) v /= static_cast<float>(ranks);
      const std::vector<int64_t> dims(ps[k]->shape().dims().begin(), ps[k]->shape().dims().end());
      ps[k]->set_grad(from_vector(sums[k], Shape(dims)));
    }
    ref_opt.step();
    ref_opt.zero_grad();
    kiln::sync();
  }
  const std::vector<float> got = flat(model), want = flat(reference);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

TEST(ShardSampler, RanksReadDisjointShardsOfOnePermutation) {
  const int ranks = dist::size();
  const int64_t n = 103;
  const dist::ShardSampler sampler(n, {.seed = 5});
  EXPECT_EQ(sampler.per_rank(), n / ranks);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<int64_t> mine = sampler.epoch(epoch);
    const Tensor all = dist::all_gather(from_vector(mine, {static_cast<int64_t>(mine.size())}));
    const std::vector<int64_t> v = all.to_vector<int64_t>();
    const std::set<int64_t> distinct(v.begin(), v.end());
    EXPECT_EQ(distinct.size(), v.size()) << "an index read by two ranks";
    EXPECT_TRUE(*distinct.rbegin() < n && *distinct.begin() >= 0);
  }
  EXPECT_NE(sampler.epoch(0), sampler.epoch(1));
  // Batches walk an epoch, then the next.
  const int64_t per_epoch = sampler.per_rank() / 10;
  const std::vector<int64_t> e0 = sampler.epoch(0), e1 = sampler.epoch(1);
  EXPECT_EQ(sampler.batch(0, 10), std::vector<int64_t>(e0.begin(), e0.begin() + 10));
  EXPECT_EQ(sampler.batch(per_epoch, 10), std::vector<int64_t>(e1.begin(), e1.begin() + 10));
  EXPECT_THROW(sampler.batch(0, 0), Error);
}

// What fails on a rank other than 0, with the rank.
class FailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", kiln::dist::rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
};

}  // namespace

int main(int argc, char** argv) {
  kiln::dist::init(&argc, &argv, {.timeout_s = 120});
  testing::InitGoogleTest(&argc, argv);
  // Rank 0 prints the progress; the others only what fails on them.
  if (kiln::dist::rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict: a failure on any rank fails the run on every rank.
  const int any = static_cast<int>(
      kiln::dist::all_reduce(kiln::from_vector(std::vector<int32_t>{failed != 0}, {1}),
                             {.op = kiln::dist::ReduceOp::Max})
          .item<int32_t>());
  if (failed) std::fprintf(stderr, "dist_test: rank %d failed\n", kiln::dist::rank());
  kiln::dist::finalize();
  return any ? 1 : 0;
}
