// codegen/cpu/llvm_codegen.h - Kernel IR -> an LLVM function.
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "kiln/codegen/kernel_ir.h"

namespace kiln::cpu {

/// The signature of every generated kernel: buffers in Kernel::buffers order, and the
/// half-open range of iterations (Schedule::iterations) this call runs.
using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

/// Emits `k` as function `fn_name` (with KernelFn's signature) into a new module.
/// `vector_bytes` is the widest vector register of the target (64 with AVX-512, 32 with
/// AVX2, 16 otherwise): the inner loop handles that many bytes of the widest element type
/// per step.
std::unique_ptr<llvm::Module> emit_kernel(const kir::Kernel& k, const std::string& fn_name, int vector_bytes,
                                          llvm::LLVMContext& ctx);

}  // namespace kiln::cpu
