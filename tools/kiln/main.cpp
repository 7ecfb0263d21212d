// tools/kiln/main.cpp - the `kiln` command-line tool.
#include <iostream>

#include "commands.h"
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
