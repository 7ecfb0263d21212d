// kiln/support/env.h - reading numeric settings from the environment, strictly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The integer in environment variable `name` when it is set to a plain decimal integer in
/// [min, max] (no sign tricks, no trailing characters, no overflow); nullopt when it is
/// unset or empty. Any other value is ignored with one warning naming the variable, the
/// value and the accepted range.
std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max);

/// An on/off setting: true for `1`, false for `0`, nullopt when unset or empty. Any other
/// value (`true`, `yes`) throws kiln::Error naming the variable and what it accepts: a
/// setting such as KILN_NO_COMPILE must never be read as off because it was misspelled.
std::optional<bool> env_flag(const char* name);

/// A comma-separated list of names, each one of `accepted` (or `all`, when `accepted`
/// contains it); empty when unset. An unknown name throws kiln::Error naming the variable,
/// the name and every accepted one.
std::vector<std::string> env_list(const char* name, std::span<const std::string_view> accepted);

}  // namespace kiln
