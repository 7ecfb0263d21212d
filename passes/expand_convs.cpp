// passes/expand_convs.cpp - a convolution too narrow for the GEMM becomes the contraction of
// its windows.
//
//   %y = conv %x, %w {strides = [1, 1], low = [1, 1], high = [1, 1], groups = 96} : f32[1,96,112,112]
// with 1 filter per group (a depthwise conv) becomes
//   %p = pad %x ...; %u = unfold %p ... (a view of x's windows: [1, 96, 112, 112, 3, 3])
//   %v = permute %u {perm = [0, 1, 2, 4, 5, 3]} : [1, 96, 112, 3, 3, 112]
//   %f = reshape %w : [1, 96, 1, 3, 3, 1]
//   %y = reduce_sum (mul %v, %f) {axes = [3, 4]} : [1, 96, 112, 112]
// which fusion makes one reduction kernel whose innermost dim is the last output dim: its
// loops run along output rows in vectors, summing the window's taps, with the conv's
// epilogue fused. In general the windows are laid out as
// [N, G, (M/G), o1..o(n-1), (C/G), k1..kn, on], an axis of one left out, and the sum is over
// (C/G) and the window; past kiln's rank 8 (3-D with several channels and filters per
// group) the output positions share one axis instead. A GEMM step of fewer than
// kMinGemmSide rows (filters per group) or columns (output positions: a 1x1 conv of a
// pooled [N, C, 1, 1], as squeeze-and-excitation blocks have) would fill its register tiles
// with padding; the reduction kernel reads each weight once instead.
#include <algorithm>

#include "kiln/ir/conv.h"
#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {
namespace {

// Filters per group, or output positions, below which a conv is expanded: the GEMM's
// register tiles are 4 to 8 rows by 16 to 32 columns on the cpu.
constexpr int64_t kMinGemmSide = 8;

}  // namespace

Graph expand_convs(const Graph& g, const PassOptions&) {
  passes::Rewriter r(g);
  auto add = [&](OpKind op, std::vector<ValueId> operands, Attrs attrs, const Shape* declared, const Node& at) {
    std::vector<TensorType> types;
    for (ValueId o : operands) types.push_back(r.out().type(o));
    const TensorType want = declared ? TensorType{types[0].dtype, *declared} : TensorType{};
    Node n;
    n.op = op;
    n.type = infer_type(op, types, attrs, declared ? &want : nullptr).take();
    n.operands = std::move(operands);
    n.attrs = std::move(attrs);
    n.loc = at.loc;
    n.kernel = -1;
    return r.add(std::move(n));
  };
  auto attrs = [](OpKind op, std::initializer_list<std::pair<const char*, std::vector<int64_t>>> ints,
                  std::initializer_list<std::pair<const char*, int64_t>> scalars = {}) {
    Attrs a = Graph::make_attrs(op);
    for (const auto& [name, v] : ints) {
      AttrValue& slot = a[static_cast<size_t>(attr_index(op, name))];
      slot.present = true;
      slot.ints = v;
    }
    for (const auto& [name, v] : scalars) {
      AttrValue& slot = a[static_cast<size_t>(attr_index(op, name))];
      slot.present = true;
      slot.i = v;
    }
    return a;
  };
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op != OpKind::Conv || n.kernel >= 0) {
      if (n.op != OpKind::Input) r.copy(v);
      continue;
    }
    const ConvGeometry geo = conv_geometry(g.type(n.operands[0]).shape, g.type(n.operands[1]).shape, n.attrs).take();
    if (geo.out_channels_per_group() >= kMinGemmSide && geo.positions() >= kMinGemmSide) {
      r.copy(v);
      continue;
    }
    const auto dims = static_cast<size_t>(geo.dims);
    // Padded by `low`, and at the end by what the last window reaches past the input.
    std::vector<int64_t> low(2, 0), high(2, 0);
    for (size_t d = 0; d < dims; ++d) {
      const int64_t reach = (geo.out[d] - 1) * geo.strides[d] + (geo.kernel[d] - 1) * geo.dilations[d] + 1;
      low.push_back(geo.low[d]);
      high.push_back(std::max<int64_t>(0, reach - geo.in[d] - geo.low[d]));
    }
    ValueId x = add(OpKind::Pad, {r.map(n.operands[0])}, attrs(OpKind::Pad, {{"low", low}, {"high", high}}), nullptr, n);
    for (size_t d = 0; d < dims; ++d) {
      const auto axis = static_cast<int64_t>(d + 2);
      x = add(OpKind::Unfold, {x},
              attrs(OpKind::Unfold, {}, {{"axis", axis}, {"size", geo.kernel[d]}, {"step", geo.strides[d]},
                                         {"dilation", geo.dilations[d]}}),
              nullptr, n);
      const Shape& s = r.out().type(x).shape;
      std::vector<int64_t> start(static_cast<size_t>(s.rank()), 0), stop(s.begin(), s.end());
      stop[d + 2] = geo.out[d];
      x = add(OpKind::Slice, {x}, attrs(OpKind::Slice, {{"start", start}, {"stop", stop}}), nullptr, n);
    }
    const int64_t groups = geo.groups, cg = geo.channels_per_group(), mg = geo.out_channels_per_group();
    const ValueId wv = r.map(n.operands[1]);
    auto reshape = [&](ValueId of, const Shape& s) { return add(OpKind::Reshape, {of}, Graph::make_attrs(OpKind::Reshape), &s, n); };
    // x's windows, [N, C, o1..on, k1..kn], laid out as [N, G, (Mg), o1..o(n-1), (Cg), k1..kn, on]
    // (the axes of exactly one skipped; an empty one stays): the sum over (Cg) and the window is then over middle axes,
    // and the kernel's innermost dim is the last output dim, which its loops vectorize.
    const int rank = 2 * geo.dims + 2 + (mg != 1) + (cg != 1);
    ValueId sum;
    if (rank <= Shape::kMaxRank) {
      Shape split{geo.batch, groups};
      if (cg != 1) split.push_back(cg);
      for (int64_t o : geo.out) split.push_back(o);
      for (int64_t k : geo.kernel) split.push_back(k);
      if (cg != 1) x = reshape(x, split);
      const int64_t at_o = cg != 1 ? 3 : 2, at_k = at_o + geo.dims;  // where split puts them
      std::vector<int64_t> perm{0, 1};
      for (int d = 0; d + 1 < geo.dims; ++d) perm.push_back(at_o + d);
      if (cg != 1) perm.push_back(2);
      for (int d = 0; d < geo.dims; ++d) perm.push_back(at_k + d);
      perm.push_back(at_o + geo.dims - 1);
      x = add(OpKind::Permute, {x}, attrs(OpKind::Permute, {{"perm", perm}}), nullptr, n);
      Shape xs{geo.batch, groups}, ws{1, groups};
      std::vector<int64_t> axes;
      if (mg != 1) {
        xs.push_back(1);
        ws.push_back(mg);
      }
      for (int d = 0; d + 1 < geo.dims; ++d) {
        xs.push_back(geo.out[static_cast<size_t>(d)]);
        ws.push_back(1);
      }
      if (cg != 1) {
        axes.push_back(xs.rank());
        xs.push_back(cg);
        ws.push_back(cg);
      }
      for (int64_t k : geo.kernel) {
        axes.push_back(xs.rank());
        xs.push_back(k);
        ws.push_back(k);
      }
      xs.push_back(geo.out.back());
      ws.push_back(1);
      if (mg != 1) x = reshape(x, xs);
      const ValueId product = add(OpKind::Mul, {x, reshape(wv, ws)}, Graph::make_attrs(OpKind::Mul), nullptr, n);
      sum = add(OpKind::ReduceSum, {product}, attrs(OpKind::ReduceSum, {{"axes", axes}}), nullptr, n);
    } else {  // 3-D with filters and channels per group: the output positions in one axis
      Shape vs{geo.batch, groups, 1, cg, geo.positions()}, ws{1, groups, mg, cg, 1};
      for (int64_t k : geo.kernel) {
        vs.push_back(k);
        ws.push_back(k);
      }
      const ValueId product = add(OpKind::Mul, {reshape(x, vs), reshape(wv, ws)}, Graph::make_attrs(OpKind::Mul), nullptr, n);
      std::vector<int64_t> axes = {3};
      for (size_t d = 0; d < dims; ++d) axes.push_back(static_cast<int64_t>(5 + d));
      sum = add(OpKind::ReduceSum, {product}, attrs(OpKind::ReduceSum, {{"axes", axes}}), nullptr, n);
    }
    if (r.out().type(sum).dtype != n.type.dtype) {  // narrow integers sum in i64: wrapped back
      Node cast;
      cast.op = OpKind::Cast;
      cast.type = TensorType{n.type.dtype, r.out().type(sum).shape};
      cast.operands = {sum};
      cast.attrs = Graph::make_attrs(OpKind::Cast);
      cast.loc = n.loc;
      sum = r.add(std::move(cast));
    }
    const Shape out = n.type.shape;
    // The sum is [N, M, o..] already when groups and filters per group leave no axis to
    // merge (a depthwise conv); a reshape to its own shape would be a view the graph returns,
    // which lowering copies.
    const ValueId y = r.out().type(sum).shape == out ? sum : add(OpKind::Reshape, {sum}, Graph::make_attrs(OpKind::Reshape), &out, n);
    r.out().node(y).name = n.name;
    r.set(v, y);
  }
  return r.finish();
}

}  // namespace kiln
