// codegen/lane_bounds.cpp - the masks a vector loop can prove true on one interval of its
// lanes (lane_bounds in kernel_ir.h).
//
// A padded window reads its operand under `0 <= w*s + kw - p < W`: per lane, two i64
// compares and the masked loads they guard, although only the first and last few lanes of a
// row ever see them false. Each such compare is affine in the lane position l:
// `a*l + e >= 0` with e fixed for the row, so it holds on a half line of lanes. A compare
// that holds on more than half the lane dim wherever the other dims are holds on a common
// interval with every other such compare (two intervals of more than half a range overlap,
// and intervals that overlap pairwise share a point), so an emitter may walk that interval
// with all of them known true and leave the masks to the lanes around it.
//
// A compare whose e is a constant (a concat's or a pad's along the lane dim, a horizontal
// kernel's parts) flips at one lane known when compiling: a cut. Between two cuts every such
// compare is known, true or false, so each stretch computes only what its stores need.
//
// A compare the lane does not enter but a reduced dim does (a window's row bound, `0 <= h +
// kh - p`) holds or fails for a whole iteration of a tile walk, at each of the window's
// rows: window_row_bounds finds those, and an iteration whose window lies inside the input
// walks with them known.
#include <algorithm>
#include <optional>
#include <vector>

#include "int_division.h"
#include "kiln/codegen/kernel_ir.h"

namespace kiln::kir {

bool is_cut(const LaneBound& b) {
  return std::all_of(b.rest.stride.begin(), b.rest.stride.end(), [](int64_t s) { return s == 0; });
}

int64_t cut_lane(const LaneBound& b) {
  // lane * l + base >= 0 from this lane on (lane > 0), or up to before it (lane < 0).
  return b.lane > 0 ? ceil_div(-b.rest.base, b.lane) : floor_div(b.rest.base, -b.lane) + 1;
}

namespace {

// Instruction `i` of `k` as `lane * l + rest >= 0` over dim `lane`, when it is an ordering
// compare of two affine positions whose difference fits int64.
std::optional<LaneBound> as_bound(const Kernel& k, const std::vector<std::optional<Affine>>& affine, size_t i,
                                  int lane) {
  const Inst& in = k.insts[i];
  if (in.code != Code::Op || in.type != DType::Bool || in.args.size() != 2) return std::nullopt;
  if (in.op != OpKind::Ge && in.op != OpKind::Gt && in.op != OpKind::Le && in.op != OpKind::Lt) return std::nullopt;
  const auto& x = affine[static_cast<size_t>(in.args[0])];
  const auto& y = affine[static_cast<size_t>(in.args[1])];
  if (!x || !y) return std::nullopt;
  // x - y >= 0, > 0, <= 0 or < 0, written as `sign * (x - y) + adjust >= 0`.
  const int64_t sign = in.op == OpKind::Ge || in.op == OpKind::Gt ? 1 : -1;
  const int64_t adjust = in.op == OpKind::Gt || in.op == OpKind::Lt ? -1 : 0;
  LaneBound b{static_cast<Ref>(i), 0, Affine{adjust, std::vector<int64_t>(x->stride.size(), 0)}};
  bool overflow = false;
  auto term = [&](int64_t u, int64_t v, int64_t& into) {
    int64_t diff = 0;
    overflow = overflow || __builtin_sub_overflow(u, v, &diff) || __builtin_mul_overflow(diff, sign, &diff) ||
               __builtin_add_overflow(into, diff, &into);
  };
  term(x->base, y->base, b.rest.base);
  for (size_t d = 0; d < x->stride.size(); ++d) term(x->stride[d], y->stride[d], d == static_cast<size_t>(lane) ? b.lane : b.rest.stride[d]);
  if (overflow) return std::nullopt;
  return b;
}

}  // namespace

std::vector<LaneBound> window_row_bounds(const Kernel& k, const std::vector<std::optional<Affine>>& affine, int lane) {
  std::vector<LaneBound> out;
  if (lane < 0 || lane >= k.domain.rank() || k.reduced[static_cast<size_t>(lane)]) return out;
  for (int d = 0; d < k.domain.rank(); ++d)
    if (k.domain[d] == 0) return out;
  for (size_t i = 0; i < k.insts.size(); ++i) {
    std::optional<LaneBound> b = as_bound(k, affine, i, lane);
    if (!b || b->lane != 0) continue;
    // Its least over the reduced dims, each at the end that makes its term smallest: what
    // is left is affine in the kept dims alone.
    bool reads_reduced = false, reads_kept = false, overflow = false;
    for (size_t d = 0; d < b->rest.stride.size(); ++d) {
      int64_t& stride = b->rest.stride[d];
      if (stride == 0) continue;
      if (!k.reduced[d]) {
        reads_kept = true;
        continue;
      }
      reads_reduced = true;
      int64_t span = 0;
      if (stride < 0) overflow = overflow || __builtin_mul_overflow(stride, k.domain[static_cast<int>(d)] - 1, &span) ||
                                 __builtin_add_overflow(b->rest.base, span, &b->rest.base);
      stride = 0;
    }
    if (reads_reduced && reads_kept && !overflow) out.push_back(std::move(*b));
  }
  return out;
}

std::vector<LaneBound> lane_bounds(const Kernel& k, const std::vector<std::optional<Affine>>& affine, int lane) {
  std::vector<LaneBound> out;
  if (lane < 0 || lane >= k.domain.rank()) return out;
  const int64_t extent = k.domain[lane];
  if (extent < 2) return out;
  for (int d = 0; d < k.domain.rank(); ++d)
    if (k.domain[d] == 0) return out;
  for (size_t i = 0; i < k.insts.size(); ++i) {
    std::optional<LaneBound> found = as_bound(k, affine, i, lane);
    if (!found || found->lane == 0) continue;
    LaneBound& b = *found;
    bool overflow = false;
    // The least e over the domain bounds the lanes where the compare holds whatever the
    // other dims are.
    int64_t least = b.rest.base;
    for (size_t d = 0; d < b.rest.stride.size() && !overflow; ++d) {
      int64_t span = 0;
      if (b.rest.stride[d] < 0) overflow = __builtin_mul_overflow(b.rest.stride[d], k.domain[static_cast<int>(d)] - 1, &span) ||
                                           __builtin_add_overflow(least, span, &least);
    }
    if (overflow) continue;
    const int64_t from = b.lane > 0 ? std::max<int64_t>(0, ceil_div(-least, b.lane)) : 0;
    const int64_t to = b.lane > 0 ? extent : std::min<int64_t>(extent, floor_div(least, -b.lane) + 1);
    if (is_cut(b) || 2 * (to - from) > extent) out.push_back(std::move(b));
  }
  // Each cut is a copy of the walk: past a bound on them, none (a concat of hundreds).
  if (std::count_if(out.begin(), out.end(), is_cut) > kMaxLaneCuts) std::erase_if(out, is_cut);
  return out;
}

}  // namespace kiln::kir
