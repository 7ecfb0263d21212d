// tools/kiln/inputs.cpp - the parameters a command runs a graph with: seeded random values,
// or .npy files named on the command line (`kiln run`, `kiln check`).
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/runtime/npy.h"

namespace kiln::cli {
namespace {

// Seeded inputs: floats uniform in [-1, 1), integers in [-8, 8), bools fair. Each input
// draws from its own stream, so adding an input does not change the others.
HostTensor random_input(const TensorType& type, int64_t seed, size_t input_index) {
  HostTensor t(type);
  // Wrapping arithmetic: any seed is valid.
  const auto stream = static_cast<int64_t>(static_cast<uint64_t>(seed) * 1000003u + input_index);
  for (int64_t k = 0; k < t.numel(); ++k) {
    const double u = scalar::rand_uniform(stream, static_cast<uint64_t>(k));
    if (is_float(type.dtype)) t.set_double(k, 2 * u - 1);
    else if (is_bool(type.dtype)) t.set_int(k, u < 0.5);
    else t.set_int(k, static_cast<int64_t>(std::floor(u * 16)) - 8);
  }
  return t;
}

}  // namespace

std::vector<HostTensor> make_inputs(const Graph& g, const std::vector<std::string>& specs, int64_t seed) {
  std::map<std::string, std::string> files;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(fmt::format("--input '{}' must look like NAME=FILE.npy", spec));
    std::string name = spec.substr(0, eq);
    if (name[0] == '%') name.erase(0, 1);
    files[name] = spec.substr(eq + 1);
  }
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node& in = g.node(g.inputs()[i]);
    auto it = files.find(in.name);
    if (it == files.end()) {
      inputs.push_back(random_input(in.type, seed, i));
      continue;
    }
    HostTensor t = read_npy(it->second);
    if (!(t.type() == in.type))
      throw Error(fmt::format("{}: error: input %{} expects {}, the file holds {}", it->second, in.name,
                              in.type.str(), t.type().str()));
    inputs.push_back(std::move(t));
    files.erase(it);
  }
  if (!files.empty())
    throw Error(fmt::format("--input names '{}', which is not a parameter of @{}", files.begin()->first, g.name()));
  return inputs;
}

void add_input_options(CLI::App* sub, std::vector<std::string>& inputs, int64_t& seed) {
  sub->add_option("--seed", seed, "Seed for the random inputs")->capture_default_str();
  sub->add_option("--input", inputs, "Take parameter NAME from a .npy file (repeatable)")->type_name("NAME=FILE.npy");
}

}  // namespace kiln::cli
