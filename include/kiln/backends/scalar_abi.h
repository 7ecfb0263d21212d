// kiln/backends/scalar_abi.h - how a kernel receives a scalar argument, written once.
//
// A scalar is one element of its dtype, in the host's byte order; only a bool differs between
// devices: one byte on cpu (the generated code's i8) and in OpenCL C (uchar), a 32-bit uint in
// a GLSL push-constant block (GLSL has no smaller integer there). Each backend declares its
// ScalarAbi once; sizes, alignment and the bytes written come from here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/ir/attrs.h"
#include "kiln/ir/dtype.h"

namespace kiln {

struct ScalarAbi {
  uint32_t bool_bytes = 1;  // 0 or 1 in the low byte, the rest zero
};

/// The bytes a scalar of `t` takes (and its alignment, in a block of them).
uint32_t scalar_bytes(DType t, ScalarAbi abi);

/// Writes `v` as a `t` at `out`: scalar_bytes(t, abi) bytes. `t` is a compute type.
void write_scalar(const Scalar& v, DType t, ScalarAbi abi, std::byte* out);

}  // namespace kiln
