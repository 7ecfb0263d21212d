// support/units.cpp - see kiln/support/units.h.
#include "kiln/support/units.h"

#include <fmt/format.h>

namespace kiln {

std::string human_bytes(int64_t n) {
  if (n >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(n) / (1 << 30));
  if (n >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
  return fmt::format("{} KiB", n >> 10);
}

}  // namespace kiln
