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

// Each batch entry's first sequence_lens[b] steps in reverse, the rest as they are: a gather
// along time at lens - 1 - t where t < lens, else t.
std::vector<Tensor> ReverseSequence(NodeContext& c) {
  const Tensor x = c.input(0);
  const int64_t time = c.attr_int("time_axis", 0), batch = c.attr_int("batch_axis", 1), r = x.rank();
  if (r < 2 || !((time == 0 && batch == 1) || (time == 1 && batch == 0)))
    c.invalid(fmt::format("time_axis {} and batch_axis {} must be 0 and 1 (in either order) of a rank >= 2 input", time,
                          batch));
  const Tensor lens = along_axis(c.input(1).to(DType::I64), batch, r);
  const Tensor t = positions_along(c, x.size(time), time, r);
  const Tensor at = where(t < lens, lens - t - 1, t);
  return {x.gather(time, at.expand(dims_of(x.shape())))};
}

// MaxPool's values written back at its indices (flat positions in the whole unpooled tensor)
// into zeros: a scatter. An output_shape larger than the unpooled shape pads it at the end
// of each dim (the indices keep the unpooled layout).
std::vector<Tensor> MaxUnpool(NodeContext& c) {
  const Tensor x = c.input(0), idx = index_input(c, 1);
  const int64_t r = x.rank(), spatial = r - 2;
  if (r < 3 || !(idx.shape() == x.shape())) c.invalid("X must be [N, C, ...] and I of its shape");
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  const std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(static_cast<size_t>(spatial), 1));
  const std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0));
  if (static_cast<int64_t>(kernel.size()) != spatial || static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    c.invalid("kernel_shape, strides and pads must give every spatial dim");
  std::vector<int64_t> unpooled{x.size(0), x.size(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    const auto k = static_cast<size_t>(d);
    unpooled.push_back((x.size(d + 2) - 1) * strides[k] - pads[k] - pads[k + static_cast<size_t>(spatial)] + kernel[k]);
  }
  int64_t total = 1;
  for (int64_t d : unpooled) total *= d;
  const Tensor zeros = kiln::zeros({total}, x.dtype(), c.device());
  const Tensor y = zeros.scatter(0, idx.reshape({-1}), x.reshape({-1})).reshape(unpooled);
  if (!c.has_input(2)) return {y};
  const std::vector<int64_t> out = c.ints(2, "output_shape");
  std::vector<int64_t> low(static_cast<size_t>(r), 0), high(static_cast<size_t>(r), 0);
  bool fits = static_cast<int64_t>(out.size()) == r;
  for (size_t d = 0; fits && d < out.size(); ++d) {
    high[d] = out[d] - unpooled[d];
    fits = high[d] >= 0 && (d >= 2 || high[d] == 0);
  }
  if (!fits)
    c.invalid(fmt::format("its output_shape [{}] is not the unpooled shape [{}] or larger in the spatial dims",
                          fmt::join(out, ", "), fmt::join(unpooled, ", ")));
  return {y.pad(low, high)};
}

// TopK: kiln's topk (a stable rank, then a scatter); `sorted` = 0 leaves the order to the
// implementation, which sorts anyway.
std::vector<Tensor> TopK(NodeContext& c) {
  const Tensor x = c.input(0);
  const std::vector<int64_t> k = c.version() >= 10 ? c.ints(1, "K") : std::vector<int64_t>{c.attr_int("k")};
  if (k.size() != 1) c.invalid("its K must hold one value");
  const auto [values, indices] =
      x.topk(k[0], normalize_axis(c, c.attr_int("axis", -1), x.rank(), "axis"), c.attr_int("largest", 1) != 0);
  return {values, indices};
}

constexpr std::string_view kAxis[] = {"axis"};
constexpr std::string_view kTopK[] = {"axis", "k", "largest", "sorted"};
constexpr std::string_view kReverseSequence[] = {"batch_axis", "time_axis"};
constexpr std::string_view kMaxUnpool[] = {"kernel_shape", "pads", "strides"};
constexpr std::string_view kAxisReduction[] = {"axis", "reduction"};
constexpr std::string_view kReduction[] = {"reduction"};
constexpr std::string_view kBatchDims[] = {"batch_dims"};

}  // namespace

const ConverterRow kIndexRows[] = {
    {"Gather", 1, 13, Gather, kAxis},
    {"GatherElements", 11, 13, GatherElements, kAxis},
    {"GatherND", 11, 13, GatherND, kBatchDims},
    {"Scatter", 9, 11, ScatterElements, kAxis},
    {"ScatterElements", 11, 18, ScatterElements, kAxisReduction},
    {"ScatterND", 11, 18, ScatterND, kReduction},
    {"ReverseSequence", 10, 28, ReverseSequence, kReverseSequence},
    {"MaxUnpool", 9, 22, MaxUnpool, kMaxUnpool},
    {"TopK", 1, 24, TopK, kTopK},
};
const std::span<const ConverterRow> index_rows = kIndexRows;

}  // namespace kiln::onnx::detail
