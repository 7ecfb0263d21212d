// support/log.cpp - warnings and log channels.
#include "kiln/support/log.h"

#include "kiln/support/env.h"

#include <algorithm>
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
  static constexpr std::string_view kChannels[] = {"flush", "compile", "recompile", "autotune", "vulkan", "all"};
  // Read at every call (tests set it as they go); an unknown channel is an error.
  const std::vector<std::string> on = env_list("KILN_LOG", kChannels);
  return std::any_of(on.begin(), on.end(), [&](const std::string& c) { return c == channel || c == "all"; });
}

void log_line(std::string_view channel, std::string_view message) {
  if (!log_enabled(channel)) return;
  std::fprintf(stderr, "kiln[%.*s]: %.*s\n", static_cast<int>(channel.size()), channel.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace kiln
