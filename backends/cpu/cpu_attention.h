// backends/cpu/cpu_attention.h - attention steps on the host: blocks of query rows, an
// online softmax between two products on the GEMM's micro-kernel, the scores never in memory.
#pragma once

#include "kiln/codegen/lower.h"

namespace kiln::cpu {

/// `a` (LaunchPlan::Attention) over f32 buffers q, k, v, bias (nullptr: none) and out,
/// blocked as a.schedule says (its CPU form), tasks split across cores.
void run_attention(const LaunchPlan::Attention& a, const float* q, const float* k, const float* v, const float* bias,
                   float* out);

}  // namespace kiln::cpu
