// backends/cpu/llvm_codegen.h - Kernel IR -> an LLVM function.
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "kiln/codegen/kernel_ir.h"
#include "kiln/codegen/schedule.h"
#include "kernel_abi.h"

namespace kiln::cpu {

/// Emits `k` as function `fn_name` (with KernelFn's signature, kernel_abi.h) into a new module, walking
/// the domain as `schedule` says (vector width, accumulator chains, unroll, tiles, row cache).
/// `f16c`: the host converts f32 to f16 in vector registers (x86's F16C).
std::unique_ptr<llvm::Module> emit_kernel(const kir::Kernel& k, const kir::Schedule& schedule,
                                          const std::string& fn_name, llvm::LLVMContext& ctx, bool f16c);

}  // namespace kiln::cpu
