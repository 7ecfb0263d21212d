// support/env.cpp - strict numeric environment settings.
#include "kiln/support/env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/support/error.h"
#include "kiln/support/log.h"
#include "kiln/support/spelling.h"

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

std::optional<bool> env_flag(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return std::nullopt;
  const std::string_view v(raw);
  if (v == "1") return true;
  if (v == "0") return false;
  throw Error(fmt::format("{}='{}': want 1 (on) or 0 (off)", name, v));
}

std::vector<std::string> env_list(const char* name, std::span<const std::string_view> accepted) {
  std::vector<std::string> out;
  const char* raw = std::getenv(name);
  if (raw == nullptr) return out;
  std::string_view list(raw);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (!item.empty()) {
      if (std::find(accepted.begin(), accepted.end(), item) == accepted.end())
        throw Error(fmt::format("{}='{}': unknown '{}'{} (want a comma-separated list of {})", name, raw, item,
                                did_you_mean(item, accepted), fmt::join(accepted, ", ")));
      out.emplace_back(item);
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace kiln
