// backends/cpu/packing.h - operand panels as the GEMM micro-kernel reads them
// (gemm_codegen.h): A in panels of mr rows, B in panels of nr columns, zero-padded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "transpose_tile.h"

namespace kiln::cpu {

// n elements from `in`: a panel's runs are 8 to 32 elements, which a call to memcpy would
// take longer to copy than the copy itself.
template <class T>
inline void copy_run(T* out, const T* in, int64_t n) {
  switch (n) {
    case 8: std::memcpy(out, in, 8 * sizeof(T)); return;
    case 16: std::memcpy(out, in, 16 * sizeof(T)); return;
    case 32: std::memcpy(out, in, 32 * sizeof(T)); return;
    default: std::memcpy(out, in, static_cast<size_t>(n) * sizeof(T));
  }
}

// rows x depth of A (steps rs along a row, cs along the depth) as panels of mr rows: per
// step of the depth, mr values. kUnitDepth (cs == 1, a row-major A) is compiled apart: the
// general step slowed the attention-shaped product's packing by a tenth.
template <class T, bool kUnitDepth>
void pack_a_panels(const T* a, int64_t rs, int64_t cs, int64_t rows, int64_t depth, int mr, T* out) {
  // Whole panels of 8 float rows, 8 steps of the depth at a time, as tiles transposed.
  constexpr bool kFloat = std::is_same_v<T, float>;
  const bool tiles = kFloat && kUnitDepth && mr == 8 && can_transpose_8x8();
  for (int64_t i0 = 0; i0 < rows; i0 += mr) {
    const int64_t h = std::min<int64_t>(mr, rows - i0);
    const T* panel = a + i0 * rs;
    int64_t p = 0;
    if constexpr (kFloat && kUnitDepth) {
      if (tiles && h == mr)
        for (; p + 8 <= depth; p += 8, out += 8 * mr) transpose_8x8(panel + p, rs, out, mr);
    }
    for (; p < depth; ++p) {
      const T* column = panel + (kUnitDepth ? p : p * cs);
      if (!kUnitDepth && rs == 1) {  // a transposed A: the panel's step is a run in memory
        copy_run(out, column, h);
      } else {
        for (int64_t i = 0; i < h; ++i) out[i] = column[i * rs];
      }
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
      if (cs == 1) copy_run(out + p * nr, b + p * rs + j0, w);
      std::fill(out + p * nr + w, out + (p + 1) * nr, T(0));
    }
    if (cs == 1) continue;
    // Columns apart (a transposed B): each is walked down the depth, along which it is
    // contiguous when B is a transpose, rather than gathering a row of the panel per step;
    // for floats, 8 columns by 8 steps at a time, as tiles transposed.
    int64_t whole = 0;
    if constexpr (std::is_same_v<T, float>) {
      if (rs == 1 && can_transpose_8x8()) {
        whole = depth / 8 * 8;
        for (int64_t j = 0; j + 8 <= w; j += 8)
          for (int64_t p = 0; p < whole; p += 8) transpose_8x8(b + (j0 + j) * cs + p, cs, out + p * nr + j, nr);
        for (int64_t j = w / 8 * 8; j < w; ++j)  // the columns past the last tile, all steps
          for (int64_t p = 0; p < whole; ++p) out[p * nr + j] = b[(j0 + j) * cs + p];
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      const T* column = b + (j0 + j) * cs;
      for (int64_t p = whole; p < depth; ++p) out[p * nr + j] = column[p * rs];
    }
  }
}

}  // namespace kiln::cpu
