// onnx/ops_index.cpp - Gather, GatherElements and GatherND: kiln's gather op, whose indices
// are read at run time (an index outside its axis gives 0 where ONNX leaves it undefined).
#include <fmt/format.h>

#include "ops.h"

namespace kiln::onnx::detail {
namespace {

Tensor index_input(NodeContext& c, size_t i) {
  Tensor t = c.input(i);
  if (t.dtype() != DType::I32 && t.dtype() != DType::I64)
    c.invalid(fmt::format("its indices are {}, not int32 or int64", dtype_name(t.dtype())));
  return t;
}

std::vector<Tensor> Gather(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1);
  return {x.take(idx, normalize_axis(c, c.attr_int("axis", 0), x.rank(), "axis"))};
}

std::vector<Tensor> GatherElements(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1);
  if (idx.rank() != x.rank()) c.invalid(fmt::format("its indices have rank {}, the data rank {}", idx.rank(), x.rank()));
  return {x.gather(normalize_axis(c, c.attr_int("axis", 0), x.rank(), "axis"), idx)};
}

// indices [B..., M..., k] pick data[B..., i0, .., ik-1, rest...]: the k components become one
// position in the k indexed dims flattened, which kiln's gather reads along.
std::vector<Tensor> GatherND(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1);
  const int64_t b = c.attr_int("batch_dims", 0), r = x.rank(), q = idx.rank();
  if (q < 1 || b < 0 || b >= std::min(r, q)) c.invalid(fmt::format("batch_dims {} does not fit data rank {} and indices rank {}", b, r, q));
  const int64_t k = idx.size(-1);
  if (k < 1 || k > r - b) c.invalid(fmt::format("indices' last dim {} is not in [1, {}]", k, r - b));
  for (int64_t d = 0; d < b; ++d)
    if (idx.size(d) != x.size(d)) c.invalid(fmt::format("batch dim {} is {} in the indices and {} in the data", d, idx.size(d), x.size(d)));
  int64_t batch = 1, picked = 1, rest = 1, points = 1;
  for (int64_t d = 0; d < r; ++d) (d < b ? batch : d < b + k ? picked : rest) *= x.size(d);
  for (int64_t d = b; d < q - 1; ++d) points *= idx.size(d);
  // The flat position in the picked dims; any component outside its dim makes it -picked - 1,
  // outside too, so that a bad index reads 0 rather than another element.
  Tensor flat, valid;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t extent = x.size(b + j);
    Tensor i = idx.slice(-1, j, j + 1).to(DType::I64);
    i = kiln::where(i < 0, i + extent, i);
    const Tensor inside = (i >= 0) & (i < extent);
    valid = j == 0 ? inside : valid & inside;
    flat = j == 0 ? i : flat * extent + i;
  }
  flat = kiln::where(valid, flat, kiln::full({}, -picked - 1, DType::I64, c.device()));
  const Tensor at = flat.reshape({batch, points, 1}).expand({batch, points, rest});
  std::vector<int64_t> out(idx.shape().begin(), idx.shape().end() - 1);
  for (int64_t d = b + k; d < r; ++d) out.push_back(x.size(d));
  return {x.reshape({batch, picked, rest}).gather(1, at).reshape(out)};
}

constexpr std::string_view kAxis[] = {"axis"};
constexpr std::string_view kBatchDims[] = {"batch_dims"};

}  // namespace

const ConverterRow kIndexRows[] = {
    {"Gather", 1, Gather, kAxis},
    {"GatherElements", 11, GatherElements, kAxis},
    {"GatherND", 11, GatherND, kBatchDims},
};
const std::span<const ConverterRow> index_rows = kIndexRows;

}  // namespace kiln::onnx::detail
