// onnx/op_history.cpp - ONNX's op versions, from the table onnx/op_history.py generates.
#include "op_history.h"

#include <algorithm>
#include <cstdint>

namespace kiln::onnx::detail {
namespace {

#define KILN_ONNX_LAST_OPSET(n) constexpr int kLastOpset = n;
#define KILN_ONNX_OP(op, version, change)
#include "op_history.inc"
#undef KILN_ONNX_OP
#undef KILN_ONNX_LAST_OPSET

// Sorted by op, then version (the generator writes it so).
constexpr OpVersion kHistory[] = {
#define KILN_ONNX_LAST_OPSET(n)
#define KILN_ONNX_OP(op, version, change) {#op, version, std::string_view(#change) == "Types"},
#include "op_history.inc"
#undef KILN_ONNX_OP
#undef KILN_ONNX_LAST_OPSET
};

}  // namespace

int last_known_opset() { return kLastOpset; }

std::span<const OpVersion> op_versions(std::string_view op) {
  const auto lo = std::lower_bound(std::begin(kHistory), std::end(kHistory), op,
                                   [](const OpVersion& v, std::string_view o) { return v.op < o; });
  auto hi = lo;
  while (hi != std::end(kHistory) && hi->op == op) ++hi;
  return {lo, hi};
}

int op_version_at(std::string_view op, int64_t opset) {
  int in_force = 0;
  for (const OpVersion& v : op_versions(op))
    if (v.version <= opset) in_force = v.version;
  return in_force;
}

}  // namespace kiln::onnx::detail
