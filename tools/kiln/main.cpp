// tools/kiln/main.cpp - the `kiln` command-line tool.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "kiln/engine/engine.h"
#include "kiln/support/spelling.h"
#include "kiln/version.h"

namespace {

// The source line a located diagnostic (`file:line:col: error: ...`) points at, with a caret
// under its column, as compilers print them; "" when the message has no such location or the
// file cannot be read (stdin).
std::string source_excerpt(std::string_view first_line) {
  const size_t at = first_line.find(": error: ");
  if (at == std::string_view::npos) return "";
  const std::string_view where = first_line.substr(0, at);
  const size_t c2 = where.rfind(':');
  if (c2 == std::string_view::npos) return "";
  const size_t c1 = where.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos) return "";
  int line = 0, col = 0;
  const std::string_view l = where.substr(c1 + 1, c2 - c1 - 1), c = where.substr(c2 + 1);
  if (std::from_chars(l.data(), l.data() + l.size(), line).ptr != l.data() + l.size() ||
      std::from_chars(c.data(), c.data() + c.size(), col).ptr != c.data() + c.size() || line < 1 || col < 1)
    return "";
  std::ifstream in{std::string(where.substr(0, c1))};
  std::string text;
  for (int i = 0; i < line && std::getline(in, text); ++i) {
  }
  if (!in || text.size() + 1 < static_cast<size_t>(col)) return "";
  std::string caret(static_cast<size_t>(col - 1), ' ');
  for (size_t i = 0; i < caret.size(); ++i)
    if (text[i] == '\t') caret[i] = '\t';  // keep the caret under the column when tabs indent
  return text + "\n" + caret + "^\n";
}

// Every error in one form: located diagnostics read `file:line:col: error: ...` and show their
// source line; any other gets the tool's name in front (`kiln: error: ...`). "error:" in red
// on a terminal only.
void print_error(std::string_view message) {
  const std::string_view first = message.substr(0, message.find('\n'));
  const bool located = first.rfind("error: ", 0) == 0 || first.find(": error: ") != std::string_view::npos ||
                       first.rfind("kiln: ", 0) == 0;
  std::string text = located ? std::string(message) : "kiln: error: " + std::string(message);
  const char* term = std::getenv("TERM");
  if (isatty(STDERR_FILENO) && term != nullptr && std::string_view(term) != "dumb")
    if (const size_t e = text.find("error: "); e != std::string::npos && e < text.find('\n'))
      text.replace(e, 6, "\033[1;31merror:\033[0m");
  std::cerr << text << "\n" << source_excerpt(first);
}

}  // namespace

int main(int argc, char** argv) {
  kiln::register_custom_host();  // `--device interp`, `--check` and `kiln fuzz` interpret custom kernels
  CLI::App app{"kiln: a lazy-graph JIT compiler for tensor programs.\n"
               "Reads and writes the IR text form (docs/ir.md); see docs/cli.md.",
               "kiln"};
  app.set_version_flag("--version", "kiln " KILN_VERSION_STRING);
  app.require_subcommand(1);
  const kiln::cli::Command commands[] = {
      kiln::cli::add_opt_command(app),
      kiln::cli::add_run_command(app),
      kiln::cli::add_dot_command(app),
      kiln::cli::add_codegen_command(app),
      kiln::cli::add_fuzz_command(app),
      kiln::cli::add_check_command(app),
      kiln::cli::add_devices_command(app),
      kiln::cli::add_autotune_command(app),
      kiln::cli::add_cache_command(app),
      kiln::cli::add_import_command(app),
  };
  // An unknown command, before CLI11 reads it as a stray argument ("A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string_view> names;
    for (const auto& command : commands) names.push_back(command.app->get_name());
    if (std::find(names.begin(), names.end(), std::string_view(argv[1])) == names.end()) {
      std::cerr << "kiln: error: unknown command '" << argv[1] << "'" << kiln::did_you_mean(argv[1], names)
                << "; the commands are";
      for (std::string_view n : names) std::cerr << " " << n;
      std::cerr << " (kiln --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const kiln::Error& e) {
    print_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "kiln: error: out of memory (the tensors are larger than this machine holds)\n";
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return 1;
}
