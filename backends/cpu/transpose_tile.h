// backends/cpu/transpose_tile.h - 8x8 tiles of floats transposed with vector shuffles, for
// the GEMM's packing (packing.h): a row-major A and a transposed B are packed across their
// rows, which element by element costs three cycles a float (a tenth of a GPT-2 block's
// training step went to packing).
#pragma once

#include <cstdint>

namespace kiln::cpu {

/// Whether this CPU runs transpose_8x8 (AVX on x86-64; checked once).
bool can_transpose_8x8();

/// dst[c * dst_stride + r] = src[r * src_stride + c] for r, c in [0, 8). Only where
/// can_transpose_8x8().
void transpose_8x8(const float* src, int64_t src_stride, float* dst, int64_t dst_stride);

/// even[i] = src[2 * i], odd[i] = src[2 * i + 1] for i in [0, pairs): a stride-2
/// convolution's input line split into the two phases its windows read (cpu_gemm.cpp's
/// PaddedWindows). Any CPU; vector shuffles where it has AVX2.
void deinterleave_pairs(const float* src, int64_t pairs, float* even, float* odd);

}  // namespace kiln::cpu
