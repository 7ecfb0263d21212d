// engine/dump.cpp - KILN_DUMP.
#include "dump.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

#include "kiln/engine/engine.h"
#include "kiln/support/env.h"
#include "kiln/support/log.h"

namespace kiln::engine {

const Dumper& Dumper::get() {
  static const Dumper d = [] {
    Dumper out;
    // The engine's own stages, then each kind of device's sources (the registry's rows).
    std::vector<std::string_view> stages = {"graph", "fused", "kernel"};
    for (const DeviceKindInfo& kind : device_kinds())
      for (const DumpStage& s : kind.dump_stages) stages.push_back(s.name);
    stages.push_back("all");
    out.stages_ = env_list("KILN_DUMP", stages);
    const char* dir = std::getenv("KILN_DUMP_DIR");
    out.dir_ = dir && *dir ? dir : "kiln-dump";
    return out;
  }();
  return d;
}

bool Dumper::wants(std::string_view stage) const {
  return std::find(stages_.begin(), stages_.end(), stage) != stages_.end() ||
         std::find(stages_.begin(), stages_.end(), "all") != stages_.end();
}

bool Dumper::names(std::string_view stage) const {
  return std::find(stages_.begin(), stages_.end(), stage) != stages_.end();
}

void Dumper::write(const std::string& file, const std::string& text) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr, "kiln: KILN_DUMP: writing to %s\n", std::filesystem::absolute(dir_, ec).string().c_str());
  });
  std::ofstream out(dir_ / file, std::ios::binary);
  out << text;
  if (!out) warn_once("dump:" + dir_.string(), fmt::format("KILN_DUMP: cannot write to {}", dir_.string()));
}

}  // namespace kiln::engine
