// backends/scalar_abi.cpp - see kiln/backends/scalar_abi.h.
#include "kiln/backends/scalar_abi.h"

#include <cstring>

#include "kiln/support/error.h"

namespace kiln {

uint32_t scalar_bytes(DType t, ScalarAbi abi) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F64:
    case DType::I64: return 8;
    case DType::Bool: return abi.bool_bytes;
    default: break;
  }
  KILN_ASSERT(false, "kernels take scalars of the compute types only (dtype.h)");
}

void write_scalar(const Scalar& v, DType t, ScalarAbi abi, std::byte* out) {
  auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (t) {
    case DType::F32: return put(static_cast<float>(v.as_double()));
    case DType::F64: return put(v.as_double());
    case DType::I32: return put(static_cast<int32_t>(v.as_int()));
    case DType::I64: return put(static_cast<int64_t>(v.as_int()));
    case DType::Bool:
      std::memset(out, 0, abi.bool_bytes);
      out[0] = static_cast<std::byte>(v.as_int() != 0);
      return;
    default: break;
  }
  KILN_ASSERT(false, "kernels take scalars of the compute types only (dtype.h)");
}

}  // namespace kiln
