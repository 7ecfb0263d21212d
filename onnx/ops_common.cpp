// onnx/ops_common.cpp - helpers the converters of several ops_*.cpp files share.
#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {

int64_t normalize_axis(NodeContext& c, int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    c.invalid(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Tensor along_axis(const Tensor& v, int64_t axis, int64_t rank) {
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
  dims[static_cast<size_t>(axis)] = v.numel();
  return v.reshape(dims);
}

Tensor positions_along(NodeContext& c, int64_t n, int64_t axis, int64_t rank) {
  return along_axis(kiln::arange(n, DType::I64, c.device()), axis, rank);
}

}  // namespace kiln::onnx::detail
