// kiln/codegen/c_source.h - Kernel IR printed as source for the C-family backends.
//
// One emitter walks every kernel (codegen/c_emitter.cpp); a dialect per language says how
// it is spelled. The kernel's entry point is named after the kernel (`k0`), takes its
// buffers (`b0, b1...`, Kernel::buffers order, bool as one byte) and then its scalar
// arguments (`s0, s1...`, Kernel::scalars order), and runs on the schedule's launch geometry:
// `global_size` work-items in groups of `local_size`.
#pragma once

#include <span>
#include <string>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"

namespace kiln::kir {

/// OpenCL C (1.2 and later) for a device with `caps`: one program holding every kernel of
/// `kernels` (`kernels[i]` run with `schedules[i]`), each entry point named after its kernel.
/// A driver builds such a program at a fixed cost, whatever the number of kernels in it.
std::string opencl_source(std::span<const Kernel* const> kernels, std::span<const Schedule* const> schedules,
                          const Capabilities& caps);
/// The program of one kernel.
std::string opencl_source(const Kernel& k, const Schedule& s, const Capabilities& caps);

}  // namespace kiln::kir
