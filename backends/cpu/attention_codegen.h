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
///   args[0] S: `rows` rows of `cols` scores, `*args[5]` floats apart (a multiple of
///           `vector_width` at least `cols` rounded up to whole vectors);
///   args[1] m, args[2] l: each row's running maximum and sum, updated;
///   args[3] alpha: written, the factor the row's earlier output accumulators are scaled by;
///   args[4] the scale (one float), args[5] the row stride (one int64);
///   args[6] one byte per row, set to 1 where a scaled score is NaN (left alone elsewhere);
///   args[7] the bias, `cols` floats per row, `*args[8]` (an int64) apart; null: none;
/// called as fn(args, rows, cols). Per row, with x = scale * S + bias: m' = max(m, max(x)), S =
/// exp(x - m') (0 past `cols`), l = l * exp(m - m') + sum(S), alpha = exp(m - m'); while m' is
/// -inf (every score so far masked) S = 0 and alpha = 1. exp is vector_math's.
std::unique_ptr<llvm::Module> emit_attention_softmax(int vector_width, const std::string& fn_name,
                                                     llvm::LLVMContext& ctx);

}  // namespace kiln::cpu
