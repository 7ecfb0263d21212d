// The lazy kiln::Tensor frontend: values, laziness, errors at the call, memory, capture,
// threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <thread>

#include "kiln/backends/backend.h"
#include "kiln/engine/compile.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

std::vector<float> iota(int n, float scale = 1, float offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * scale + offset;
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-6f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << i;
}

/// Restores the pending cap when a test that changes it ends.
struct CapGuard {
  uint32_t saved = max_pending();
  ~CapGuard() { set_max_pending(saved); }
};

// ---- factories and metadata -------------------------------------------------------------

TEST(Frontend, FactoriesAndMetadata) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
  EXPECT_EQ(x.dtype(), DType::F32);
  EXPECT_EQ(x.device(), Device::cpu());
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.size(-1), 3);
  EXPECT_TRUE(x.is_evaluated());
  EXPECT_EQ(zeros({2}, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(ones({3}).to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(full({2}, 7, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(1.0, 2.0, 0.25).to_vector<float>(), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(from_vector<bool>({true, false}, {2}).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_THROW(from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(full({2}, 2.5, DType::I32), Error);
}

// eval() on a queue device returns once the kernels are enqueued; synchronize waits for
// them, on every device, and the values are then there without a download to force them.
TEST(Frontend, SynchronizeWaitsOnEveryDevice) {
  for (Device d : registered_devices()) {
    const Tensor x = arange(0, 4096, 1, DType::F32, d);
    Tensor y = (x * 2.0f + 1.0f).sum();
    y.eval();
    synchronize(d);
    EXPECT_EQ(y.item<float>(), 4096.0f * 4096.0f) << d.str();  // sum of 2i+1 for i < 4096
  }
}

TEST(Frontend, RandIsSeededAndRandnIsStandardNormal) {
  const std::vector<float> a = rand({4096}, 7).to_vector<float>();
  EXPECT_EQ(a, rand({4096}, 7).to_vector<float>());
  EXPECT_NE(a, rand({4096}, 8).to_vector<float>());
  const std::vector<float> z = randn({1 << 16}, 3).to_vector<float>();
  double mean = 0, sq = 0;
  for (float v : z) {
    mean += v;
    sq += static_cast<double>(v) * v;
  }
  mean /= static_cast<double>(z.size());
  const double var = sq / static_cast<double>(z.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.03);
}

// ---- ops and operators ------------------------------------------------------------------

TEST(Frontend, OperatorsWithTensorsAndScalarsOnEitherSide) {
  const Tensor x = from_vector<float>({1, 2, 3}, {3});
  expect_near((x * 1.5f + 0.25f).to_vector<float>(), {1.75f, 3.25f, 4.75f});
  expect_near((2 - x).to_vector<float>(), {1, 0, -1});
  expect_near((1.0 / x).to_vector<float>(), {1, 0.5f, 1 / 3.0f});
  expect_near((-x).to_vector<float>(), {-1, -2, -3});
  expect_near((x + x * x).to_vector<float>(), {2, 6, 12});
  EXPECT_EQ((x > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((2 == x).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((~(x <= 2) | (x == 1)).to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(Frontend, ScalarsAreWeak) {
  const Tensor f = from_vector<float>({1}, {1});
  const Tensor i = from_vector<int32_t>({3}, {1});
  const Tensor b = from_vector<bool>({true}, {1});
  EXPECT_EQ((f * 0.5).dtype(), DType::F32);   // a double scalar does not widen f32
  EXPECT_EQ((i + 1).dtype(), DType::I32);
  EXPECT_EQ((i * 0.5).dtype(), DType::F32);
  EXPECT_EQ((b + 1).dtype(), DType::I64);
  EXPECT_EQ((i + f).dtype(), DType::F64);     // tensors promote as NumPy
  EXPECT_EQ((i / i).dtype(), DType::F64);
  EXPECT_THROW(i + 3000000000LL, Error);
}

TEST(Frontend, EveryPrimitiveAgainstItsMeaning) {
  const Tensor x = from_vector<float>({-1.5f, 0.5f, 2}, {3});
  const std::vector<float> xs = {-1.5f, 0.5f, 2};
  auto map = [&](float (*f)(float)) {
    std::vector<float> out;
    for (float v : xs) out.push_back(f(v));
    return out;
  };
  expect_near(x.abs().to_vector<float>(), map([](float v) { return std::fabs(v); }));
  expect_near(x.exp().to_vector<float>(), map([](float v) { return std::exp(v); }));
  expect_near(x.abs().log().to_vector<float>(), map([](float v) { return std::log(std::fabs(v)); }));
  expect_near(x.abs().sqrt().to_vector<float>(), map([](float v) { return std::sqrt(std::fabs(v)); }));
  expect_near(x.abs().rsqrt().to_vector<float>(), map([](float v) { return 1 / std::sqrt(std::fabs(v)); }));
  expect_near(kiln::sin(x).to_vector<float>(), map([](float v) { return std::sin(v); }));
  expect_near(kiln::cos(x).to_vector<float>(), map([](float v) { return std::cos(v); }));
  expect_near(kiln::tanh(x).to_vector<float>(), map([](float v) { return std::tanh(v); }));
  expect_near(x.sigmoid().to_vector<float>(), map([](float v) { return 1 / (1 + std::exp(-v)); }));
  expect_near(x.relu().to_vector<float>(), map([](float v) { return v < 0 ? 0.0f : v; }));
  expect_near(x.erf().to_vector<float>(), map([](float v) { return std::erf(v); }));
  expect_near(x.floor().to_vector<float>(), map([](float v) { return std::floor(v); }));
  expect_near(x.ceil().to_vector<float>(), map([](float v) { return std::ceil(v); }));
  expect_near(x.pow(2).to_vector<float>(), map([](float v) { return v * v; }));
  expect_near(x.maximum(zeros({1})).to_vector<float>(), {0, 0.5f, 2});
  expect_near(kiln::minimum(x, zeros({1})).to_vector<float>(), {-1.5f, 0, 0});
  EXPECT_EQ(x.to(DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 2}));
  expect_near(where(x > 0, x, zeros({})).to_vector<float>(), {0, 0.5f, 2});
  expect_near(x.where(x < 0, ones({})).to_vector<float>(), {-1.5f, 1, 1});
}

TEST(Frontend, Reductions) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_near(x.sum().to_vector<float>(), {21});
  EXPECT_EQ(x.sum().rank(), 0);
  expect_near(x.sum({-1}, true).to_vector<float>(), {6, 15});
  EXPECT_EQ(x.sum({-1}, true).shape(), (Shape{2, 1}));
  expect_near(x.prod({0}).to_vector<float>(), {4, 10, 18});
  expect_near(x.max({1}).to_vector<float>(), {3, 6});
  expect_near(amin(x, {0}).to_vector<float>(), {1, 2, 3});
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  expect_near(x.mean({0}).to_vector<float>(), {2.5f, 3.5f, 4.5f});
  expect_near(x.var({1}).to_vector<float>(), {1, 1});                 // unbiased
  expect_near(x.var({1}, false, 0).to_vector<float>(), {2 / 3.0f, 2 / 3.0f});
  EXPECT_EQ(from_vector<int32_t>({1, 2}, {2}).sum().dtype(), DType::I64);
  EXPECT_EQ(from_vector<int32_t>({5}, {}).sum().item<int64_t>(), 5);
  EXPECT_THROW(x.sum({2}), Error);
  EXPECT_THROW(x.sum({1, -1}), Error);
  EXPECT_THROW(from_vector<int32_t>({1}, {1}).mean(), Error);
}

TEST(Frontend, CompositesDecomposeAndComputeTheRightThing) {
  const Tensor x = from_vector<float>(iota(8, 0.5f, -1), {2, 4});
  const std::vector<float> v = x.to_vector<float>();
  // softmax and log_softmax, per row.
  std::vector<float> sm, lsm;
  for (int r = 0; r < 2; ++r) {
    double z = 0, m = -1e30;
    for (int c = 0; c < 4; ++c) m = std::max<double>(m, v[static_cast<size_t>(r * 4 + c)]);
    for (int c = 0; c < 4; ++c) z += std::exp(v[static_cast<size_t>(r * 4 + c)] - m);
    for (int c = 0; c < 4; ++c) {
      sm.push_back(static_cast<float>(std::exp(v[static_cast<size_t>(r * 4 + c)] - m) / z));
      lsm.push_back(static_cast<float>(v[static_cast<size_t>(r * 4 + c)] - m - std::log(z)));
    }
  }
  expect_near(x.softmax().to_vector<float>(), sm, 1e-6f);
  expect_near(log_softmax(x, 1).to_vector<float>(), lsm, 1e-6f);
  // layer_norm: every row has mean 0 and (biased) variance 1.
  const Tensor ln = layer_norm(x, 0.0);
  expect_near(ln.mean({-1}).to_vector<float>(), {0, 0}, 1e-6f);
  expect_near(ln.var({-1}, false, 0).to_vector<float>(), {1, 1}, 1e-5f);
  const Tensor w = from_vector<float>({1, 2, 3, 4}, {4}), b = from_vector<float>({0, 0, 0, 1}, {4});
  expect_near(layer_norm(x, w, b).to_vector<float>(), (layer_norm(x) * w + b).to_vector<float>());
  // gelu, both forms, and silu.
  std::vector<float> ge, gt, si;
  for (float u : v) {
    ge.push_back(static_cast<float>(0.5 * u * (1 + std::erf(u / std::sqrt(2.0)))));
    gt.push_back(static_cast<float>(0.5 * u * (1 + std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))));
    si.push_back(static_cast<float>(u / (1 + std::exp(-u))));
  }
  expect_near(x.gelu().to_vector<float>(), ge, 1e-6f);
  expect_near(gelu(x, GeluApproximation::Tanh).to_vector<float>(), gt, 1e-6f);
  expect_near(silu(x).to_vector<float>(), si, 1e-6f);
  // The softmax is five primitives: reduce_max, sub, exp, reduce_sum, div.
  const std::string ir = dump(x.softmax());
  for (const char* op : {"reduce_max", "sub", "exp", "reduce_sum", "div"})
    EXPECT_NE(ir.find(std::string(" = ") + op + " "), std::string::npos) << op << "\n" << ir;
}

TEST(Frontend, AttentionInEitherFormIsOneAttentionStep) {
  // Two heads of 3 queries and 5 keys of depth 4, v of width 2; the mask hides key 4 from
  // every query and keys 1..4 from query 0.
  const std::vector<float> qs = iota(24, 0.1f, -1), ks = iota(40, -0.05f, 1), vs = iota(20, 0.5f, -2);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> ms(15, 0.0f);
  for (int i = 0; i < 3; ++i) ms[static_cast<size_t>(i * 5 + 4)] = -inf;
  for (int j = 1; j < 5; ++j) ms[static_cast<size_t>(j)] = -inf;
  const Tensor q = from_vector<float>(qs, {2, 3, 4}), k = from_vector<float>(ks, {2, 5, 4});
  const Tensor v = from_vector<float>(vs, {2, 5, 2}), mask = from_vector<float>(ms, {3, 5});
  std::vector<float> want;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      double p[5], sum = 0;
      for (int j = 0; j < 5; ++j) {
        double dot = 0;
        for (int e = 0; e < 4; ++e) dot += qs[static_cast<size_t>((h * 3 + i) * 4 + e)] * ks[static_cast<size_t>((h * 5 + j) * 4 + e)];
        sum += p[j] = std::exp(dot * 0.5 + ms[static_cast<size_t>(i * 5 + j)]);
      }
      for (int c = 0; c < 2; ++c) {
        double y = 0;
        for (int j = 0; j < 5; ++j) y += p[j] / sum * vs[static_cast<size_t>((h * 5 + j) * 2 + c)];
        want.push_back(static_cast<float>(y));
      }
    }
  // scaled_dot_product_attention (scale 1 / sqrt(4)), and the same written out with a C++
  // scale, which the frontend records as a value bound at launch.
  const Tensor a = scaled_dot_product_attention(q, k, v, mask);
  const Tensor b = (q.matmul(k.transpose(-2, -1)) * 0.5 + mask).softmax(-1).matmul(v);
  for (const Tensor* t : {&a, &b}) {
    const Graph g = parse_graph(dump(*t)).take();
    const Compilation c = compile_graph(Capabilities{}, {}, g);
    EXPECT_EQ(std::count_if(c.plan.steps.begin(), c.plan.steps.end(),
                            [](const LaunchPlan::Step& s) { return s.attention.has_value(); }),
              1)
        << dump(*t);
  }
  expect_near(a.to_vector<float>(), want, 1e-5f);
  expect_near(b.to_vector<float>(), want, 1e-5f);
}

TEST(Frontend, MatmulLinearAndMovement) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor w = from_vector<float>({1, 0, 1, 0, 1, 0}, {2, 3});  // [out=2, in=3]
  const Tensor bias = from_vector<float>({10, 20}, {2});
  expect_near(linear(a, w, bias).to_vector<float>(), {14, 22, 20, 25});
  expect_near(a.matmul(from_vector<float>({1, 1, 1}, {3})).to_vector<float>(), {6, 15});  // matrix @ vector
  EXPECT_EQ(from_vector<float>({1, 1}, {2}).matmul(a).shape(), (Shape{3}));               // vector @ matrix
  expect_near(a.transpose(0, 1).to_vector<float>(), {1, 4, 2, 5, 3, 6});
  expect_near(a.permute({1, 0}).reshape({-1}).to_vector<float>(), {1, 4, 2, 5, 3, 6});
  EXPECT_EQ(a.flatten().shape(), (Shape{6}));
  EXPECT_EQ(a.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(a.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(a.reshape({1, 2, 1, 3}).squeeze().shape(), (Shape{2, 3}));
  expect_near(a.slice(1, -2, 100).to_vector<float>(), {2, 3, 5, 6});   // Python-style bounds
  expect_near(a.slice(1, 0, 3, 2).to_vector<float>(), {1, 3, 4, 6});
  expect_near(a.slice(1, -1, -100, -1).to_vector<float>(), {3, 2, 1, 6, 5, 4});  // a[:, ::-1]
  expect_near(a.slice(1, 2, 0, -2).to_vector<float>(), {3, 6});                  // a[:, 2:0:-2]
  expect_near(a.flip().to_vector<float>(), {6, 5, 4, 3, 2, 1});
  expect_near(flip(a, {0}).to_vector<float>(), {4, 5, 6, 1, 2, 3});
  EXPECT_EQ(a.slice(1, 0, 2, -1).shape(), (Shape{2, 0}));  // start below stop: empty
  EXPECT_THROW(a.slice(1, 0, 3, 0), Error);
  expect_near(a.expand({2, 2, 3}).sum({0}).to_vector<float>(), {2, 4, 6, 8, 10, 12});
  expect_near(a.slice(0, 0, 1).pad({0, 1}, {0, 0}, -1).to_vector<float>(), {-1, 1, 2, 3});
  expect_near(cat({a, a.slice(0, 1, 2)}, 0).to_vector<float>(), {1, 2, 3, 4, 5, 6, 4, 5, 6});
  EXPECT_THROW(a.squeeze(0), Error);
  EXPECT_THROW(a.reshape({4, -1}), Error);
}

TEST(Frontend, GatherAndTakeReadAtIndices) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor i = from_vector<int64_t>({2, -1, 0, 5}, {2, 2});  // -1 from the end; 5 outside: 0
  expect_near(a.gather(1, i).to_vector<float>(), {3, 3, 4, 0});
  expect_near(gather(a, 0, from_vector<int32_t>({1, 0}, {1, 2})).to_vector<float>(), {4, 2});
  // An embedding lookup: rows of a table by token, any shape of tokens.
  const Tensor tokens = from_vector<int32_t>({1, 0, 1}, {3, 1});
  const Tensor rows = a.take(tokens, 0);
  EXPECT_EQ(rows.shape(), (Shape{3, 1, 3}));
  expect_near(rows.to_vector<float>(), {4, 5, 6, 1, 2, 3, 4, 5, 6});
  expect_near(take(a, from_vector<int64_t>({2, 0}, {2}), 1).to_vector<float>(), {3, 1, 6, 4});
  EXPECT_EQ(a.take(from_vector<int64_t>({1}, {}), 1).shape(), (Shape{2}));
  try {
    (void)a.take(from_vector<float>({1}, {1}), 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("indices must be i32 or i64, got f32[1]"));
  }
  EXPECT_THROW(a.gather(1, from_vector<int64_t>({0, 0, 0}, {3, 1})), Error);  // longer off the axis
}

TEST(Frontend, SortIsStableAndPutsNaNLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = from_vector<float>({3, nan, 1, 3, -0.5f, 2, 1, 0}, {2, 4});
  const auto [v, i] = a.sort(1);
  const std::vector<float> got = v.to_vector<float>();
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 3);
  EXPECT_EQ(got[2], 3);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 3, 1, 0, 3, 2, 1}));  // ties: lower position first
  expect_near(v.slice(0, 1, 2).to_vector<float>(), {-0.5f, 0, 1, 2});
  // Descending puts NaN first; ints sort too; topk keeps the order and the positions.
  EXPECT_EQ(a.argsort(1, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3, 2, 1, 2, 3, 0}));
  const Tensor n = from_vector<int32_t>({5, -2, 7, 5, 0}, {5});
  EXPECT_EQ(n.sort(0).first.to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 5, 5, 7}));
  const auto [tv, ti] = n.topk(2);
  EXPECT_EQ(tv.to_vector<int32_t>(), (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(ti.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(n.topk(2, 0, false).second.to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));
  EXPECT_THROW(n.topk(6), Error);
}

TEST(Frontend, CumsumInclusiveExclusiveAndReversed) {
  const Tensor a = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.cumsum(1).dtype(), DType::I64);  // as NumPy's
  EXPECT_EQ(a.cumsum(1).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(a.cumsum(-1, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(a.cumsum(1, false, true).to_vector<int64_t>(), (std::vector<int64_t>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(a.cumsum(1, true, true).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 0, 11, 6, 0}));
  EXPECT_EQ(a.cumsum(0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
  expect_near(from_vector<float>({0.5f, 0.25f, 1}, {3}).cumsum(0).to_vector<float>(), {0.5f, 0.75f, 1.75f});
  EXPECT_THROW(a.cumsum(2), Error);
}

TEST(Frontend, ScatterWritesAndCombinesAtIndices) {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor i = from_vector<int64_t>({2, 2, 0, 9}, {2, 2});  // 9: outside, dropped
  const Tensor u = from_vector<float>({10, 20, 30, 40}, {2, 2});
  expect_near(a.scatter(1, i, u).to_vector<float>(), {1, 2, 20, 30, 5, 6});
  expect_near(a.scatter_add(1, i, u).to_vector<float>(), {1, 2, 33, 34, 5, 6});
  expect_near(a.scatter_reduce(1, i, u, ScatterReduce::Amin).to_vector<float>(), {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(a.scatter(1, i, from_vector<int32_t>({1, 2, 3, 4}, {2, 2})), Error);  // updates of another dtype
}

// ---- errors at the call -----------------------------------------------------------------

TEST(Frontend, ShapeErrorsThrowAtTheCallNamingOpAndOperands) {
  const Tensor a = zeros({3, 4}), b = zeros({5});
  const uint64_t executions = stats().executions;
  try {
    (void)(a + b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "add: cannot broadcast f32[3,4] with f32[5]");
  }
  try {
    (void)a.matmul(zeros({3, 2}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "matmul: 'matmul' contracting dims differ: f32[3,4] and f32[3,2] (4 vs 3)");
  }
  EXPECT_THROW(a.to(DType::I32).exp(), Error);
  EXPECT_THROW(from_vector<bool>({true}, {1}).neg(), Error);
  EXPECT_THROW((void)(a + from_vector<float>({1}, {1}, Device::interp())), Error);
  EXPECT_THROW(Tensor().exp(), Error);
  EXPECT_THROW(zeros({3}).expand({-1, 3}), Error);                  // -1 for a new dim
  EXPECT_THROW(zeros({0}).reshape({int64_t{1} << 62, 4, 4}), Error);  // element count overflows
  EXPECT_THROW(zeros({int64_t{1} << 32, int64_t{1} << 32}), Error);
  EXPECT_THROW(arange(0.0, 1e300), Error);
  EXPECT_EQ(stats().executions, executions) << "a failed call executes nothing";
  EXPECT_THROW(a.to_vector<double>(), Error);
  EXPECT_THROW(a.item<float>(), Error);
}

// Regressions (issue 10): messages that named the wrong op or none, and a huge sync that
// threw std::bad_alloc instead of kiln::Error.
TEST(Frontend, ErrorsNameTheOpTheUserCalled) {
  auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a kiln::Error: ") + e.what();
    }
    return "no error";
  };
  const Tensor i = from_vector<int32_t>({1, 2}, {2});
  EXPECT_EQ(message([&] { (void)(i + (int64_t{1} << 40)); }),
            "add: scalar 1099511627776 does not fit in i32 (the type of the tensor it meets, i32[2])");
  EXPECT_EQ(message([&] { (void)zeros({-1}); }).rfind("zeros: ", 0), 0u);
  EXPECT_EQ(message([&] { (void)ones({int64_t{1} << 62, 4}); }).rfind("ones: ", 0), 0u);
  EXPECT_EQ(message([&] { (void)linear(zeros({2, 3}), zeros({4, 5})); }),
            "linear: input f32[2,3] has 3 features, weight f32[4,5] expects 5");
  EXPECT_EQ(message([&] { (void)linear(zeros({2, 5}), zeros({4, 5}), zeros({3})); }),
            "linear: bias f32[3] does not match the output f32[2,4] (want [out_features] or [])");
  // Broadcasting past what int64 counts in bytes (2^31 x 2^31 f32).
  EXPECT_EQ(message([&] { (void)(zeros({int64_t{1} << 31, 1}) + zeros({1, int64_t{1} << 31})); }).rfind("add: ", 0), 0u);
  // 4 TiB: the allocation cannot succeed; a kiln::Error names the type and the device.
  const std::string big = message([&] { (void)zeros({int64_t{1} << 40}).exp().eval(); });
  EXPECT_NE(big.find("cannot allocate f32[1099511627776]"), std::string::npos) << big;
  EXPECT_NE(big.find("on device cpu"), std::string::npos) << big;
}

TEST(Frontend, ToCopiesAcrossDevicesAndMixingDevicesNamesBoth) {
  const Tensor a = from_vector<float>({1, 2, 3}, {3});
  const Tensor b = a.to(Device::interp());
  EXPECT_EQ(b.device(), Device::interp());
  EXPECT_EQ((b * 2.0f).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ((b * 2.0f).to(Device::cpu()).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  try {
    (void)(a + b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "add: operands are on different devices (cpu and interp)");
  }
}

// ---- laziness ---------------------------------------------------------------------------

TEST(FrontendLaziness, RecordingExecutesNothingAndOneSyncExecutesOnce) {
  const Stats before = stats();
  Tensor x = from_vector<float>(iota(64), {64});
  for (int i = 0; i < 500; ++i) x = x * 1.0001f + 0.5f;  // 1000 ops (plus their scalars)
  const Stats recorded = stats();
  EXPECT_EQ(recorded.executions, before.executions);
  EXPECT_GE(recorded.ops_recorded - before.ops_recorded, 1000u);
  EXPECT_FALSE(x.is_evaluated());
  const std::vector<float> v = x.to_vector<float>();
  EXPECT_EQ(stats().executions, before.executions + 1);
  (void)x.to_vector<float>();
  EXPECT_EQ(stats().executions, before.executions + 1) << "an evaluated value is not recomputed";
  float want = 3;
  for (int i = 0; i < 500; ++i) want = want * 1.0001f + 0.5f;
  EXPECT_NEAR(v[3], want, 1e-3f);
}

TEST(FrontendLaziness, OnlyWhatIsNeededRuns) {
  const Tensor x = from_vector<float>(iota(16), {16});
  const Tensor y = x.exp() + 1;
  Tensor unused = (x * 3).tanh();  // nobody reads it
  Tensor other = x - 1;            // pending, not needed by y
  const Stats before = stats();
  y.eval();
  EXPECT_EQ(stats().executions, before.executions + 1);
  EXPECT_EQ(stats().nodes_executed - before.nodes_executed, 3u) << "exp, constant, add, and nothing else";
  EXPECT_FALSE(other.is_evaluated()) << "other pending work stays pending";
  EXPECT_FALSE(unused.is_evaluated());
  unused = Tensor();  // dropped: never computed
  sync();
  EXPECT_TRUE(other.is_evaluated());
  EXPECT_EQ(stats().executions, before.executions + 2);
}

TEST(FrontendLaziness, SharedIntermediatesAreKeptNotRecomputed) {
  const Tensor x = from_vector<float>(iota(8), {8});
  const Tensor a = x.exp();  // held by the user
  const Tensor b = a * 2;
  b.eval();
  EXPECT_TRUE(a.is_evaluated()) << "a tensor the user holds is produced by the same execution";
  const Stats before = stats();
  (void)a.to_vector<float>();
  EXPECT_EQ(stats().executions, before.executions);
}

TEST(FrontendLaziness, PendingCapFlushesLongStreams) {
  CapGuard guard;
  set_max_pending(64);
  const Stats before = stats();
  Tensor x = from_vector<float>({1}, {1});
  for (int i = 0; i < 1000; ++i) x = x + 1;
  EXPECT_GT(stats().cap_flushes, before.cap_flushes);
  EXPECT_LT(stats().live_values - before.live_values, 200) << "a loop without sync stays bounded";
  EXPECT_FLOAT_EQ(x.item<float>(), 1001);
  EXPECT_THROW(set_max_pending(0), Error);
}

TEST(FrontendLaziness, SyncReturnsOnlyWhatTensorsHold) {
  // Intermediates only the held value needs are computed inside the graph, not stored.
  const Tensor x = from_vector<float>(iota(256), {256});
  const Tensor c = (x * 2).exp() + 1;
  const int64_t bytes = stats().live_buffer_bytes;
  sync();
  EXPECT_EQ(stats().live_buffer_bytes - bytes, static_cast<int64_t>(256 * sizeof(float)));
  EXPECT_TRUE(c.is_evaluated());
}

TEST(FrontendLaziness, ResidualStreamsNeitherFlushEarlyNorBreakTrace) {
  // h = h + tanh(h) shares h twice per step: the cap counts pending values, not paths.
  auto block = [](Tensor h) {
    for (int i = 0; i < 40; ++i) h = h + h.tanh();
    return h;
  };
  const uint64_t flushes = stats().cap_flushes;
  const Tensor h = block(from_vector<float>({0.5f, -0.5f}, {2}));
  EXPECT_EQ(stats().cap_flushes, flushes);
  const Graph g = trace(block, zeros({2}));
  EXPECT_EQ(g.size(), 1u + 40 * 2);
  float v = 0.5f;
  for (int i = 0; i < 40; ++i) v = v + std::tanh(v);
  EXPECT_NEAR(h.to_vector<float>()[0], v, 1e-4f * v);
}

TEST(Frontend, CatOfManyTensors) {
  std::vector<Tensor> parts;
  for (int i = 0; i < 300; ++i) parts.push_back(full({1}, static_cast<double>(i)));
  const std::vector<float> v = cat(parts).to_vector<float>();
  ASSERT_EQ(v.size(), 300u);
  EXPECT_EQ(v[299], 299.0f);
}

TEST(FrontendMemory, DeadInputsAreDonatedToTheEngine) {
  // x's old value is read by the new pending value only: once `x` is reassigned nothing can
  // read it again, so its buffer is donated (the engine may write the result over it).
  Tensor x = from_vector<float>(iota(256), {256});
  const Stats before = stats();
  for (int i = 0; i < 10; ++i) {
    x = (x * 2).exp().log();
    x.eval();
  }
  EXPECT_EQ(stats().donated_inputs - before.donated_inputs, 10u);
  // A tensor the caller still holds is never donated.
  const Tensor kept = from_vector<float>(iota(256), {256});
  const Tensor y = kept * 2;
  const uint64_t donated = stats().donated_inputs;
  y.eval();
  EXPECT_EQ(stats().donated_inputs, donated);
  EXPECT_EQ(kept.to_vector<float>()[3], 3.0f);
}

// Two tensors of one recipe are one value after CSE: one run returns them as two buffers of
// one memory. When both are dead inputs of a later run, neither may be written over: the
// first written in place was the second's input too (found training: Adam's states of two
// biases whose gradients were equal became NaN).
TEST(FrontendMemory, ValuesSharingMemoryAreNeverWrittenOver) {
  const Tensor a = from_vector<float>(iota(4096), {4096});
  Tensor m1 = a * 2.0f, m2 = a * 2.0f;
  kiln::sync();
  Tensor n1 = m1 + 1.0f, n2 = m2 * 3.0f;
  m1 = Tensor();
  m2 = Tensor();
  kiln::sync();
  EXPECT_EQ(n1.to_vector<float>()[5], 11.0f);
  EXPECT_EQ(n2.to_vector<float>()[5], 30.0f);
}

TEST(FrontendMemory, SharedHostTensorsAreReadInPlaceAndNeverWritten) {
  // On the cpu a shared host tensor (a model's weights) is the device buffer itself: no copy.
  auto host = std::make_shared<const HostTensor>(HostTensor::from_vector(iota(256), {256}));
  const BufferRef b = engine_for(Device::cpu()).upload_shared(host);
  EXPECT_EQ(b->memory().host_data(), host->data());
  EXPECT_TRUE(b->memory().borrowed());
  // Dead after this loop's first step, it would be donated to the run; borrowed memory never
  // is, so the caller's bytes stay what they were.
  Tensor x = from_host(host, Device::cpu());
  const Stats before = stats();
  for (int i = 0; i < 3; ++i) {
    x = (x * 2).exp().log();
    x.eval();
  }
  EXPECT_EQ(host->to_vector<float>()[3], 3.0f);
  EXPECT_EQ(x.to_vector<float>()[3], 24.0f);
  EXPECT_EQ(stats().donated_inputs - before.donated_inputs, 2u);  // the two results after it
  // Where the device has memory of its own, a copy is uploaded.
  if (registered_devices().size() > 1)
    for (const Device d : registered_devices()) {
      if (d == Device::cpu() || d == Device::interp()) continue;
      EXPECT_EQ(from_host(host, d).to_vector<float>()[5], 5.0f) << d.str();
    }
}

TEST(FrontendMemory, TenThousandStepLoopHasFlatMemory) {
  Tensor x = from_vector<float>(iota(1024, 0.001f), {1024});
  Stats at_1000;
  for (int step = 1; step <= 10000; ++step) {
    x = x * 0.999f + 0.001f;
    if (step % 100 == 0) x.eval();
    if (step == 1000) at_1000 = stats();
  }
  const Stats end = stats();
  EXPECT_EQ(end.live_values, at_1000.live_values);
  EXPECT_EQ(end.live_buffer_bytes, at_1000.live_buffer_bytes);
  EXPECT_NEAR(x.to_vector<float>()[0], 1 - std::pow(0.999, 10000) * 1, 1e-3);
}

// ---- capture and inspection -------------------------------------------------------------

TEST(FrontendCapture, TraceReturnsTheGraphInTextForm) {
  const Graph g = trace([](const Tensor& x) { return (x * 2).relu(); }, zeros({4}));
  EXPECT_EQ(print_graph(g),
            "graph @traced(%arg0: f32[4]) -> f32[4] {\n"
            "  %0 = scalar {slot = 0, value = 2.0} : f32[]\n"
            "  %1 = mul %arg0, %0 : f32[4]\n"
            "  %2 = relu %1 : f32[4]\n"
            "  return %2\n"
            "}\n");
  ASSERT_TRUE(parse_graph(print_graph(g))) << "kiln opt reads it";
  const Tensor w = from_vector<float>({1, 2}, {2});
  const Graph g2 = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + w, in[1].sum()}; },
      {zeros({2}), zeros({3}, DType::I32)});
  const std::string text = print_graph(g2);
  EXPECT_NE(text.find("graph @traced(%arg0: f32[2], %arg1: i32[3], %capture0: f32[2]) -> (f32[2], i64[])"),
            std::string::npos)
      << text;
  EXPECT_THROW(trace([](const Tensor& x) { return Tensor(x.exp()).eval(); }, zeros({2})), Error);
}

TEST(FrontendCapture, DumpShowsThePendingStream) {
  const Tensor x = from_vector<float>({1, 2}, {2});
  const Tensor y = (x + 1).exp();
  const std::string text = dump(y);
  EXPECT_EQ(text,
            "graph @pending(%in0: f32[2]) -> f32[2] {\n"
            "  %0 = scalar {slot = 0, value = 1.0} : f32[]\n"
            "  %1 = add %in0, %0 : f32[2]\n"
            "  %2 = exp %1 : f32[2]\n"
            "  return %2\n"
            "}\n");
  EXPECT_FALSE(y.is_evaluated()) << "dump executes nothing";
  ASSERT_TRUE(parse_graph(text));
}

// ---- threads ----------------------------------------------------------------------------

TEST(FrontendThreads, TwoThreadsOnTheirOwnTensors) {
  auto work = [](float seed, std::vector<float>* out) {
    Tensor x = from_vector<float>(iota(256, 0.01f, seed), {16, 16});
    for (int i = 0; i < 50; ++i) {
      x = (x * 0.5f + 1).tanh().softmax(-1) * 16;
      if (i % 10 == 0) sync();
    }
    *out = x.sum({1}).to_vector<float>();
  };
  std::vector<float> a, b, a_alone;
  std::thread t1(work, 0.0f, &a), t2(work, 1.0f, &b);
  t1.join();
  t2.join();
  work(0.0f, &a_alone);
  EXPECT_EQ(a, a_alone) << "concurrent and solo runs agree bit for bit";
  for (float v : b) EXPECT_NEAR(v, 16, 1e-3);
  // An evaluated tensor may be read from another thread.
  const Tensor shared = from_vector<float>(iota(4), {4}).exp().eval();
  std::vector<float> seen;
  std::thread reader([&] { seen = (shared + 1).to_vector<float>(); });
  reader.join();
  EXPECT_FLOAT_EQ(seen[0], 2);
}

}  // namespace
}  // namespace kiln
