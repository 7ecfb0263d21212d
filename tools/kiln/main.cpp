// tools/kiln/main.cpp - the `kiln` command-line tool.
#include <algorithm>
#include <iostream>
#include <string_view>
#include <vector>

#include "commands.h"
#include "kiln/support/spelling.h"
#include "kiln/version.h"

int main(int argc, char** argv) {
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
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "kiln: error: out of memory (the tensors are larger than this machine holds)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
