// passes/split_reductions.cpp - reductions to few values become two-level reductions.
//
// A reduction whose result has only a few elements (a sum over a whole tensor) gives a
// backend only that many independent rows, so one core does all the work; a reduction
// across rows (a column sum) can only be split across cores by columns, and then each core
// reads short pieces of many rows instead of streaming whole rows. Splitting the
// reduced extent R into P blocks turns it into a reduction to P partial results per output
// element (P rows to spread across cores) and a small reduction of the partials:
//   reduce_sum %x {axes = [0]} : f32[]   with %x: f32[16777216]
// becomes
//   %r = reshape %x : f32[64,262144]
//   %p = reduce_sum %r {axes = [1]} : f32[64]
//   %s = reduce_sum %p {axes = [0]} : f32[]
// P is the most blocks of at least the minimum length up to PassOptions::max_split_blocks,
// unless PassOptions::split_blocks (the autotuner) picks another legal count.
// Only reductions over one contiguous block of axes are split, and only sum, prod, max and
// min (argmax's position would need the block's offset). Max and min give the same bits;
// f32 sums and products compute their partials in f64 (so no block overflows where the total
// does not), but in another order than one long sum (integers are exact: wrapping arithmetic
// is associative), which is why this pass is not part of -O2 and only backends that document
// the difference run it (the cpu device: docs/runtime.md).
#include <algorithm>
#include <bit>
#include <numeric>

#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {
namespace {

// Reductions along the last axis (rows): split when they leave this few results, and each
// block is at least this long.
constexpr int64_t kFewRows = 16;
constexpr int64_t kMinRowReduced = 1 << 16;
constexpr int64_t kMinRowBlock = 1 << 12;
// Reductions across rows (the last axis is kept, as in a column sum): split when there are
// at most this many results, so that each block streams whole rows.
constexpr int64_t kMaxColumns = 1 << 16;
constexpr int64_t kMinColumnReduced = 1 << 12;
constexpr int64_t kMinColumnBlock = 1 << 6;

}  // namespace

std::string ReductionSplit::str() const {
  std::string list;
  for (int64_t a : axes) list += (list.empty() ? "" : ", ") + std::to_string(a);
  return std::string(op_name(op)) + " " + input.str() + " axes [" + list + "]";
}

std::optional<ReductionSplit> reduction_split(const Graph& g, const Node& n, int64_t max_split_blocks) {
  if (n.op != OpKind::ReduceSum && n.op != OpKind::ReduceProd && n.op != OpKind::ReduceMax && n.op != OpKind::ReduceMin)
    return std::nullopt;
  const Shape& in = g.type(n.operands[0]).shape;
  std::vector<int64_t> axes = n.attr("axes").ints;
  if (axes.empty()) return std::nullopt;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) return std::nullopt;
  int64_t reduced = 1;
  for (int64_t a : axes) reduced *= in[static_cast<int>(a)];
  const bool rows = axes.back() == in.rank() - 1;
  const int64_t results = n.type.shape.numel();
  int64_t min_block = 0;
  if (rows && results <= kFewRows && reduced >= kMinRowReduced) min_block = kMinRowBlock;
  if (!rows && results <= kMaxColumns && reduced >= kMinColumnReduced) min_block = kMinColumnBlock;
  if (min_block == 0) return std::nullopt;
  ReductionSplit site{n.op, n.attrs, axes, g.type(n.operands[0]), n.type, {1}, 1};
  const auto most = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(max_split_blocks, 1))));
  for (int64_t p = 2; p <= 2 * most && reduced % p == 0 && reduced / p >= min_block; p *= 2) {
    site.blocks.push_back(p);
    if (p <= most) site.default_blocks = p;
  }
  if (site.default_blocks == 1) return std::nullopt;
  return site;
}

Graph reduction_graph(const ReductionSplit& site) {
  Graph g("split_site");
  const ValueId x = g.add_input("x", site.input);
  Expected<ValueId> r = g.add(site.op, std::span<const ValueId>(&x, 1), site.attrs);
  if (!r) throw Error(r.error().str());
  g.add_output(*r);
  return g;
}

Graph split_reductions(const Graph& g, const PassOptions& options) {
  passes::Rewriter r(g, /*keep_kernels=*/false);
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    const std::optional<ReductionSplit> site =
        n.kernel >= 0 ? std::nullopt : reduction_split(g, n, options.max_split_blocks);
    int64_t blocks = site ? site->default_blocks : 1;
    if (site && options.split_blocks) {
      const int64_t chosen = options.split_blocks(*site);
      if (std::find(site->blocks.begin(), site->blocks.end(), chosen) != site->blocks.end()) blocks = chosen;
    }
    if (blocks == 1) {
      r.copy(v);
      continue;
    }
    const Shape& in = site->input.shape;
    const std::vector<int64_t>& axes = site->axes;
    const int first = static_cast<int>(axes.front()), last = static_cast<int>(axes.back());
    int64_t reduced = 1;
    for (int64_t a : axes) reduced *= in[static_cast<int>(a)];
    // [pre..., blocks, reduced / blocks, post...]
    Shape blocked, partial, total;
    for (int d = 0; d < first; ++d) blocked.push_back(in[d]);
    blocked.push_back(blocks);
    blocked.push_back(reduced / blocks);
    for (int d = last + 1; d < in.rank(); ++d) blocked.push_back(in[d]);
    for (int d = 0; d < blocked.rank(); ++d)
      if (d != first + 1) partial.push_back(blocked[d]);
    for (int d = 0; d < partial.rank(); ++d)
      if (d != first) total.push_back(partial[d]);
    // f32 sums and products run in f64 across the split (a cast that fuses into the first
    // kernel): partials in f32 could overflow where the total does not.
    const bool widen = n.type.dtype == DType::F32 && (n.op == OpKind::ReduceSum || n.op == OpKind::ReduceProd);
    const DType t = widen ? DType::F64 : n.type.dtype;
    Node reshape;
    reshape.op = OpKind::Reshape;
    reshape.type = TensorType{g.type(n.operands[0]).dtype, blocked};
    reshape.operands = {r.map(n.operands[0])};
    reshape.attrs = Graph::make_attrs(OpKind::Reshape);
    ValueId x = r.add(std::move(reshape));
    auto cast = [&](ValueId value, DType to) {
      Node c;
      c.op = OpKind::Cast;
      c.type = TensorType{to, r.out().type(value).shape};
      c.operands = {value};
      c.attrs = Graph::make_attrs(OpKind::Cast);
      return r.add(std::move(c));
    };
    if (widen) x = cast(x, DType::F64);
    auto reduce = [&](ValueId operand, int64_t axis, Shape shape) {
      Node red;
      red.op = n.op;
      red.type = TensorType{t, std::move(shape)};
      red.operands = {operand};
      red.attrs = Graph::make_attrs(n.op);
      red.attr("axes").present = true;
      red.attr("axes").ints = {axis};
      return r.add(std::move(red));
    };
    const ValueId p = reduce(x, first + 1, partial);
    ValueId result = reduce(p, first, total);
    if (widen) result = cast(result, n.type.dtype);
    if (!(total == n.type.shape)) {  // keepdim: the reduced axes come back as 1s
      Node back;
      back.op = OpKind::Reshape;
      back.type = n.type;
      back.operands = {result};
      back.attrs = Graph::make_attrs(OpKind::Reshape);
      result = r.add(std::move(back));
    }
    r.out().node(result).name = n.name;
    r.set(v, result);
  }
  return r.finish();
}

}  // namespace kiln
