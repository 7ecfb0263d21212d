// tools/kiln/cli_common.cpp - file input and output shared by the commands.
#include <fstream>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/onnx/onnx.h"
#include "kiln/ir/text.h"

namespace kiln::cli {

std::string read_input(const std::string& path) {
  if (path == "-") return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": error: cannot open file");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text)) throw Error(path + ": error: cannot write file");
}

Graph load_graph(const std::string& path) {
  if (path.ends_with(".onnx")) {
    // Weights inline, so that every parameter left is one of the model's inputs.
    onnx::ImportOptions options;
    options.weights = onnx::Weights::Inline;
    return onnx::load(path, options).graph;
  }
  const std::string text = read_input(path);
  return parse_graph(text, path == "-" ? "<stdin>" : path).take();
}

std::string time_text(double ns) {
  if (ns <= 0) return "-";
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  return fmt::format("{:.2f} ms", ns / 1e6);
}

}  // namespace kiln::cli
