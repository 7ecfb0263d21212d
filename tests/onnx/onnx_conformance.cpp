// tests/onnx/onnx_conformance.cpp - ONNX's own node tests as kiln's import gate.
//
//   kiln_onnx_conformance --device cpu --expectations tests/onnx/expectations.tsv
//                         [--data /usr/share/libonnx-testdata/data] [--update] [--filter abs]
//                         [--shapes-only]
//
// Runs every test of the node, pytorch-converted, pytorch-operator and simple groups on one
// device: imports model.onnx with the shapes (and, where an op needs them while importing,
// the values) of test_data_set_N's inputs, runs it, and compares every output with ONNX's
// tolerance (|got - want| <= 1e-7 + 1e-3 |want|, NaN where NaN is expected; integers and
// bools exact). Each test gets one status: pass, wrong (values, dtype or shape differ),
// unsupported (an op, dtype or attribute kiln lacks), import-error, run-error. The
// expectations file holds one line per test and device; the run fails when any status
// differs from it, in either direction, and --update rewrites this device's lines. Without
// an expectations file every test must pass (the models of examples/onnx/make_models.py).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kiln/kiln.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {


struct Outcome {
  std::string status;
  std::string detail;
};

struct Tolerance {
  double atol = 1e-7, rtol = 1e-3;  // ONNX's own tests'
};

std::string compare(const HostTensor& got, const HostTensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return fmt::format("got {}, expected {}", got.type().str(), want.type().str());
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (is_float(want.dtype())) {
      const double g = got.get_double(i), w = want.get_double(i);
      if (g == w) continue;  // infinities too, whose difference is NaN
      if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w)))
        return fmt::format("element {}: got {}, expected {}", i, g, w);
    } else if (got.get_int(i) != want.get_int(i)) {
      return fmt::format("element {}: got {}, expected {}", i, got.get_int(i), want.get_int(i));
    }
  }
  return "";
}

// ONNX's test data holds bfloat16 tensors as uint16 arrays of their bits (NumPy has no
// bfloat16): where the model declares bf16, a u16 tensor of that shape is read as those bits.
HostTensor as_declared(HostTensor t, DType declared) {
  if (declared != DType::BF16 || t.dtype() != DType::U16) return t;
  HostTensor out = HostTensor::uninitialized(TensorType{DType::BF16, t.shape()});
  if (t.nbytes()) std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path());
  // input_10.pb after input_9.pb
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) { return std::stoi(p.stem().string().substr(prefix.size())); };
    return num(a) < num(b);
  });
  return out;
}

Outcome run_test(const fs::path& dir, Device device, bool shapes_only, Tolerance tol) {
  const std::string model_path = (dir / "model.onnx").string();
  auto names = onnx::model_input_names(model_path);
  if (!names) return {"import-error", names.error().message};
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {"import-error", "no test_data_set_N folder"};
  for (const fs::path& set : sets) {
    std::vector<HostTensor> inputs, wants;
    try {
      for (const fs::path& p : sorted_files(set, "input_")) inputs.push_back(onnx::read_tensor_file(p.string()).take());
      for (const fs::path& p : sorted_files(set, "output_")) wants.push_back(onnx::read_tensor_file(p.string()).take());
    } catch (const Error& e) {
      // Sequence and optional values are stored in other protobufs than TensorProto: the
      // model itself says whether kiln can take its inputs and outputs.
      try {
        (void)onnx::load(model_path);
      } catch (const onnx::Unsupported& u) {
        return {"unsupported", u.what()};
      } catch (const Error&) {
      }
      const std::string m = e.what();
      return {m.find("does not support") != std::string::npos ? "unsupported" : "import-error", m};
    }
    if (inputs.size() > names->size()) return {"import-error", "more input files than model inputs"};
    onnx::ImportOptions options;
    for (size_t i = 0; i < inputs.size(); ++i) {
      options.input_shapes[(*names)[i]] = inputs[i].shape();
      if (!shapes_only) options.input_values[(*names)[i]] = inputs[i];
    }
    onnx::Model model;
    try {
      model = onnx::load(model_path, options);
    } catch (const onnx::Unsupported& e) {
      return {"unsupported", e.what()};
    } catch (const Error& e) {
      return {"import-error", e.what()};
    }
    try {
      std::vector<Tensor> args;
      for (const std::string& name : model.input_names) {
        const auto it = std::find(names->begin(), names->end(), name);
        const auto k = static_cast<size_t>(it - names->begin());
        if (it == names->end() || k >= inputs.size()) return {"import-error", fmt::format("no data for input '{}'", name)};
        const DType declared = model.graph.type(model.graph.inputs()[args.size()]).dtype;
        args.push_back(from_host(as_declared(inputs[k], declared), device));
      }
      std::vector<Tensor> outs = model(args);
      if (outs.size() != wants.size())
        return {"wrong", fmt::format("{} outputs, the test data has {}", outs.size(), wants.size())};
      for (size_t i = 0; i < outs.size(); ++i)
        if (std::string d = compare(outs[i].host(), as_declared(wants[i], outs[i].dtype()), tol); !d.empty())
          return {"wrong", fmt::format("{}: output {} ('{}'): {}", set.filename().string(), i, model.output_names[i], d)};
    } catch (const Error& e) {
      return {"run-error", e.what()};
    }
  }
  return {"pass", ""};
}

using Expectations = std::map<std::pair<std::string, std::string>, std::string>;  // (test, device) -> status

Expectations read_expectations(const std::string& path) {
  Expectations out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string test, device, status;
    fields >> test >> device >> status;
    out[{test, device}] = status;
  }
  return out;
}

void write_expectations(const std::string& path, const Expectations& e) {
  std::ofstream out(path);
  out << "# ONNX conformance: the status of every upstream test per device (tests/onnx/onnx_conformance.cpp).\n"
         "# Regenerate one device's lines with: kiln_onnx_conformance --device D --expectations FILE --update\n";
  for (const auto& [key, status] : e) out << key.first << '\t' << key.second << '\t' << status << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ONNX's upstream tests through kiln's importer, against an expectations file"};
  std::string data = "/usr/share/libonnx-testdata/data", device_name = "cpu", expectations, filter;
  std::vector<std::string> groups = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  bool update = false, verbose = false;
  app.add_option("--data", data, "the folder that holds node/, simple/, ...");
  app.add_option("--device", device_name, "the device to run on");
  app.add_option("--expectations", expectations, "the expectations file (TSV: test, device, status)");
  app.add_option("--groups", groups, "the test groups (folders of --data) to run")->delimiter(',')->capture_default_str();
  app.add_option("--filter", filter, "only tests whose name contains this");
  app.add_flag("--update", update, "rewrite this device's lines of the expectations file");
  app.add_flag("-v,--verbose", verbose, "print each test's status and why");
  bool shapes_only = false;
  Tolerance tol;
  app.add_option("--atol", tol.atol, "absolute tolerance of a float element")->capture_default_str();
  app.add_option("--rtol", tol.rtol, "tolerance relative to the expected value")->capture_default_str();
  app.add_flag("--shapes-only", shapes_only,
               "give the importer the inputs' shapes only, never their values: a model must import as a user's "
               "would, with nothing but the sizes of its symbolic dims");
  CLI11_PARSE(app, argc, argv);

  const Device device = Device::parse(device_name);
  const std::string dev = device.str();
  Expectations expected = expectations.empty() ? Expectations{} : read_expectations(expectations);
  std::map<std::string, int> counts;
  std::map<std::string, int> group_pass, group_total;
  std::vector<std::string> differences;
  Expectations seen;
  for (const std::string& group : groups) {
    const fs::path root = fs::path(data) / group;
    if (!fs::is_directory(root)) {
      std::cerr << fmt::format("kiln_onnx_conformance: {} is not a folder (is libonnx-testdata installed?)\n", root.string());
      return 2;
    }
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    for (const fs::path& t : tests) {
      const std::string name = fmt::format("{}/{}", group, t.filename().string());
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      const Outcome o = run_test(t, device, shapes_only, tol);
      ++counts[o.status];
      ++group_total[group];
      if (o.status == "pass") ++group_pass[group];
      seen[{name, dev}] = o.status;
      if (verbose) std::cout << fmt::format("{:<60} {:<12} {}\n", name, o.status, o.detail.substr(0, 300));
      if (expectations.empty() && o.status != "pass") differences.push_back(fmt::format("{}: {} {}", name, o.status, o.detail));
      if (!expectations.empty() && !update) {
        auto it = expected.find({name, dev});
        const std::string want = it == expected.end() ? "(none)" : it->second;
        if (want != o.status) differences.push_back(fmt::format("{}: expected {}, got {} {}", name, want, o.status, o.detail.substr(0, 300)));
      }
    }
  }
  int total = 0;
  for (const auto& [s, n] : counts) total += n;
  std::cout << fmt::format("onnx conformance on {}: {} tests", dev, total);
  for (const auto& [s, n] : counts) std::cout << fmt::format(", {} {}", n, s);
  std::cout << '\n';
  for (const auto& [g, n] : group_total) std::cout << fmt::format("  {:<18} {:>4} of {:>4} pass\n", g, group_pass[g], n);
  if (update) {
    // Only this device's lines of the groups that ran (and the filter) are rewritten.
    auto ran = [&](const std::string& test) {
      const std::string group = test.substr(0, test.find('/'));
      return std::find(groups.begin(), groups.end(), group) != groups.end() &&
             (filter.empty() || test.find(filter) != std::string::npos);
    };
    for (auto it = expected.begin(); it != expected.end();)
      it = (it->first.second == dev && ran(it->first.first)) ? expected.erase(it) : std::next(it);
    for (const auto& [k, v] : seen) expected[k] = v;
    write_expectations(expectations, expected);
    std::cout << "updated " << expectations << '\n';
    return 0;
  }
  if (!differences.empty()) {
    std::cout << differences.size() << " test(s) differ from " << (expectations.empty() ? "all passing" : expectations) << ":\n";
    for (const auto& d : differences) std::cout << "  " << d << '\n';
    return 1;
  }
  return 0;
}
