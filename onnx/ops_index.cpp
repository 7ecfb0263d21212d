// onnx/ops_index.cpp - Gather, GatherElements, GatherND onto kiln's gather; ScatterElements,
// Scatter and ScatterND onto its scatter. Indices are read at run time; where ONNX leaves an
// index outside its axis undefined, a gather reads 0 and a scatter drops the update.
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

// The flat position in the first k dims of `x` of each k-component index of `idx` (its last
// dim), a negative component counting from the end; any component outside its dim makes the
// position -count - 1, outside too, so that a bad index reads 0 (or is dropped) rather than
// meeting another element.
Tensor flat_positions(const Tensor& x, const Tensor& idx, int64_t first, int64_t k, int64_t count) {
  Tensor flat, valid;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t extent = x.size(first + j);
    Tensor i = idx.slice(-1, j, j + 1).to(DType::I64);
    i = kiln::where(i < 0, i + extent, i);
    const Tensor inside = (i >= 0) & (i < extent);
    valid = j == 0 ? inside : valid & inside;
    flat = j == 0 ? i : flat * extent + i;
  }
  return kiln::where(valid, flat, kiln::full({}, -count - 1, DType::I64, x.device()));
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
  const Tensor flat = flat_positions(x, idx, b, k, picked);
  const Tensor at = flat.reshape({batch, points, 1}).expand({batch, points, rest});
  std::vector<int64_t> out(idx.shape().begin(), idx.shape().end() - 1);
  for (int64_t d = b + k; d < r; ++d) out.push_back(x.size(d));
  return {x.reshape({batch, picked, rest}).gather(1, at).reshape(out)};
}

// The combining op of a Scatter* node's `reduction` (opset 16 on); none replaces.
Tensor scatter_with(NodeContext& c, const Tensor& x, int64_t axis, const Tensor& idx, const Tensor& updates) {
  if (updates.dtype() != x.dtype())
    c.invalid(fmt::format("its updates are {}, its data {}", dtype_name(updates.dtype()), dtype_name(x.dtype())));
  const std::string r = c.attr_string("reduction", "none");
  if (r == "none") return x.scatter(axis, idx, updates);
  if (r == "add") return x.scatter_reduce(axis, idx, updates, ScatterReduce::Sum);
  if (r == "mul") return x.scatter_reduce(axis, idx, updates, ScatterReduce::Prod);
  if (r == "max") return x.scatter_reduce(axis, idx, updates, ScatterReduce::Amax);
  if (r == "min") return x.scatter_reduce(axis, idx, updates, ScatterReduce::Amin);
  c.invalid(fmt::format("reduction '{}' is none of none, add, mul, max, min", r));
}

std::vector<Tensor> ScatterElements(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1), updates = c.input(2);
  if (idx.rank() != x.rank()) c.invalid(fmt::format("its indices have rank {}, the data rank {}", idx.rank(), x.rank()));
  return {scatter_with(c, x, normalize_axis(c, c.attr_int("axis", 0), x.rank(), "axis"), idx, updates)};
}

// indices [M..., k] write updates [M..., rest...] at data[i0, .., ik-1, rest...]: one flat
// position in the k indexed dims, scattered along them flattened.
std::vector<Tensor> ScatterND(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1), updates = c.input(2);
  const int64_t r = x.rank(), q = idx.rank(), k = q >= 1 ? idx.size(-1) : 0;
  if (q < 1 || k < 1 || k > r) c.invalid(fmt::format("indices' last dim {} is not in [1, {}]", k, r));
  int64_t picked = 1, rest = 1, points = 1;
  for (int64_t d = 0; d < r; ++d) (d < k ? picked : rest) *= x.size(d);
  for (int64_t d = 0; d < q - 1; ++d) points *= idx.size(d);
  std::vector<int64_t> want(idx.shape().begin(), idx.shape().end() - 1);
  for (int64_t d = k; d < r; ++d) want.push_back(x.size(d));
  if (!(updates.shape() == Shape(want)))
    c.invalid(fmt::format("its updates are {}, not {}", updates.shape().str(), Shape(want).str()));
  const Tensor at = flat_positions(x, idx, 0, k, picked).reshape({points, 1}).expand({points, rest});
  return {scatter_with(c, x.reshape({picked, rest}), 0, at, updates.reshape({points, rest})).reshape(dims_of(x.shape()))};
}

constexpr std::string_view kAxis[] = {"axis"};
constexpr std::string_view kAxisReduction[] = {"axis", "reduction"};
constexpr std::string_view kReduction[] = {"reduction"};
constexpr std::string_view kBatchDims[] = {"batch_dims"};

}  // namespace

const ConverterRow kIndexRows[] = {
    {"Gather", 1, Gather, kAxis},
    {"GatherElements", 11, GatherElements, kAxis},
    {"GatherND", 11, GatherND, kBatchDims},
    {"Scatter", 9, ScatterElements, kAxis},
    {"ScatterElements", 11, ScatterElements, kAxisReduction},
    {"ScatterND", 11, ScatterND, kReduction},
};
const std::span<const ConverterRow> index_rows = kIndexRows;

}  // namespace kiln::onnx::detail
