// backends/cpu/clang_compiler.h - custom kernels' C and OpenCL C, compiled in-process by Clang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "kiln/ir/custom_kernel.h"

namespace kiln::cpu {

/// "clang 19.1.7": part of the key of every kernel that calls a custom kernel.
std::string clang_version();

/// `k`'s source compiled by Clang for the host with `macros` defined, as LLVM bitcode
/// (memoized). OpenCL C builtins the source calls are defined in the module from libm and
/// LLVM intrinsics. Throws kiln::Error with Clang's diagnostics (`file:line:col: error: ...`
/// inside the user's source), when the source does not define an external function named
/// after the kernel, or when that function's parameters and result are not the signature's.
std::string custom_bitcode(const CustomKernel& k, const std::vector<std::pair<std::string, int64_t>>& macros);

/// Compiles `k` at `macros` to check it (diagnostics, prototype) without keeping the result,
/// and without defining OpenCL builtins: those matter only where `cpu` runs the kernel.
void check_custom_source(const CustomKernel& k, const std::vector<std::pair<std::string, int64_t>>& macros);

/// The bitcode read into `ctx`, every definition internal but the kernel's function, which
/// is renamed `symbol` and marked always-inline: ready to link into a kernel's module.
std::unique_ptr<llvm::Module> custom_module(const std::string& bitcode, const CustomKernel& k, const std::string& symbol,
                                            llvm::LLVMContext& ctx);

}  // namespace kiln::cpu
