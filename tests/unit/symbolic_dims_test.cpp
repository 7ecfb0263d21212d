// Symbolic dims (kiln/ir/dim.h) and binding them (kiln/ir/symbolic.h).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "kiln/engine/engine.h"
#include "kiln/frontend/lazy.h"
#include "kiln/frontend/tensor.h"
#include "kiln/ir/dim.h"
#include "kiln/ir/interpreter.h"
#include "kiln/ir/symbolic.h"
#include "kiln/ir/text.h"

namespace kiln {
namespace {

int64_t D(std::string_view text) {
  std::string error;
  const std::optional<int64_t> d = parse_dim(text, &error);
  EXPECT_TRUE(d.has_value()) << text << ": " << error;
  return d.value_or(0);
}

TEST(SymbolicDims, EqualPolynomialsAreOneDim) {
  const int64_t n = dim_symbol("n"), m = dim_symbol("m");
  EXPECT_TRUE(is_symbolic_dim(n));
  EXPECT_FALSE(is_symbolic_dim(0));
  EXPECT_FALSE(is_symbolic_dim(-1));  // an invalid dim stays invalid, not a size
  EXPECT_EQ(n, dim_symbol("n"));
  EXPECT_NE(n, m);
  EXPECT_EQ(*dim_add(n, m), *dim_add(m, n));
  EXPECT_EQ(*dim_mul(*dim_add(n, 1), *dim_add(n, 1)), D("n*n + 2*n + 1"));
  EXPECT_EQ(*dim_sub(*dim_add(n, m), n), m);
  EXPECT_EQ(*dim_sub(n, n), 0);  // a polynomial that cancels is a number
  EXPECT_EQ(*dim_mul(n, 0), 0);
  EXPECT_EQ(*dim_add(3, 4), 7);
  EXPECT_EQ(D("t*b*768"), *dim_mul(768, *dim_mul(dim_symbol("b"), dim_symbol("t"))));
}

TEST(SymbolicDims, TextIsCanonicalAndParsesBack) {
  for (const char* text : {"n", "2*n+1", "n*n-3", "b*t", "768*b*t", "m+n", "-n+4", "n-1", "4*n*n*t-2*m+7"}) {
    const int64_t d = D(text);
    EXPECT_EQ(dim_str(d), text);
    EXPECT_EQ(D(dim_str(d)), d);
  }
  EXPECT_EQ(dim_str(D("1 + n")), "n+1");
  EXPECT_EQ(dim_str(D("t * b")), "b*t");
  EXPECT_EQ(dim_str(D("n*m*n + m*n*n")), "2*m*n*n");
  EXPECT_EQ(dim_symbols(D("2*t*b + a")), (std::vector<std::string>{"a", "b", "t"}));
  std::string error;
  EXPECT_FALSE(parse_dim("n/2", &error).has_value());
  EXPECT_NE(error.find("unexpected '/'"), std::string::npos) << error;
  EXPECT_FALSE(parse_dim("", &error).has_value());
  EXPECT_FALSE(parse_dim("9223372036854775808*n", &error).has_value());
  EXPECT_FALSE(parse_dim("3*n*", &error).has_value());
}

TEST(SymbolicDims, ExactDivisionAndOverflow) {
  const int64_t n = dim_symbol("n"), t = dim_symbol("t");
  EXPECT_EQ(*dim_exact_div(D("768*n"), 12), D("64*n"));
  EXPECT_EQ(*dim_exact_div(D("n*t + 2*t"), t), D("n+2"));
  EXPECT_FALSE(dim_exact_div(D("n+1"), 2).has_value());
  EXPECT_FALSE(dim_exact_div(n, t).has_value());
  EXPECT_FALSE(dim_mul(D("4611686018427387904*n"), 2).has_value());  // a coefficient past int64
  EXPECT_FALSE(dim_add(INT64_MAX, 1).has_value());
}

TEST(SymbolicDims, ValuesUnderBindings) {
  const DimBindings b{{"n", 3}, {"t", 5}};
  EXPECT_EQ(dim_value(D("2*n*t - n + 1"), b), 28);
  EXPECT_EQ(dim_value(7, {}), 7);
  EXPECT_FALSE(dim_value(D("m+1"), b).has_value());
  EXPECT_FALSE(dim_value(D("4611686018427387904*n"), b).has_value());
}

Graph parse(const char* text) {
  Expected<Graph> g = parse_graph(text, "test.kir");
  EXPECT_TRUE(static_cast<bool>(g)) << (g ? "" : g.error().str());
  return g ? std::move(*g) : Graph();
}

constexpr const char* kRows = R"(graph @rows(%x: f32[n, 4], %y: f32[n, 4]) -> f32[2*n, 4] {
  %s = add %x, %y : f32[n, 4]
  %c = concat %s, %y {axis = 0} : f32[2*n, 4]
  return %c
})";

TEST(SymbolicDims, InputsBindTheSizesAndTheBoundGraphIsVerifiedAgain) {
  const Graph g = parse(kRows);
  EXPECT_TRUE(has_symbolic_dims(g));
  const std::vector<TensorType> inputs{{DType::F32, {3, 4}}, {DType::F32, {3, 4}}};
  Expected<Graph> bound = specialize_for(g, inputs);
  ASSERT_TRUE(static_cast<bool>(bound)) << bound.error().str();
  EXPECT_FALSE(has_symbolic_dims(*bound));
  EXPECT_EQ(bound->type(bound->outputs()[0]).str(), "f32[6,4]");
  // Sizes that disagree, shapes that do not fit, sizes nothing binds.
  Expected<Graph> bad = specialize_for(g, std::vector<TensorType>{{DType::F32, {3, 4}}, {DType::F32, {2, 4}}});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().message, "size n of @rows is 3 from %x dim 0 and 2 from %y dim 0 (input %y is f32[2,4])");
  bad = specialize_for(g, std::vector<TensorType>{{DType::F32, {3, 5}}, {DType::F32, {3, 5}}});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().message, "input %x of @rows is f32[3,5], which does not fit f32[n,4]");
  const Graph only_sums = parse("graph @g(%x: f32[2*n]) -> f32[2*n] {\n  return %x\n}");
  bad = specialize_for(only_sums, std::vector<TensorType>{{DType::F32, {6}}});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().message.find("no input dim is n alone"), std::string::npos) << bad.error().message;
  // What the symbolic form could not check is checked on the bound graph.
  const Graph reduce = parse("graph @g(%x: f32[n, 4]) -> f32[4] {\n  %m = reduce_max %x {axes = [0]} : f32[4]\n  return %m\n}");
  bad = specialize(reduce, {{"n", 0}});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().str(), "test.kir:2:8: error: 'reduce_max' of f32[0,4] reduces an empty axis 0, which has no identity");
  bad = specialize(g, {});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().message, "graph @rows: no size is given for n");
}

// The reference interpreter, given a symbolic graph, computes the graph its inputs' sizes
// make (it used to compute with the numbers symbolic dims are held as).
TEST(SymbolicDims, TheInterpreterBindsFromItsInputs) {
  const Graph g = parse(kRows);
  HostTensor x(TensorType{DType::F32, {2, 4}});
  for (int64_t i = 0; i < 8; ++i) x.set_double(i, static_cast<double>(i));
  const std::vector<HostTensor> out = interpret(g, std::vector<HostTensor>{x, x});
  EXPECT_EQ(out[0].type().str(), "f32[4,4]");
  EXPECT_EQ(out[0].get_double(7), 14.0);
  EXPECT_THROW(interpret(g, std::vector<HostTensor>{x, HostTensor(TensorType{DType::F32, {3, 4}})}), Error);
}

// Engines bind a symbolic graph to the sizes of its inputs; kiln::call records the graph
// those sizes make. Any size runs without declaring it up front.
TEST(SymbolicDims, EveryDeviceRunsAGraphAtTheSizesItIsGiven) {
  const Graph g = parse(kRows);
  for (Device d : registered_devices()) {
    SCOPED_TRACE(d.str());
    for (int64_t n : {0, 1, 5, 37}) {
      HostTensor x(TensorType{DType::F32, {n, 4}}), y(TensorType{DType::F32, {n, 4}});
      for (int64_t i = 0; i < x.numel(); ++i) {
        x.set_double(i, static_cast<double>(i));
        y.set_double(i, 0.5 * static_cast<double>(i));
      }
      const std::vector<HostTensor> out = run_on_host(d, g, std::vector<HostTensor>{x, y});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].type().str(), fmt::format("f32[{},4]", 2 * n));
      for (int64_t i = 0; i < x.numel(); ++i) {
        EXPECT_EQ(out[0].get_double(i), 1.5 * static_cast<double>(i));
        EXPECT_EQ(out[0].get_double(x.numel() + i), 0.5 * static_cast<double>(i));
      }
      const std::vector<Tensor> called = call(g, {from_host(x, d), from_host(y, d)});
      EXPECT_EQ(called[0].shape(), (Shape{2 * n, 4}));
      EXPECT_EQ(called[0].to(Device::interp()).host().to_vector<float>(), out[0].to_vector<float>());
    }
  }
}

}  // namespace
}  // namespace kiln
