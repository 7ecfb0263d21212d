// backends/cpu/opencl_c_base_header.h - Clang's OpenCL C base header, as kiln was built with it.
//
// OpenCL C custom kernels are compiled with -finclude-default-header, which includes
// opencl-c-base.h from Clang's resource directory. That directory comes with Clang's
// development packages, which a machine that only runs a program linking kiln lacks (the
// lent GPU machine did: every OpenCL C custom kernel failed there). kiln carries the header
// instead and serves it to Clang from memory.
#pragma once

#include <string_view>

namespace kiln::cpu {

/// The text of opencl-c-base.h from the Clang that kiln links.
std::string_view opencl_c_base_header();

}  // namespace kiln::cpu
