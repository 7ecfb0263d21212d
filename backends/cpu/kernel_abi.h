// backends/cpu/kernel_abi.h - the calling convention of every generated CPU kernel.
#pragma once

#include <cstdint>

namespace kiln::cpu {

/// `args` holds the buffers in Kernel::buffers order, then one pointer per scalar argument
/// (Kernel::scalars) to a value of its dtype (bool: one byte); [begin, end) is the range of
/// iterations (Schedule::iterations) this call runs.
using KernelFn = void (*)(void* const* args, int64_t begin, int64_t end);

}  // namespace kiln::cpu
