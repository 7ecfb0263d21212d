// engine/dump.cpp - KILN_DUMP.
#include "dump.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "kiln/support/log.h"

namespace kiln::engine {

const Dumper& Dumper::get() {
  static const Dumper d = [] {
    Dumper out;
    if (const char* env = std::getenv("KILN_DUMP")) {
      std::string_view list(env);
      while (!list.empty()) {
        const size_t comma = list.find(',');
        out.stages_.emplace_back(list.substr(0, comma));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    }
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

void Dumper::write(const std::string& file, const std::string& text) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  std::ofstream out(dir_ / file, std::ios::binary);
  out << text;
  if (!out) warn_once("dump:" + dir_.string(), fmt::format("KILN_DUMP: cannot write to {}", dir_.string()));
}

}  // namespace kiln::engine
