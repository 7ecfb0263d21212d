// codegen/int_division.h - integer division rounded down or up, for signed operands (C++'s
// `/` truncates toward zero). Internal to codegen/.
#pragma once

#include <cstdint>

namespace kiln::kir {

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

}  // namespace kiln::kir
