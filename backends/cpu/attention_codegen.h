// backends/cpu/attention_codegen.h - the online-softmax step of the cpu attention kernel, as
// LLVM IR.
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "kernel_abi.h"

namespace kiln::cpu {

/// Emits, with KernelFn's signature, the online softmax of a block of scores, row by row:
///   args[0] S: `rows` rows of `ld` floats (a multiple of `vector_width`; padding holds -inf),
///   args[1] m, args[2] l: each row's running maximum and sum, updated,
///   args[3] alpha: written, the factor the row's earlier output accumulators are scaled by;
/// called as fn(args, rows, ld). Per row: m' = max(m, max(S)); S = exp(S - m'), l = l *
/// exp(m - m') + sum(S), alpha = exp(m - m'); while m' is -inf (every score so far masked)
/// S = 0 and alpha = 1. exp is vector_math's; a NaN score is the caller's to detect.
std::unique_ptr<llvm::Module> emit_attention_softmax(int vector_width, const std::string& fn_name,
                                                     llvm::LLVMContext& ctx);

}  // namespace kiln::cpu
