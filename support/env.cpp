// support/env.cpp - strict numeric environment settings.
#include "kiln/support/env.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kiln/support/log.h"

namespace kiln {

std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return std::nullopt;
  const std::string_view text(raw);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && v >= min && v <= max) return v;
  warn_once(std::string("env:") + name,
            fmt::format("ignoring {}='{}' (want an integer from {} to {})", name, text, min, max));
  return std::nullopt;
}

}  // namespace kiln
