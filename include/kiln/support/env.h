// kiln/support/env.h - reading numeric settings from the environment, strictly.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln {

/// The integer in environment variable `name` when it is set to a plain decimal integer in
/// [min, max] (no sign tricks, no trailing characters, no overflow); nullopt when it is
/// unset or empty. Any other value is ignored with one warning naming the variable, the
/// value and the accepted range.
std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max);

}  // namespace kiln
