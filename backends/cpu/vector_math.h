// backends/cpu/vector_math.h - transcendental functions emitted inline as LLVM IR.
//
// f32 exp, log, tanh, erf and sigmoid are kiln's own (internal/kiln/codegen/f32_math.h, which
// the OpenCL and GLSL dialects print too), built from plain arithmetic, so they work on any
// vector width and vectorize with the loop around them. Every other case (f64, sin, cos, pow)
// calls the C library once per lane, in double, which is exactly what the reference
// interpreter computes.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "kiln/ir/op.h"

namespace kiln::cpu {

/// True when `op` on f32 has an inline vector implementation.
bool has_vector_math(OpKind op);

/// `op` (exp, log, tanh, erf, sigmoid) applied to `x`, a float or a vector of floats.
llvm::Value* emit_vector_math(llvm::IRBuilder<>& b, OpKind op, llvm::Value* x);

/// `op` (a unary op, or pow with `y`) through the C library's double function, one call per
/// lane; `x` (and `y`) are float or double scalars or vectors, and so is the result.
llvm::Value* emit_libm(llvm::IRBuilder<>& b, OpKind op, llvm::Value* x, llvm::Value* y = nullptr);

}  // namespace kiln::cpu
