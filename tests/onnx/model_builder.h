// tests/onnx/model_builder.h - ONNX models built with the protobuf classes, for tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

namespace kiln::test {

// A model under construction, written to a scratch file by save().
struct ModelBuilder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = m.mutable_graph();

  explicit ModelBuilder(int opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g->set_name("test");
  }
  ::onnx::ValueInfoProto* value(::google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list,
                                const std::string& name, int type, std::vector<std::variant<int64_t, std::string>> dims) {
    auto* v = list->Add();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
      else dim->set_dim_param(std::get<std::string>(d));
    }
    return v;
  }
  void input(const std::string& name, int type, std::vector<std::variant<int64_t, std::string>> dims) {
    value(g->mutable_input(), name, type, std::move(dims));
  }
  void output(const std::string& name, int type = ::onnx::TensorProto::FLOAT) { value(g->mutable_output(), name, type, {}); }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                          const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  ::onnx::TensorProto* initializer(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t;
  }
  void initializer_i64(const std::string& name, std::vector<int64_t> values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  std::string save(const std::string& file = "model.onnx") const {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_onnx_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / file).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
};

}  // namespace kiln::test
