// backends/cpu/kernel_abi.h - the calling convention of every generated CPU kernel.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cpu {

/// `args` holds the buffers in Kernel::buffers order, then one pointer per scalar argument
/// (Kernel::scalars) to a value of its dtype (bool: one byte); [begin, end) is the range of
/// iterations (Schedule::iterations) this call runs.
using KernelFn = void (*)(void* const* args, int64_t begin, int64_t end);

/// Where a GEMM micro-kernel (gemm_codegen.h) reads an operand that is not a packed panel.
struct MicroKernelForm {
  /// A read in place, row-major: element (i, p) at A[i * lda + p], args[5] pointing to lda
  /// (the attention kernel's exps, which its softmax leaves in rows).
  bool a_rows = false;
  /// B's step p read at args[1] + offsets[p], args[4] pointing to the steps' int64 offsets
  /// (a convolution's windows in place: GemmSchedule::windows_in_place).
  bool b_offsets = false;
  /// A's step p read at args[0] + offsets[p], its row i at + i, args[5] pointing to the
  /// steps' int64 offsets (a convolution's windows in place, positions in the tile's rows:
  /// GemmSchedule::channel_lanes).
  bool a_offsets = false;
  /// The tile stored transposed: its element (i, j) at C[j * ldc + i], for i below h and j
  /// below w, args[6] pointing to the int64 pair {h, w} (i <= vector width: each of the
  /// tile's columns is one masked vector store; GemmSchedule::channel_lanes).
  bool c_transposed = false;

  /// ", A in rows, B at offsets": for the micro-kernel's description.
  std::string str() const {
    return std::string(a_rows ? ", A in rows" : "") + (a_offsets ? ", A at offsets" : "") +
           (b_offsets ? ", B at offsets" : "") + (c_transposed ? ", C transposed" : "");
  }
};

}  // namespace kiln::cpu
