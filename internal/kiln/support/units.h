// kiln/support/units.h - quantities as people read them.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

/// "1.5 GiB", "12.0 MiB", "48 KiB".
std::string human_bytes(int64_t bytes);

}  // namespace kiln
