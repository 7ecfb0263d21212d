// backends/cpu/gemm_codegen.h - the register-blocked GEMM micro-kernel, as LLVM IR.
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "kiln/codegen/schedule.h"
#include "kiln/ir/dtype.h"
#include "kernel_abi.h"

namespace kiln::cpu {

/// Emits, with KernelFn's signature, `C[mr x nr] (+)= A x B` for one register tile:
///   args[0] packed A: `kc` steps of `mr` values (a column of the tile's rows per step),
///   args[1] B: `kc` steps of `nr` values (a row of the tile's columns per step),
///   args[2] C, row-major with `ldc` elements per row;
///   args[3] null to overwrite C with the tile (the first panel of the depth), else C += tile;
///   args[4] points to B's row stride in elements: `nr` when packed, the matrix's own when a
///   product of one row panel reads B in place;
/// called as fn(args, kc, ldc). The tile lives in mr x nr/vector_width vector registers
/// for the whole depth; floats accumulate with llvm.fmuladd, integers wrap. Each step
/// prefetches packed A `s.prefetch_a` steps ahead (none when 0, or with A not packed). `form`
/// reads A or B elsewhere, or stores the tile transposed (MicroKernelForm, kernel_abi.h).
std::unique_ptr<llvm::Module> emit_gemm_microkernel(const kir::GemmSchedule& s, DType t, const std::string& fn_name,
                                                    llvm::LLVMContext& ctx, const MicroKernelForm& form = {});

}  // namespace kiln::cpu
