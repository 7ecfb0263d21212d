// tools/kiln/dot_command.cpp - `kiln dot`: Graphviz of a graph.
#include <memory>

#include "commands.h"
#include "kiln/ir/text.h"

namespace kiln::cli {

Command add_dot_command(CLI::App& app) {
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("dot", "Print a graph as Graphviz (kiln dot f.kir | dot -Tsvg > f.svg).");
  sub->add_option("file", *input, "IR file, or - for stdin")->required();
  sub->add_option("-o,--output", *output, "Write the result here instead of stdout");
  return {sub, [input, output]() {
            write_output(*output, graph_to_dot(load_graph(*input)));
            return 0;
          }};
}

}  // namespace kiln::cli
