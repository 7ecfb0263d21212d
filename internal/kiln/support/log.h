// kiln/support/log.h - warnings and opt-in log channels on stderr.
#pragma once

#include <string_view>

namespace kiln {

/// Prints "kiln: warning: <message>" to stderr.
void warn(std::string_view message);

/// Prints `message` once per process for each distinct `key` (a cache directory that is
/// read-only warns once, not at every kernel).
void warn_once(std::string_view key, std::string_view message);

/// True when $KILN_LOG names `channel` (a comma-separated list: "flush,compile", or "all").
bool log_enabled(std::string_view channel);

/// Prints "kiln[<channel>]: <message>" when the channel is enabled.
void log_line(std::string_view channel, std::string_view message);

}  // namespace kiln
