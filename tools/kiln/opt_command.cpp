// tools/kiln/opt_command.cpp - `kiln opt`: parse, verify and print IR.
#include <iostream>
#include <memory>

#include "commands.h"
#include "kiln/ir/text.h"

namespace kiln::cli {
namespace {
struct OptOptions {
  std::string input;
  std::string output;
  bool split = false;
};
}  // namespace

Command add_opt_command(CLI::App& app) {
  auto opts = std::make_shared<OptOptions>();
  CLI::App* sub = app.add_subcommand("opt", "Parse, verify and print an IR file (passes arrive with -O).");
  sub->add_option("file", opts->input, "IR file, or - for stdin")->required();
  sub->add_option("-o,--output", opts->output, "Write the result here instead of stdout");
  sub->add_flag("--split-input-file", opts->split,
                "Treat each chunk between '// -----' lines as its own graph; report every "
                "chunk's error and exit 1 if any failed");
  return {sub, [opts]() {
            const std::string text = read_input(opts->input);
            const std::string file = opts->input == "-" ? "<stdin>" : opts->input;
            if (!opts->split) {
              write_output(opts->output, print_graph(parse_graph(text, file).take()));
              return 0;
            }
            std::string out;
            bool failed = false;
            for (const TextChunk& chunk : split_input(text)) {
              auto g = parse_graph(chunk.text, file, chunk.first_line);
              if (g) {
                if (!out.empty()) out += "// -----\n";
                out += print_graph(*g);
              } else {
                std::cerr << g.error().str() << "\n";
                failed = true;
              }
            }
            write_output(opts->output, out);
            return failed ? 1 : 0;
          }};
}

}  // namespace kiln::cli
