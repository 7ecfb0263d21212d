// The text form: round trip on every IR file in the repository, golden printing of built
// graphs, and parser diagnostics.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace kiln {
namespace {

std::vector<std::filesystem::path> ir_files() {
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"tests/ir", "examples"})
    for (const auto& e : std::filesystem::recursive_directory_iterator(std::filesystem::path(KILN_SOURCE_DIR) / dir))
      if (e.path().extension() == ".kir") files.push_back(e.path());
  return files;
}

TEST(TextRoundTrip, EveryIrFileInTheRepository) {
  const auto files = ir_files();
  ASSERT_GE(files.size(), 2u);
  int graphs = 0;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (const TextChunk& chunk : split_input(text)) {
      auto g = parse_graph(chunk.text, path.string(), chunk.first_line);
      if (!g) continue;  // negative tests: their diagnostics are checked by lit
      const std::string once = print_graph(*g);
      auto again = parse_graph(once, "printed");
      ASSERT_TRUE(again) << path << ": printed form does not parse: " << again.error().str() << "\n" << once;
      EXPECT_EQ(print_graph(*again), once) << path;
      ++graphs;
    }
  }
  EXPECT_GT(graphs, 0);
}

TEST(TextPrinter, BuiltGraphGolden) {
  Graph g("mlp_tail");
  const ValueId x = g.add_input("x", {DType::F32, {2, 3}});
  Attrs reduce = Graph::make_attrs(OpKind::ReduceMax);
  reduce[0].present = true;
  reduce[0].ints = {1};
  reduce[1].present = true;
  const ValueId m = *g.add(OpKind::ReduceMax, std::array{x}, reduce);
  const ValueId s = *g.add(OpKind::Sub, std::array{x, m});
  Attrs c = Graph::make_attrs(OpKind::Constant);
  c[0].present = true;
  c[0].scalar = Scalar::from_float(0.5);
  const TensorType scalar_f32{DType::F32, {}};
  const ValueId half = *g.add(OpKind::Constant, {}, c, &scalar_f32, "half");
  const ValueId y = *g.add(OpKind::Mul, std::array{s, half});
  const ValueId idx = *g.add(OpKind::ArgMax, std::array{y}, [] {
    Attrs a = Graph::make_attrs(OpKind::ArgMax);
    a[0].present = true;
    a[0].ints = {1};
    return a;
  }());
  g.set_outputs({y, idx});
  ASSERT_TRUE(verify(g));
  EXPECT_EQ(print_graph(g),
            "graph @mlp_tail(%x: f32[2,3]) -> (f32[2,3], i64[2]) {\n"
            "  %0 = reduce_max %x {axes = [1], keepdim} : f32[2,1]\n"
            "  %1 = sub %x, %0 : f32[2,3]\n"
            "  %half = constant {value = 0.5} : f32[]\n"
            "  %2 = mul %1, %half : f32[2,3]\n"
            "  %3 = argmax %2 {axes = [1]} : i64[2]\n"
            "  return %2, %3\n"
            "}\n");
}

TEST(TextPrinter, GeneratedNamesAvoidGivenOnes) {
  Graph g;
  const ValueId x = g.add_input("0", {DType::F32, {2}});
  const ValueId a = *g.add(OpKind::Exp, std::array{x});
  const ValueId b = *g.add(OpKind::Neg, std::array{a}, {}, nullptr, "1");
  g.set_outputs({b});
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("%2 = exp %0"), std::string::npos) << text;
  ASSERT_TRUE(parse_graph(text)) << text;
}

TEST(TextPrinter, FloatScalarsPrintShortestForTheirType) {
  EXPECT_EQ(format_scalar(Scalar::from_float(0.1f), DType::F32), "0.1");
  EXPECT_EQ(format_scalar(Scalar::from_float(0.1), DType::F64), "0.1");
  EXPECT_EQ(format_scalar(Scalar::from_float(2), DType::F32), "2.0");
  EXPECT_EQ(format_scalar(Scalar::from_float(1e-5), DType::F64), "1e-05");
  EXPECT_EQ(format_scalar(Scalar::from_float(-HUGE_VAL), DType::F32), "-inf");
  EXPECT_EQ(format_scalar(Scalar::from_int(1), DType::Bool), "true");
  EXPECT_EQ(format_scalar(Scalar::from_int(-3), DType::I64), "-3");
}

struct BadInput {
  const char* text;
  const char* diagnostic;
};

TEST(TextParser, DiagnosticsCarryFileLineAndColumn) {
  const BadInput cases[] = {
      {"graph @f(%x: f32[2]) -> f32[2] {\n  %y = exp %x f32[2]\n  return %y\n}",
       "t.kir:2:15: error: expected ':' and the result type, found 'f32'"},
      {"graph @f(%x: f32[2]) -> f32[2] {\n  %y = exp %x : f32[3]\n  return %y\n}",
       "t.kir:2:8: error: 'exp' result is declared f32[3] but its operands give f32[2]"},
      {"graph @f(%x: f32[2]) -> f32[2] {\n  %y = exp %x : f32[2]\n  %y = neg %x : f32[2]\n  return %y\n}",
       "t.kir:3:3: error: value '%y' is defined twice (first at line 2, column 3)"},
      {"graph @f(%x: f32[2]) -> f32[2] {\n  return %x\n", "t.kir:3:1: error: expected '}' after 'return', found end of file"},
      {"graph @f(%x: q8[2]) -> f32[2] {\n  return %x\n}",
       "t.kir:1:14: error: unknown element type 'q8' (expected bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64)"},
  };
  for (const BadInput& c : cases) {
    auto g = parse_graph(c.text, "t.kir");
    ASSERT_FALSE(g) << c.text;
    EXPECT_EQ(g.error().str(), c.diagnostic);
  }
}

TEST(TextParser, SplitInputKeepsLineNumbers) {
  const std::string text = "a\n// -----\nb\nc\n// -----\nd";
  const auto chunks = split_input(text);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].first_line, 1);
  EXPECT_EQ(chunks[1].first_line, 3);
  EXPECT_EQ(chunks[1].text, "b\nc\n");
  EXPECT_EQ(chunks[2].first_line, 6);
  auto g = parse_graph("\n\ngraph @f() -> f32[] {\n  %c = constant {} : f32[]\n  return %c\n}", "s.kir", 10);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().loc.line, 13);
}

TEST(GraphBuilder, TypeErrorsAtRecordTime) {
  Graph g;
  const ValueId a = g.add_input("a", {DType::F32, {3, 4}});
  const ValueId b = g.add_input("b", {DType::F32, {5}});
  auto bad = g.add(OpKind::Add, std::array{a, b});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "'add' operands f32[3,4] and f32[5] cannot broadcast");
  EXPECT_EQ(g.size(), 2u) << "a rejected node is not added";
  auto arity = g.add(OpKind::Add, std::array{a});
  ASSERT_FALSE(arity);
  EXPECT_EQ(arity.error().message, "'add' takes 2 operands, got 1");
  auto undeclared = g.add(OpKind::Reshape, std::array{a});
  ASSERT_FALSE(undeclared);
  EXPECT_EQ(undeclared.error().message, "'reshape' needs a declared result type");
}

TEST(Dot, DrawsEveryNodeAndEdge) {
  const Graph g = test::parse_or_fail(
      "graph @f(%x: f32[2]) -> f32[2] {\n  %y = exp %x : f32[2]\n  %z = add %x, %y : f32[2]\n  return %z\n}");
  const std::string dot = graph_to_dot(g);
  EXPECT_NE(dot.find("digraph \"f\""), std::string::npos);
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> n2 [label=\"1\"]"), std::string::npos);
  EXPECT_NE(dot.find("label=\"exp\\nf32[2]\""), std::string::npos) << dot;
}

// A fused graph's kernels are clusters around their members, labelled with the planner's
// note (they were not drawn: a fused graph looked like its input).
TEST(Dot, DrawsKernelsAsClustersWithTheirNotes) {
  const Graph g = test::parse_or_fail(R"(graph @f(%x: f32[4,4]) -> f32[4,4] {
  kernel @k0(%x) -> (%a) note "a \"quoted\" reason" {
    %a = reduce_sum %x {axes = [1], keepdim} : f32[4,1]
  }
  kernel @k1(%x, %a) -> (%y) {
    %y = sub %x, %a : f32[4,4]
  }
  return %y
})");
  const std::string dot = graph_to_dot(g);
  EXPECT_NE(dot.find("subgraph cluster_k0 {\n    label=\"kernel @k0\\na \\\"quoted\\\" reason\""), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("subgraph cluster_k1 {\n    label=\"kernel @k1\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("    n2;\n  }"), std::string::npos) << dot;
}

}  // namespace
}  // namespace kiln
