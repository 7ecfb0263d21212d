// backends/cpu/packing.h - operand panels as the GEMM micro-kernel reads them
// (gemm_codegen.h): A in panels of mr rows, B in panels of nr columns, zero-padded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::cpu {

// rows x depth of A (steps rs along a row, cs along the depth) as panels of mr rows: per
// step of the depth, mr values. kUnitDepth (cs == 1, a row-major A) is compiled apart: the
// general step slowed the attention-shaped product's packing by a tenth.
template <class T, bool kUnitDepth>
void pack_a_panels(const T* a, int64_t rs, int64_t cs, int64_t rows, int64_t depth, int mr, T* out) {
  for (int64_t i0 = 0; i0 < rows; i0 += mr) {
    const int64_t h = std::min<int64_t>(mr, rows - i0);
    const T* panel = a + i0 * rs;
    for (int64_t p = 0; p < depth; ++p) {
      const T* column = panel + (kUnitDepth ? p : p * cs);
      for (int64_t i = 0; i < h; ++i) out[i] = column[i * rs];
      for (int64_t i = h; i < mr; ++i) out[i] = T(0);
      out += mr;
    }
  }
}

template <class T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t rows, int64_t depth, int mr, T* out) {
  if (cs == 1) pack_a_panels<T, true>(a, rs, cs, rows, depth, mr, out);
  else pack_a_panels<T, false>(a, rs, cs, rows, depth, mr, out);
}

// depth x cols of B (steps rs along the depth, cs along a row) as panels of nr columns: per
// step of the depth, nr values.
template <class T>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t depth, int64_t cols, int nr, T* out) {
  for (int64_t j0 = 0; j0 < cols; j0 += nr, out += depth * nr) {
    const int64_t w = std::min<int64_t>(nr, cols - j0);
    for (int64_t p = 0; p < depth; ++p) {
      if (cs == 1) std::memcpy(out + p * nr, b + p * rs + j0, static_cast<size_t>(w) * sizeof(T));
      std::fill(out + p * nr + w, out + (p + 1) * nr, T(0));
    }
    if (cs == 1) continue;
    // Columns apart (a transposed B): each is walked down the depth, along which it is
    // contiguous when B is a transpose, rather than gathering a row of the panel per step.
    for (int64_t j = 0; j < w; ++j) {
      const T* column = b + (j0 + j) * cs;
      for (int64_t p = 0; p < depth; ++p) out[p * nr + j] = column[p * rs];
    }
  }
}

}  // namespace kiln::cpu
