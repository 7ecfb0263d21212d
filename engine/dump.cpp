// engine/dump.cpp - KILN_DUMP.
#include "dump.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

#include "kiln/support/env.h"
#include "kiln/support/log.h"

namespace kiln::engine {

const Dumper& Dumper::get() {
  static const Dumper d = [] {
    Dumper out;
    static constexpr std::string_view kStages[] = {"graph", "fused", "kernel", "llvm", "opencl", "glsl", "spirv", "all"};
    out.stages_ = env_list("KILN_DUMP", kStages);
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
