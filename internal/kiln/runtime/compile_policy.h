// kiln/runtime/compile_policy.h - what every compiling backend reads from the environment
// about compiling (docs/runtime.md, "Environment").
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

/// How many compiled kernels a backend keeps alive in its LRU beyond those cached plans
/// hold: $KILN_KERNEL_CACHE_SIZE, default 4096 (a malformed value is a kiln::Error).
size_t kernel_cache_capacity();

/// False when KILN_NO_COMPILE=1: nothing may be compiled (nor tuned) in this process.
bool compile_allowed();

/// Throws kiln::Error "KILN_NO_COMPILE=1, but <what> is in no cache and would be compiled"
/// when KILN_NO_COMPILE=1; a backend calls it before compiling anything.
void check_compile_allowed(std::string_view what);

}  // namespace kiln
