// support/log.cpp - warnings and log channels.
#include "kiln/support/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace kiln {

void warn(std::string_view message) {
  std::fprintf(stderr, "kiln: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

void warn_once(std::string_view key, std::string_view message) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard lock(mutex);
    if (!seen.emplace(key).second) return;
  }
  warn(message);
}

bool log_enabled(std::string_view channel) {
  const char* env = std::getenv("KILN_LOG");
  if (env == nullptr) return false;
  std::string_view list(env);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (item == channel || item == "all") return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void log_line(std::string_view channel, std::string_view message) {
  if (!log_enabled(channel)) return;
  std::fprintf(stderr, "kiln[%.*s]: %.*s\n", static_cast<int>(channel.size()), channel.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace kiln
