// kiln/ir/text.h - the IR text form: printer, parser, verifier, Graphviz.
//
//   graph @softmax(%x: f32[4,8]) -> f32[4,8] {
//     %m = reduce_max %x {axes = [1], keepdim} : f32[4,1]
//     ...
//     return %y
//   }
//
// print(parse(print(g))) == print(g) for every graph; docs/ir.md is the grammar.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/error.h"

namespace kiln {

/// The text form of `g`. Unnamed values get fresh names that collide with no given name.
std::string print_graph(const Graph& g);

/// The name (without '%') print_graph gives each value of `g`.
std::vector<std::string> value_names(const Graph& g);

/// Parses and verifies one graph; errors carry `file:line:col` and say what was found and
/// what was expected. `first_line` shifts reported lines (for chunks of a split file).
Expected<Graph> parse_graph(std::string_view text, std::string_view file = "<stdin>",
                            int first_line = 1);

/// Checks every invariant of a graph: SSA order, arity, attributes, the type rule of every
/// node against its declared type, and outputs. Errors point at the node's source location.
Status verify(const Graph& g);

/// A chunk of a file split on lines `// -----` (MLIR's --split-input-file).
struct TextChunk {
  std::string_view text;
  int first_line;
};
std::vector<TextChunk> split_input(std::string_view text);

/// Graphviz `digraph` of `g`: one box per node with its op, type and attributes.
std::string graph_to_dot(const Graph& g);

}  // namespace kiln
