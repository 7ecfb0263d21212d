// Gradients: every differentiable op's rule against central finite differences in f64 on
// the reference interpreter, and the tape's behaviour (leaves, no_grad, detach, errors).
#include <pthread.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "kiln/frontend/autodiff.h"
#include "kiln/frontend/custom_op.h"
#include "kiln/frontend/lazy.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/text.h"
#include "test_util.h"

namespace kiln {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Uniform values in [lo, hi), the same for the same seed.
HostTensor uniform(const Shape& shape, double lo, double hi, uint64_t seed, DType dtype = DType::F64) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / static_cast<double>(1ull << 53);
  }
  HostTensor h = HostTensor::from_vector(v, shape);
  if (dtype == DType::F32) {
    std::vector<float> f(v.begin(), v.end());
    return HostTensor::from_vector(f, shape);
  }
  return h;
}

HostTensor values(std::vector<double> v, Shape shape) { return HostTensor::from_vector(v, std::move(shape)); }
HostTensor indices(std::vector<int64_t> v, Shape shape) { return HostTensor::from_vector(v, std::move(shape)); }

struct FdCase {
  std::string name;
  std::vector<OpKind> ops;          // the ops whose rules this case checks
  std::vector<HostTensor> inputs;   // f64 (or f32) inputs the gradient is taken for; others fixed
  std::vector<bool> wrt;            // which inputs take gradients
  Fn f;
  double step = 1e-6, tolerance = 1e-6;
};

std::vector<double> as_doubles(const HostTensor& h) {
  if (h.dtype() == DType::F32) {
    std::vector<float> f = h.to_vector<float>();
    return std::vector<double>(f.begin(), f.end());
  }
  return h.to_vector<double>();
}

HostTensor with_values(const HostTensor& like, const std::vector<double>& v) {
  if (like.dtype() == DType::F32) return HostTensor::from_vector(std::vector<float>(v.begin(), v.end()), like.shape());
  return HostTensor::from_vector(v, like.shape());
}

// sum(f(inputs) * w) with a fixed weight w, so every element of the result has its own
// gradient seed.
Tensor weighted_loss(const Tensor& out) {
  const HostTensor w = uniform(out.shape(), -1, 1, 99, out.dtype());
  return (out * from_host(w, out.device())).sum();
}

double loss_at(const FdCase& c, const std::vector<HostTensor>& inputs) {
  NoGradGuard no_grad;
  std::vector<Tensor> t;
  for (const HostTensor& h : inputs) t.push_back(from_host(h, Device::interp()));
  const Tensor l = weighted_loss(c.f(t));
  return l.dtype() == DType::F32 ? l.item<float>() : l.item<double>();
}

void check_gradients(const FdCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<Tensor> leaves;
  std::vector<Tensor> wrt;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    leaves.push_back(from_host(c.inputs[i], Device::interp()));
    if (c.wrt[i]) wrt.push_back(leaves.back().requires_grad_());
  }
  const Tensor out = c.f(leaves);
  ASSERT_TRUE(out.requires_grad()) << "no gradient flows to the result: an op lacks a rule";
  const std::vector<Tensor> grads = grad(weighted_loss(out), wrt);
  size_t k = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.wrt[i]) continue;
    ASSERT_EQ(grads[k].shape(), c.inputs[i].shape());
    const std::vector<double> analytic = as_doubles(grads[k++].host());
    const std::vector<double> base = as_doubles(c.inputs[i]);
    for (size_t e = 0; e < base.size(); ++e) {
      std::vector<HostTensor> plus = c.inputs, minus = c.inputs;
      std::vector<double> p = base, m = base;
      p[e] += c.step;
      m[e] -= c.step;
      plus[i] = with_values(c.inputs[i], p);
      minus[i] = with_values(c.inputs[i], m);
      const double numeric = (loss_at(c, plus) - loss_at(c, minus)) / (2 * c.step);
      EXPECT_NEAR(analytic[e], numeric, c.tolerance * (1 + std::abs(numeric)))
          << "input " << i << " element " << e;
    }
  }
}

Shape S(std::initializer_list<int64_t> d) { return Shape(std::vector<int64_t>(d)); }

std::vector<FdCase> cases() {
  std::vector<FdCase> out;
  auto unary = [&](std::string name, OpKind op, std::function<Tensor(const Tensor&)> f, double lo, double hi) {
    out.push_back({std::move(name), {op}, {uniform(S({3, 4}), lo, hi, 1)}, {true},
                   [f](const std::vector<Tensor>& x) { return f(x[0]); }});
  };
  unary("neg", OpKind::Neg, [](const Tensor& x) { return -x; }, -2, 2);
  unary("abs", OpKind::Abs, [](const Tensor& x) { return x.abs(); }, -2, 2);
  unary("exp", OpKind::Exp, [](const Tensor& x) { return x.exp(); }, -2, 2);
  unary("log", OpKind::Log, [](const Tensor& x) { return x.log(); }, 0.5, 2);
  unary("sqrt", OpKind::Sqrt, [](const Tensor& x) { return x.sqrt(); }, 0.5, 2);
  unary("rsqrt", OpKind::Rsqrt, [](const Tensor& x) { return x.rsqrt(); }, 0.5, 2);
  unary("sin", OpKind::Sin, [](const Tensor& x) { return x.sin(); }, -3, 3);
  unary("cos", OpKind::Cos, [](const Tensor& x) { return x.cos(); }, -3, 3);
  unary("tanh", OpKind::Tanh, [](const Tensor& x) { return x.tanh(); }, -2, 2);
  unary("asin", OpKind::Asin, [](const Tensor& x) { return x.asin(); }, -0.8, 0.8);
  unary("acos", OpKind::Acos, [](const Tensor& x) { return x.acos(); }, -0.8, 0.8);
  unary("atan", OpKind::Atan, [](const Tensor& x) { return x.atan(); }, -2, 2);
  unary("sigmoid", OpKind::Sigmoid, [](const Tensor& x) { return x.sigmoid(); }, -3, 3);
  unary("relu", OpKind::Relu, [](const Tensor& x) { return x.relu(); }, -2, 2);
  unary("erf", OpKind::Erf, [](const Tensor& x) { return x.erf(); }, -2, 2);
  unary("floor", OpKind::Floor, [](const Tensor& x) { return x.floor() * x; }, -3, 3);
  unary("ceil", OpKind::Ceil, [](const Tensor& x) { return x.ceil() * x; }, -3, 3);
  unary("round", OpKind::Round, [](const Tensor& x) { return x.round() * x; }, -3, 3);
  unary("sign", OpKind::Sign, [](const Tensor& x) { return x.sign() * x; }, -3, 3);
  // Through f32 and back: a step f32's rounding does not swamp.
  out.push_back({"cast", {OpKind::Cast}, {uniform(S({5}), -2, 2, 2)}, {true},
                 [](const std::vector<Tensor>& x) { return (x[0].to(DType::F32) * 3.0f).to(DType::F64); }, 1e-3,
                 1e-3});

  auto binary = [&](std::string name, OpKind op, std::function<Tensor(const Tensor&, const Tensor&)> f, Shape sa,
                    Shape sb, double lo_a, double hi_a, double lo_b, double hi_b) {
    out.push_back({std::move(name), {op}, {uniform(sa, lo_a, hi_a, 3), uniform(sb, lo_b, hi_b, 4)}, {true, true},
                   [f](const std::vector<Tensor>& x) { return f(x[0], x[1]); }});
  };
  binary("add, broadcast", OpKind::Add, [](const Tensor& a, const Tensor& b) { return a + b; }, S({3, 4}), S({4}), -1, 1, -1, 1);
  binary("sub, both broadcast", OpKind::Sub, [](const Tensor& a, const Tensor& b) { return a - b; }, S({3, 1}), S({1, 4}), -1, 1, -1, 1);
  binary("mul, broadcast", OpKind::Mul, [](const Tensor& a, const Tensor& b) { return a * b; }, S({2, 3, 4}), S({3, 1}), -1, 1, -1, 1);
  binary("div", OpKind::Div, [](const Tensor& a, const Tensor& b) { return a / b; }, S({3, 4}), S({3, 4}), -1, 1, 0.5, 2);
  binary("pow", OpKind::Pow, [](const Tensor& a, const Tensor& b) { return a.pow(b); }, S({3, 4}), S({3, 4}), 0.5, 2, -1, 2);
  binary("mod", OpKind::Mod, [](const Tensor& a, const Tensor& b) { return a.remainder(b); }, S({3, 4}), S({3, 4}), -3, 3, 0.7, 1.3);
  binary("fmod", OpKind::Fmod, [](const Tensor& a, const Tensor& b) { return a.fmod(b); }, S({3, 4}), S({3, 4}), -3, 3, 0.7, 1.3);
  binary("atan2", OpKind::Atan2, [](const Tensor& a, const Tensor& b) { return a.atan2(b); }, S({3, 4}), S({3, 4}), -2, 2, 0.3, 2);
  binary("maximum", OpKind::Max, [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, S({3, 4}), S({4}), -1, 1, -1, 1);
  binary("minimum", OpKind::Min, [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, S({3, 4}), S({4}), -1, 1, -1, 1);
  binary("matmul, batch broadcast", OpKind::Matmul, [](const Tensor& a, const Tensor& b) { return a.matmul(b); },
         S({2, 3, 4}), S({4, 5}), -1, 1, -1, 1);
  // A linear layer: the weight's transpose is a view, whose gradient the GEMM writes in the
  // weight's own layout.
  binary("matmul, batch times a transposed weight", OpKind::Matmul,
         [](const Tensor& a, const Tensor& w) { return a.matmul(w.transpose(0, 1)); }, S({2, 3, 4}), S({5, 4}), -1, 1,
         -1, 1);
  out.push_back({"where", {OpKind::Where},
                 {HostTensor::from_vector(std::vector<bool>{true, false, false, true}, S({4})), uniform(S({3, 4}), -1, 1, 5),
                  uniform(S({4}), -1, 1, 6)},
                 {false, true, true},
                 [](const std::vector<Tensor>& x) { return kiln::where(x[0], x[1], x[2]); }});

  auto reduce = [&](std::string name, OpKind op, std::function<Tensor(const Tensor&)> f, HostTensor in) {
    out.push_back({std::move(name), {op}, {std::move(in)}, {true}, [f](const std::vector<Tensor>& x) { return f(x[0]); }});
  };
  reduce("sum", OpKind::ReduceSum, [](const Tensor& x) { return x.sum({1}); }, uniform(S({3, 4, 2}), -1, 1, 7));
  reduce("sum, keepdim, two axes", OpKind::ReduceSum, [](const Tensor& x) { return x.sum({0, 2}, true); }, uniform(S({3, 4, 2}), -1, 1, 8));
  reduce("prod", OpKind::ReduceProd, [](const Tensor& x) { return x.prod({1}); }, uniform(S({3, 4}), 0.5, 1.5, 9));
  // Lanes with no zero, one zero and two zeros: the product is linear in each element, so
  // the differences are exact there too.
  reduce("prod with zeros", OpKind::ReduceProd, [](const Tensor& x) { return x.prod({1}, true); },
         values({1.5, 2, -1, 0, 3, 0.5, 0, 2, 0}, S({3, 3})));
  reduce("max", OpKind::ReduceMax, [](const Tensor& x) { return x.max({0}); }, uniform(S({4, 3}), -1, 1, 10));
  reduce("min", OpKind::ReduceMin, [](const Tensor& x) { return x.min({1}, true); }, uniform(S({4, 3}), -1, 1, 11));

  auto movement = [&](std::string name, OpKind op, std::function<Tensor(const Tensor&)> f, Shape shape) {
    out.push_back({std::move(name), {op}, {uniform(shape, -1, 1, 12)}, {true},
                   [f](const std::vector<Tensor>& x) { return f(x[0]); }});
  };
  movement("reshape", OpKind::Reshape, [](const Tensor& x) { return x.reshape({4, 3}).exp(); }, S({2, 6}));
  movement("permute", OpKind::Permute, [](const Tensor& x) { return x.permute({2, 0, 1}); }, S({2, 3, 4}));
  movement("expand", OpKind::Expand, [](const Tensor& x) { return x.expand({2, 3, 4}); }, S({3, 1}));
  movement("slice, step 2", OpKind::Slice, [](const Tensor& x) { return x.slice(1, 1, 6, 2); }, S({2, 7}));
  movement("slice, step -2", OpKind::Slice, [](const Tensor& x) { return x.slice(0, -1, 0, -2); }, S({6, 2}));
  movement("flip", OpKind::Slice, [](const Tensor& x) { return x.flip({0, 1}); }, S({3, 2}));
  movement("pad", OpKind::Pad, [](const Tensor& x) { return x.pad({1, 0}, {2, 3}, 0.5); }, S({2, 3}));
  movement("unfold", OpKind::Unfold, [](const Tensor& x) { return x.unfold(1, 3, 2, 2); }, S({2, 10}));
  movement("cumsum", OpKind::Cumsum, [](const Tensor& x) { return x.cumsum(1); }, S({2, 5}));
  movement("cumsum, reverse exclusive", OpKind::Cumsum, [](const Tensor& x) { return x.cumsum(0, true, true); }, S({4, 2}));
  out.push_back({"concat", {OpKind::Concat}, {uniform(S({2, 3}), -1, 1, 13), uniform(S({2, 1}), -1, 1, 14)}, {true, true},
                 [](const std::vector<Tensor>& x) { return cat({x[0], x[1], x[0]}, 1); }});
  // A negative index counts from the end; 7 is outside the axis and reads 0.
  out.push_back({"gather", {OpKind::Gather}, {uniform(S({3, 4}), -1, 1, 15), indices({0, 3, -1, 1, 1, 7}, S({3, 2}))},
                 {true, false}, [](const std::vector<Tensor>& x) { return x[0].gather(1, x[1]); }});

  auto scatter = [&](std::string name, std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f,
                     std::vector<int64_t> idx, double lo, double hi) {
    out.push_back({std::move(name), {OpKind::Scatter},
                   {uniform(S({3, 4}), lo, hi, 16), indices(std::move(idx), S({3, 2})), uniform(S({3, 2}), lo, hi, 17)},
                   {true, false, true},
                   [f](const std::vector<Tensor>& x) { return f(x[0], x[1], x[2]); }});
  };
  scatter("scatter", [](const Tensor& d, const Tensor& i, const Tensor& u) { return d.scatter(1, i, u); },
          {0, 2, 3, 1, -1, 0}, -1, 1);
  scatter("scatter add, repeated", [](const Tensor& d, const Tensor& i, const Tensor& u) { return d.scatter_add(1, i, u); },
          {1, 1, 3, 0, 2, 2}, -1, 1);
  scatter("scatter mul, repeated",
          [](const Tensor& d, const Tensor& i, const Tensor& u) { return d.scatter_reduce(1, i, u, ScatterReduce::Prod); },
          {1, 1, 3, 0, 2, 2}, 0.5, 1.5);
  scatter("scatter amax, repeated",
          [](const Tensor& d, const Tensor& i, const Tensor& u) { return d.scatter_reduce(1, i, u, ScatterReduce::Amax); },
          {1, 1, 3, 0, 2, 2}, -1, 1);
  scatter("scatter amin",
          [](const Tensor& d, const Tensor& i, const Tensor& u) { return d.scatter_reduce(1, i, u, ScatterReduce::Amin); },
          {1, 0, 3, 0, 2, 1}, -1, 1);
  // Zeros among the data and the updates of a product: one zero meeting at a position, two.
  out.push_back({"scatter mul with zeros", {OpKind::Scatter},
                 {values({1.5, 0, 2, -1, 0.5, 2, 3, 1}, S({2, 4})), indices({1, 1, 0, 3, 3, 2}, S({2, 3})),
                  values({0.5, 2, -2, 0, 1.5, 0}, S({2, 3}))},
                 {true, false, true},
                 [](const std::vector<Tensor>& x) { return x[0].scatter_reduce(1, x[1], x[2], ScatterReduce::Prod); }});

  auto conv = [&](std::string name, Shape x, Shape w, ConvOptions opt) {
    out.push_back({std::move(name), {OpKind::Conv}, {uniform(x, -1, 1, 18), uniform(w, -1, 1, 19)}, {true, true},
                   [opt](const std::vector<Tensor>& t) { return t[0].conv(t[1], opt); }});
  };
  conv("conv 2-D, stride 2, padded", S({2, 3, 5, 6}), S({4, 3, 3, 3}), {{2, 2}, {}, {1, 1}, {1, 0}, 1});
  conv("conv 2-D, grouped, dilated", S({1, 4, 7, 6}), S({6, 2, 2, 3}), {{1, 2}, {2, 1}, {0, 2}, {1, 0}, 2});
  conv("conv 1-D, padding past the kernel", S({2, 2, 5}), S({3, 2, 2}), {{3}, {}, {3}, {2}, 1});
  conv("conv depthwise", S({1, 3, 5, 5}), S({3, 1, 3, 3}), {{1, 1}, {}, {1, 1}, {1, 1}, 3});
  conv("conv 3-D", S({1, 2, 3, 4, 3}), S({2, 2, 2, 2, 2}), {{1, 2, 1}, {}, {0, 1, 1}, {0, 0, 1}, 1});

  // The attention op (f32 only): what fuse-attention makes of softmax(q k^T s + b) v. Its
  // differences are taken in f32, with a step and tolerance to match.
  static const Graph attention = [] {
    auto g = parse_graph(R"(graph @attn(%q: f32[2,3,4], %k: f32[2,5,4], %v: f32[2,5,3], %b: f32[3,5]) -> f32[2,3,3] {
  %y = attention %q, %k, %v, %b {scale = 0.5} : f32[2,3,3]
  return %y
})");
    return std::move(*g);
  }();
  out.push_back({"attention", {OpKind::Attention},
                 {uniform(S({2, 3, 4}), -1, 1, 20, DType::F32), uniform(S({2, 5, 4}), -1, 1, 21, DType::F32),
                  uniform(S({2, 5, 3}), -1, 1, 22, DType::F32), uniform(S({3, 5}), -1, 1, 23, DType::F32)},
                 {true, true, true, true},
                 [](const std::vector<Tensor>& x) { return call(attention, x)[0]; }, 1e-2, 2e-3});

  // Composites: the frontend's decompositions, through the primitives' rules.
  out.push_back({"softmax, log_softmax, layer_norm, gelu", {},
                 {uniform(S({3, 5}), -2, 2, 24), uniform(S({5}), -1, 1, 25), uniform(S({5}), -1, 1, 26)},
                 {true, true, true},
                 [](const std::vector<Tensor>& x) {
                   return layer_norm(x[0].softmax(-1) + x[0].log_softmax(0), x[1], x[2]).gelu() +
                          x[0].gelu(GeluApproximation::Tanh) * x[0].var({1}, true);
                 }});
  return out;
}

class FiniteDifferences : public ::testing::TestWithParam<size_t> {};

TEST_P(FiniteDifferences, GradientMatches) { check_gradients(cases()[GetParam()]); }

INSTANTIATE_TEST_SUITE_P(Autodiff, FiniteDifferences, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           std::string name = cases()[param.param].name;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// Every op is either checked above or declared without a gradient in ops.def, and those are
// the ops whose result is never a float (or that have no operands): a new op without a rule,
// or a rule without a case, fails here.
TEST(Autodiff, EveryDifferentiableOpHasACheckedRule) {
  std::set<OpKind> checked{OpKind::Custom};  // a user's backward: Autodiff.CustomOpTakesTheUsersBackward
  for (const FdCase& c : cases()) checked.insert(c.ops.begin(), c.ops.end());
  const std::set<OpKind> never_float{OpKind::IsNan, OpKind::IsInf, OpKind::Not, OpKind::Shl, OpKind::Shr,
                                     OpKind::Eq,    OpKind::Ne,    OpKind::Lt,  OpKind::Le,  OpKind::Gt,
                                     OpKind::Ge,    OpKind::And,   OpKind::Or,  OpKind::ArgMax,
                                     OpKind::ArgMin, OpKind::Argsort};
  for (const OpInfo& op : all_ops()) {
    if (op.category == OpCategory::Source || never_float.count(op.kind)) {
      EXPECT_FALSE(differentiable(op.kind)) << op.name << " is declared with a gradient but cannot have one";
      continue;
    }
    EXPECT_TRUE(differentiable(op.kind)) << op.name << " has no gradient rule in ops.def";
    EXPECT_TRUE(checked.count(op.kind)) << op.name << " has no finite-difference case in autodiff_test.cpp";
  }
}

// ---- the tape ----------------------------------------------------------------------------

TEST(Autodiff, BackwardAccumulatesIntoLeavesAndGradLeavesThemAlone) {
  Tensor x = from_vector<float>({1, 2, 3}, S({3})).requires_grad_();
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
  const Tensor y = (x * x).sum();
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  const std::vector<Tensor> g = grad(y, {x}, {}, false, /*retain_graph=*/true);
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(x.grad().defined());
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 8, 12}));
  // The second backward dropped what the tape saved: a third cannot go through it.
  EXPECT_THROW(y.backward(), Error);
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autodiff, GradientsOfIntermediatesAndSharedValues) {
  const Tensor x = from_vector<double>({0.5, -1.5}, S({2})).requires_grad_();
  const Tensor h = x.exp();
  const Tensor y = (h * h + h).sum();  // dy/dh = 2h + 1
  const std::vector<Tensor> g = grad(y, {h, x});
  const std::vector<double> hv = h.to_vector<double>();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(g[0].to_vector<double>()[i], 2 * hv[i] + 1, 1e-12);
    EXPECT_NEAR(g[1].to_vector<double>()[i], (2 * hv[i] + 1) * hv[i], 1e-12);
  }
}

TEST(Autodiff, NoGradAndDetachStopGradients) {
  const Tensor x = from_vector<float>({1, 2}, S({2})).requires_grad_();
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    EXPECT_FALSE((x * 2.0f).requires_grad());
  }
  EXPECT_TRUE(grad_enabled());
  const Tensor d = (x * 3.0f).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{3, 6}));
  const Tensor y = (x * d).sum();  // d is a constant here
  EXPECT_EQ(grad(y, {x})[0].to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_FALSE(x.detach().requires_grad());
}

TEST(Autodiff, IntegerResultsCarryNoGradient) {
  const Tensor x = from_vector<float>({1, 5, 2}, S({3})).requires_grad_();
  EXPECT_FALSE(x.argmax(0).requires_grad());
  EXPECT_FALSE((x > 1.0f).requires_grad());
  // Sorting: the values are a gather by the argsort's positions, and take its gradient.
  const auto [sorted, order] = x.sort();
  EXPECT_TRUE(sorted.requires_grad());
  const Tensor y = (sorted * from_vector<float>({1, 10, 100}, S({3}))).sum();
  EXPECT_EQ(grad(y, {x})[0].to_vector<float>(), (std::vector<float>{1, 100, 10}));
}

TEST(Autodiff, ErrorsNameWhatIsWrong) {
  const Tensor x = from_vector<float>({1, 2}, S({2}));
  EXPECT_THROW(
      {
        try {
          (x * 2.0f).backward();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("does not require a gradient"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  Tensor p = from_vector<float>({1, 2}, S({2})).requires_grad_();
  EXPECT_THROW(
      {
        try {
          (p * 2.0f).backward();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("one element"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(from_vector<int32_t>({1}, S({1})).requires_grad_(), Error);
  EXPECT_THROW((p * 2.0f).requires_grad_(), Error);
  const Tensor q = from_vector<float>({1, 2}, S({2})).requires_grad_();
  EXPECT_THROW(grad(p.sum(), {q}), Error);
  EXPECT_EQ(grad(p.sum(), {q}, {}, /*allow_unused=*/true)[0].to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_THROW((p * 2.0f).backward(from_vector<float>({1}, S({1}))), Error);
}

TEST(Autodiff, CustomOpTakesTheUsersBackward) {
  auto softplus = custom_op("softplus_grad_test", CustomSource::c(R"(
      #include <math.h>
      float softplus_grad_test(float x) { return log1pf(expf(x)); })"),
                            "(f32) -> f32");
  const Tensor x = from_vector<float>({-1, 0.5f, 2}, S({3})).requires_grad_();
  EXPECT_THROW(
      {
        try {
          softplus(x).sum().backward();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("@softplus_grad_test"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  softplus.set_backward([](const std::vector<Tensor>& in, const Tensor& g) {
    return std::vector<Tensor>{g * in[0].sigmoid()};
  });
  const std::vector<float> got = grad((softplus(x) * 2.0f).sum(), {x})[0].to_vector<float>();
  const std::vector<float> want = grad(((x.exp() + 1.0f).log() * 2.0f).sum(), {x})[0].to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

// A sync between forward and backward keeps what the backward needs and cannot cheaply
// compute again (the product, saved by the tanh's node) and not what it can (the tanh,
// saved by the mul's node: recomputed from the kept product).
TEST(Autodiff, ASyncBeforeBackwardKeepsProductsAndRecomputesElementwise) {
  const Tensor x = randn(S({32, 64}), 1).eval().requires_grad_();
  const Tensor w = randn(S({64, 48}), 2).eval();
  const int64_t before = stats().live_buffer_bytes;
  const Tensor loss = (x.matmul(w).tanh() * 0.5f).sum();
  sync();
  EXPECT_EQ(stats().live_buffer_bytes - before, 32 * 48 * 4 + 4);
  const std::vector<float> g = grad(loss, {x})[0].to_vector<float>();
  std::vector<float> want;
  {
    NoGradGuard no_grad;
    const Tensor t = x.matmul(w).tanh();
    want = ((1 - t * t) * 0.5f).matmul(w.transpose(0, 1)).to_vector<float>();
  }
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-5f * (1 + std::abs(want[i])));
}

// On a thread with a 256 KiB stack, where freeing 20,000 nodes by recursion (a few frames of
// a hundred bytes or more each) would overflow it. Nothing is evaluated: the pending cap is
// lifted, so the test frees what it recorded and compiles nothing.
TEST(Autodiff, ALongChainIsFreedWithoutRecursion) {
  struct Chain {
    static void* run(void*) {
      const uint32_t cap = max_pending();
      set_max_pending(std::numeric_limits<uint32_t>::max());
      {
        Tensor x = from_vector<float>({1}, S({1})).requires_grad_();
        Tensor y = x;
        for (int i = 0; i < 20000; ++i) y = y * 1.0f;
        y = Tensor();  // frees 20,000 nodes and their values
      }
      set_max_pending(cap);
      return nullptr;
    }
  };
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 << 10), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, &Chain::run, nullptr), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
}

}  // namespace
}  // namespace kiln
