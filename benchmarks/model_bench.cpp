// benchmarks/model_bench.cpp - one ONNX model of the model suite through kiln, timed.
//
//   kiln_model_bench DIR --device cpu [--runs 10] [--budget 30] [--rtol 1e-3] [--atol-scale 1e-4] [--capture]
//
// DIR holds model.onnx and test_data_set_0/{input,output}_N.pb (benchmarks/models/export.py
// writes them; the outputs are onnxruntime's). Imports the model with its inputs' shapes
// only (as a user would), runs it once (the first call: compiling, or loading kernels from
// the disk cache), then `runs` more times (fewer past `budget` seconds), and compares every output with onnxruntime's:
// |kiln - ort| <= atol + rtol |ort|, atol = atol_scale * max |ort| of that output (logits
// near zero have no meaningful relative error). Prints one JSON object on stdout.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kiln/kiln.h"
#include "timing.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int k = 0; fs::exists(dir / fmt::format("{}{}.pb", prefix, k)); ++k) out.push_back(dir / fmt::format("{}{}.pb", prefix, k));
  return out;
}

// The largest |got - want| relative to the allowed error: <= 1 passes.
double error_ratio(const HostTensor& got, const HostTensor& want, double rtol, double atol_scale, double& max_abs) {
  if (got.type().str() != want.type().str()) return INFINITY;
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.get_double(i)));
  max_abs = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get_double(i), w = want.get_double(i);
    if (std::isnan(g) != std::isnan(w)) return INFINITY;
    if (std::isnan(w)) continue;
    max_abs = std::max(max_abs, std::abs(g - w));
    worst = std::max(worst, std::abs(g - w) / (atol_scale * scale + rtol * std::abs(w) + 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"An ONNX model of the model suite through kiln: import, first call, steady time, error"};
  std::string dir, device_name = "cpu";
  int runs = 10;
  double budget_s = 30;
  double rtol = 1e-3, atol_scale = 1e-4;
  app.add_option("dir", dir, "the model's folder (model.onnx, test_data_set_0/)")->required();
  app.add_option("--device", device_name)->capture_default_str();
  app.add_option("--runs", runs)->capture_default_str();
  app.add_option("--budget", budget_s, "stop timing after this many seconds (at least one run)")->capture_default_str();
  app.add_option("--rtol", rtol)->capture_default_str();
  app.add_option("--atol-scale", atol_scale, "atol as a fraction of the output's largest magnitude")->capture_default_str();
  bool captured = false;
  app.add_flag("--capture", captured, "call the model through kiln::capture: calls after the first replay");
  CLI11_PARSE(app, argc, argv);

  const Device device = Device::parse(device_name);
  const std::string model_path = (fs::path(dir) / "model.onnx").string();
  const fs::path set = fs::path(dir) / "test_data_set_0";
  std::string status = "ok", detail;
  double import_s = 0, first_s = 0, steady_s = 0, worst = 0, max_abs = 0;
  try {
    std::vector<HostTensor> inputs, wants;
    for (const fs::path& p : numbered(set, "input_")) inputs.push_back(onnx::read_tensor_file(p.string()).take());
    for (const fs::path& p : numbered(set, "output_")) wants.push_back(onnx::read_tensor_file(p.string()).take());
    const std::vector<std::string> names = onnx::model_input_names(model_path).take();
    onnx::ImportOptions options;
    for (size_t i = 0; i < inputs.size() && i < names.size(); ++i) options.input_shapes[names[i]] = inputs[i].shape();
    onnx::Model model;
    try {
      import_s = bench::seconds([&] { model = onnx::load(model_path, options); });
    } catch (const Error& e) {
      status = "import-error";
      detail = e.what();
      throw;
    }
    std::vector<Tensor> args;
    for (const HostTensor& h : inputs) args.push_back(from_host(h, device));
    std::vector<HostTensor> got;
    const CapturedFunction replayed = capture([&](const std::vector<Tensor>& in) { return model(in); });
    auto call = [&] {
      got.clear();
      for (Tensor& t : captured ? replayed(args) : model(args)) got.push_back(t.host());
    };
    first_s = bench::seconds(call);
    std::vector<double> times;
    double spent = 0;
    for (int r = 0; r < runs && (r == 0 || spent < budget_s); ++r) spent += times.emplace_back(bench::seconds(call));
    steady_s = times.empty() ? first_s : bench::median(times);
    if (got.size() != wants.size()) throw Error(fmt::format("{} outputs, onnxruntime has {}", got.size(), wants.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      double m = 0;
      worst = std::max(worst, error_ratio(got[i], wants[i], rtol, atol_scale, m));
      max_abs = std::max(max_abs, m);
    }
    if (!(worst <= 1)) status = "wrong";
  } catch (const Error& e) {
    if (status == "ok") status = "run-error";
    detail = e.what();
  }
  auto quoted = [](std::string s) {
    std::string out;
    for (char ch : s) {
      if (ch == '"' || ch == '\\') out += '\\';
      if (ch == '\n') ch = ' ';
      out += ch;
    }
    return out;
  };
  std::cout << fmt::format(
      "{{\"model\": \"{}\", \"device\": \"{}\", \"status\": \"{}\", \"import_s\": {:.4f}, \"first_call_s\": {:.4f}, "
      "\"steady_s\": {:.6f}, \"max_abs_error\": {:.3g}, \"error_ratio\": {:.3g}, \"detail\": \"{}\"}}\n",
      fs::path(dir).filename().string(), device.str(), status, import_s, first_s, steady_s, max_abs,
      std::isfinite(worst) ? worst : 1e300, quoted(detail.substr(0, 400)));
  return status == "ok" ? 0 : 1;
}
