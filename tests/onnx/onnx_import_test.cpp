// tests/unit/onnx_import_test.cpp - the ONNX importer: its errors, options and weights.
// Models are built here with the protobuf classes; ONNX's own tests run in tests/onnx.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <variant>
#include <fstream>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "kiln/kiln.h"
#include "model_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::onnx::TensorProto;
using test::ModelBuilder;

void add_attr_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

std::string error_of(const std::string& path, const onnx::ImportOptions& options = {}) {
  auto m = onnx::import_model(path, options);
  return m ? std::string("(imported)") : m.error().message;
}

TEST(OnnxImport, AnUnsupportedOpIsAnErrorNamingTheNode) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 3, 8, 8});
  b.node("Relu", {"x"}, {"r"}, "act");
  b.node("LpNormalization", {"r"}, {"y"}, "norm");
  b.output("y");
  const std::string path = b.save();
  EXPECT_THROW(onnx::load(path), onnx::Unsupported);
  EXPECT_EQ(error_of(path), path + ": node 'norm' (LpNormalization, opset 17): op LpNormalization is not supported");
}

TEST(OnnxImport, UnsupportedDtypesAndAttributesAreNamed) {
  ModelBuilder b;
  b.input("x", TensorProto::COMPLEX64, {4});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", TensorProto::COMPLEX64);
  const std::string path = b.save();
  EXPECT_THROW(onnx::load(path), onnx::Unsupported);
  EXPECT_NE(error_of(path).find("input 'x' has element type COMPLEX64, which kiln does not support"), std::string::npos)
      << error_of(path);

  // An attribute value kiln does not take: BatchNormalization's per-element statistics.
  ModelBuilder c;
  c.input("x", TensorProto::FLOAT, {2, 3, 4});
  for (const char* p : {"s", "b", "m", "v"}) c.initializer(p, {3}, std::vector<float>(3, 1.f));
  add_attr_int(c.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}, "bn"), "spatial", 0);
  c.output("y");
  EXPECT_NE(error_of(c.save()).find("node 'bn' (BatchNormalization, opset 17): spatial = 0 (statistics per element) "
                                    "is not supported"),
            std::string::npos)
      << error_of(c.save());

  ModelBuilder d;
  d.input("x", TensorProto::FLOAT, {2, 3});
  add_attr_int(d.node("Relu", {"x"}, {"y"}, "r"), "frobnicate", 1);
  d.output("y");
  EXPECT_NE(error_of(d.save()).find("attribute 'frobnicate' of Relu is not supported"), std::string::npos);
}

TEST(OnnxImport, SymbolicDimsNeedAShape) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {std::string("N"), 4});
  b.node("Neg", {"x"}, {"y"});
  b.output("y");
  const std::string path = b.save();
  EXPECT_NE(error_of(path).find("input 'x' has the symbolic dim 'N'"), std::string::npos) << error_of(path);
  onnx::ImportOptions o;
  o.input_shapes["x"] = Shape{3, 4};
  const onnx::Model m = onnx::load(path, o);
  EXPECT_EQ(m.graph.type(m.graph.inputs()[0]).str(), "f32[3,4]");
}

TEST(OnnxImport, AShapeFromAModelInputIsFixedByItsValue) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 6});
  b.input("shape", TensorProto::INT64, {2});
  b.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.output("y");
  const std::string path = b.save();
  EXPECT_NE(error_of(path).find("node 'rs' (Reshape, opset 17): its shape ('shape') is the model input 'shape'"),
            std::string::npos)
      << error_of(path);
  onnx::ImportOptions o;
  o.input_values["shape"] = HostTensor::from_vector(std::vector<int64_t>{3, -1}, Shape{2});
  const onnx::Model m = onnx::load(path, o);
  ASSERT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.graph.type(m.graph.outputs()[0]).str(), "f32[3,4]");
}

// A value computed from a model input (shape + 0 -> Reshape) is known once that input's value
// is given; without it, the error says the value comes from the model's inputs.
TEST(OnnxImport, AValueComputedFromAFixedInputIsKnown) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 6});
  b.input("shape", TensorProto::INT64, {2});
  b.initializer_i64("zeros", {0, 0});
  b.node("Add", {"shape", "zeros"}, {"target"});
  b.node("Reshape", {"x", "target"}, {"y"}, "rs");
  b.output("y");
  const std::string path = b.save();
  EXPECT_NE(error_of(path).find("its shape ('target') is computed from the model's inputs at run time"),
            std::string::npos)
      << error_of(path);
  onnx::ImportOptions o;
  o.input_values["shape"] = HostTensor::from_vector(std::vector<int64_t>{4, 3}, Shape{2});
  const onnx::Model m = onnx::load(path, o);
  ASSERT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.graph.type(m.graph.outputs()[0]).str(), "f32[4,3]");
}

// The numbers a converter computes with (GatherND's `index < 0`, `index + extent`) are
// constants of the imported graph, not launch-time scalars: a model's numbers are fixed, and
// a fused kernel of many would outgrow Vulkan's push constants.
TEST(OnnxImport, NumbersAreConstantsNotLaunchScalars) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3});
  b.input("i", TensorProto::INT64, {4, 2});
  b.node("GatherND", {"x", "i"}, {"y"});
  b.output("y");
  const onnx::Model m = onnx::load(b.save());
  bool constants = false;
  for (const Node& n : m.graph.nodes()) {
    EXPECT_NE(n.op, OpKind::ScalarParam) << print_graph(m.graph);
    constants = constants || (n.op == OpKind::Constant && n.attr("value").present);
  }
  EXPECT_TRUE(constants) << print_graph(m.graph);
}

// Shape -> Gather-free arithmetic -> Reshape: values computed while importing.
TEST(OnnxImport, ShapeComputationsFoldWhileImporting) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3, 4});
  b.initializer_i64("minus_one", {-1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Slice", {"s", "zero", "one"}, {"lead"});
  b.initializer_i64("zero", {0});
  b.initializer_i64("one", {1});
  b.node("Concat", {"lead", "minus_one"}, {"target"})->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y");
  // The initializers come after their first use in node order, which ONNX allows.
  const onnx::Model m = onnx::load(b.save());
  EXPECT_EQ(m.graph.type(m.graph.outputs()[0]).str(), "f32[2,12]");
}

TEST(OnnxImport, WeightsAsParametersOrInlineComputeTheSame) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 3});
  std::vector<float> w(3 * 100);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.f;
  b.initializer("w", {3, 100}, w);
  b.initializer("b", {100}, std::vector<float>(100, 0.5f));
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"xw", "b"}, {"y"});
  b.output("y");
  const std::string path = b.save();
  const onnx::Model params = onnx::load(path);
  ASSERT_EQ(params.weight_names, (std::vector<std::string>{"w", "b"}));
  EXPECT_EQ(params.graph.inputs().size(), 3u);
  onnx::ImportOptions inline_options;
  inline_options.weights = onnx::Weights::Inline;
  const onnx::Model inlined = onnx::load(path, inline_options);
  EXPECT_TRUE(inlined.weights.empty());
  EXPECT_EQ(inlined.graph.inputs().size(), 1u);

  const Tensor x = from_vector(std::vector<float>{1, 2, 3, -1, 0, 1}, {2, 3}, Device::cpu());
  const std::vector<float> a = params({x})[0].to_vector<float>();
  const std::vector<float> c = inlined({x})[0].to_vector<float>();
  const std::vector<float> again = params({x})[0].to_vector<float>();  // weights uploaded once, reused
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, again);
  // Row 0: sum_k x_k * w[k][j] + 0.5 with w[k][j] = ((k*100 + j) % 7) - 3.
  float want = 0.5f;
  for (int k = 0; k < 3; ++k) want += static_cast<float>(k + 1) * w[static_cast<size_t>(k * 100)];
  EXPECT_EQ(a[0], want);
}

TEST(OnnxImport, ExternalDataIsReadBesideTheModel) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  auto* t = b.g->add_initializer();
  t->set_name("w");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(TensorProto::EXTERNAL);
  auto add_kv = [&](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  b.node("Mul", {"x", "w"}, {"y"});
  b.output("y");
  const std::string path = b.save("external.onnx");
  {
    std::ofstream bin(fs::path(path).parent_path() / "weights.bin", std::ios::binary);
    const float values[] = {99, 1, 2, 3, 4};  // the first is skipped by the offset
    bin.write(reinterpret_cast<const char*>(values), sizeof values);
  }
  const onnx::Model m = onnx::load(path);
  const auto y = m({from_vector(std::vector<float>{1, 1, 2, 2}, {4}, Device::interp())})[0].to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{1, 2, 6, 8}));

  t->mutable_external_data(0)->set_value("../outside.bin");
  EXPECT_NE(error_of(b.save("escape.onnx")).find("is outside the model's folder"), std::string::npos);
}

TEST(OnnxImport, DimsThatTheDataDoesNotFillAreAnErrorBeforeAnyAllocation) {
  // An OptionalProto read as a TensorProto gave these dims and no data: 1.5 TB that a machine
  // which overcommits memory allocated and filled until the kernel killed the process.
  const fs::path dir = fs::temp_directory_path() / "kiln_onnx_import_test";
  fs::create_directories(dir);
  auto read = [&](const TensorProto& t) {
    const std::string path = (dir / "tensor.pb").string();
    {
      std::ofstream out(path, std::ios::binary);
      t.SerializeToOstream(&out);
    }
    auto r = onnx::read_tensor_file(path);
    return r ? std::string("read") : r.error().message;
  };
  TensorProto t;
  t.set_data_type(TensorProto::INT8);
  for (int64_t d : {111, 112, 116, 95, 105, 110}) t.add_dims(d);
  EXPECT_THAT(read(t), testing::HasSubstr("holds 0 values for 1582357392000 elements"));
  t.set_raw_data(std::string(16, '\0'));
  EXPECT_THAT(read(t), testing::HasSubstr("raw_data holds 16 bytes for 1582357392000 elements"));
  t.clear_raw_data();
  t.clear_dims();
  t.add_dims(2);
  t.add_int32_data(7);
  t.add_int32_data(-3);
  EXPECT_EQ(read(t), "read");
}

TEST(OnnxImport, SoftmaxFollowsItsOpset) {
  // Before opset 13 Softmax normalizes the input flattened to 2-D at `axis` (default 1);
  // from 13 on it normalizes one axis (default -1).
  for (int opset : {11, 13}) {
    ModelBuilder b(opset);
    b.input("x", TensorProto::FLOAT, {1, 2, 2});
    b.node("Softmax", {"x"}, {"y"});
    b.output("y");
    const onnx::Model m = onnx::load(b.save(fmt::format("softmax{}.onnx", opset)));
    const auto y = m({from_vector(std::vector<float>{0, 0, 0, 0}, {1, 2, 2}, Device::cpu())})[0].to_vector<float>();
    EXPECT_FLOAT_EQ(y[0], opset == 11 ? 0.25f : 0.5f) << "opset " << opset;
  }
}

TEST(OnnxImport, ReduceMeanFromVersion18TakesItsAxesAsAnInput) {
  // The RMS norm of Llama-style decoders as the dynamo exporter writes it at opset 18.
  // kiln once read only the attribute, reduced over every axis, and computed wrong values.
  ModelBuilder b(18);
  b.input("x", TensorProto::FLOAT, {2, 2});
  b.initializer_i64("axes", {-1});
  add_attr_int(b.node("ReduceMean", {"x", "axes"}, {"y"}), "keepdims", 1);
  b.output("y");
  const onnx::Model m = onnx::load(b.save("reduce_mean18.onnx"));
  const auto y = m({from_vector(std::vector<float>{1, 3, 10, 30}, {2, 2}, Device::cpu())})[0];
  EXPECT_EQ(y.shape(), Shape({2, 1}));
  EXPECT_THAT(y.to_vector<float>(), ::testing::ElementsAre(2.0f, 20.0f));
}

TEST(OnnxImport, AnOpVersionNewerThanItsConverterIsRefusedNamingIt) {
  // DFT-20 takes its axis as an input where DFT-17 had an attribute; kiln's converter is
  // DFT-17's.
  ModelBuilder b(20);
  b.input("x", TensorProto::FLOAT, {1, 4, 1});
  b.node("DFT", {"x"}, {"y"}, "spectrum");
  b.output("y");
  const std::string e = error_of(b.save("dft20.onnx"));
  EXPECT_THAT(e, ::testing::HasSubstr("node 'spectrum' (DFT, opset 20)")) << e;
  EXPECT_THAT(e, ::testing::HasSubstr("DFT-20 (in force at opset 20) is newer than kiln's converter, written for "
                                      "versions 17 to 17")) << e;
  // An op that does not exist yet at the model's opset is an invalid model.
  ModelBuilder old(12);
  old.input("x", TensorProto::FLOAT, {2});
  old.node("HardSwish", {"x"}, {"y"});
  old.output("y");
  EXPECT_THAT(error_of(old.save("hard_swish12.onnx")), ::testing::HasSubstr("HardSwish does not exist at opset 12"));
}

TEST(OnnxImport, SplitFromVersion18SplitsIntoNumOutputsPartsTheLastSmaller) {
  ModelBuilder b(18);
  b.input("x", TensorProto::FLOAT, {7});
  add_attr_int(b.node("Split", {"x"}, {"a", "b", "c"}), "num_outputs", 3);
  for (const char* o : {"a", "b", "c"}) b.output(o);
  const onnx::Model m = onnx::load(b.save("split18.onnx"));
  const auto y = m({from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6}, {7}, Device::cpu())});
  ASSERT_EQ(y.size(), 3u);
  EXPECT_THAT(y[0].to_vector<float>(), ::testing::ElementsAre(0.0f, 1.0f, 2.0f));
  EXPECT_THAT(y[1].to_vector<float>(), ::testing::ElementsAre(3.0f, 4.0f, 5.0f));
  EXPECT_THAT(y[2].to_vector<float>(), ::testing::ElementsAre(6.0f));
}

TEST(OnnxImport, AnInitializerUsedDirectlyAndThroughIdentityIsOneWeight) {
  // One node reads the initializer, a second reads it through Identity, a third reads it
  // again: evaluating the Identity while importing once turned the shared constant into a
  // computed value, which the trace then took for an extra graph parameter.
  for (const auto weights : {onnx::Weights::Inline, onnx::Weights::Parameters}) {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {2});
    b.initializer("w", {2}, {1, 2});
    b.node("Add", {"x", "w"}, {"a"});
    b.node("Identity", {"w"}, {"w2"});
    b.node("Mul", {"a", "w2"}, {"m"});
    b.node("Sub", {"m", "w"}, {"y"});
    b.output("y");
    onnx::ImportOptions options;
    options.weights = weights;
    options.inline_max_elements = 0;
    const onnx::Model m = onnx::load(b.save("identity_of_weight.onnx"), options);
    EXPECT_EQ(m.graph.inputs().size(), 1 + m.weight_names.size());
    const auto y = m({from_vector(std::vector<float>{10, 20}, {2}, Device::cpu())})[0];
    EXPECT_THAT(y.to_vector<float>(), ::testing::ElementsAre(10.0f, 42.0f));  // (x + w) * w - w
  }
}

TEST(OnnxImport, OpVersionsAreONNXsAndEveryConverterNamesRealOnes) {
  for (const onnx::SupportedOp& op : onnx::supported_ops()) {
    ASSERT_FALSE(op.versions.empty()) << op.name;
    EXPECT_EQ(op.versions.front(), op.first_version) << op.name << ": first_version is not a version ONNX defines";
    EXPECT_EQ(op.versions.back(), op.last_version) << op.name << ": last_version is not a version ONNX defines";
  }
}

TEST(OnnxImport, NotAModelIsAClearError) {
  const fs::path p = fs::temp_directory_path() / ("kiln_not_onnx_" + std::to_string(::getpid()) + ".onnx");
  std::ofstream(p) << "graph @g() {}";
  EXPECT_NE(error_of(p.string()).find("not an ONNX model"), std::string::npos) << error_of(p.string());
  EXPECT_NE(error_of("/nonexistent/model.onnx").find("cannot open the file"), std::string::npos);
}

TEST(FrontendCall, AGraphRunsOnTensorsAndFusesWithTheirCode) {
  const Graph g = parse_graph("graph @f(%a: f32[2], %b: f32[2]) -> f32[2] {\n"
                              "  %c = constant {data = [1.0, 2.0]} : f32[2]\n"
                              "  %s = add %a, %b : f32[2]\n"
                              "  %y = mul %s, %c : f32[2]\n"
                              "  return %y\n}\n")
                      .take();
  const Tensor a = from_vector(std::vector<float>{1, 2}, {2}, Device::cpu());
  const Tensor b = constant(HostTensor::from_vector(std::vector<float>{3, 4}, Shape{2}), Device::cpu());
  const std::vector<Tensor> y = call(g, {a, b});
  EXPECT_EQ((y[0] + 1.f).to_vector<float>(), (std::vector<float>{5, 13}));
  EXPECT_THROW(call(g, {a}), Error);
  EXPECT_THROW(call(g, {a, from_vector(std::vector<float>{1, 2, 3}, {3}, Device::cpu())}), Error);
}

}  // namespace
}  // namespace kiln
