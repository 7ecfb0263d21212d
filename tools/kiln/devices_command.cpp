// tools/kiln/devices_command.cpp - `kiln devices`: every device this process can run on.
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "kiln/engine/engine.h"

namespace kiln::cli {

Command add_devices_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("devices", "List the devices kiln can run on (the names --device takes).");
  return {sub, [] {
            for (Device d : registered_devices()) std::cout << fmt::format("{:<10} {}\n", d.str(), device_description(d));
            return 0;
          }};
}

}  // namespace kiln::cli
