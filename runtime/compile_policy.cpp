// runtime/compile_policy.cpp - see kiln/runtime/compile_policy.h.
#include "kiln/runtime/compile_policy.h"

#include <cstdlib>

#include <fmt/format.h>

#include "kiln/support/env.h"
#include "kiln/support/error.h"

namespace kiln {

size_t kernel_cache_capacity() {
  return static_cast<size_t>(env_int("KILN_KERNEL_CACHE_SIZE", 1, int64_t{1} << 30).value_or(4096));
}

bool compile_allowed() { return !env_flag("KILN_NO_COMPILE").value_or(false); }

void check_compile_allowed(std::string_view what) {
  if (!compile_allowed())
    throw Error(fmt::format("KILN_NO_COMPILE=1, but {} is in no cache and would be compiled", what));
}

}  // namespace kiln
