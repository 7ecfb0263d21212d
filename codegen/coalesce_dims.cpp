// codegen/coalesce_dims.cpp - a kernel's domain without dims of one point, neighbours that
// walk as one merged (coalesce_dims in kernel_ir.h).
//
// Lowering takes a kernel's domain from the graph's shapes, and ONNX models are full of
// dims of 1: a squeeze-and-excite block's 1x1 convolution over a pooled [1, 576, 1, 1] is a
// reduction over [1, 1, 144, 1, reduce 576, reduce 1, reduce 1, 1], whose last dim, of one
// point, is the one the cpu walks in vector lanes: 144 scalar sums of 576 (MobileNetV3's
// fc1: 40 us for 83K multiply-adds). Its global average pool reduces over [1, 576, reduce 7,
// reduce 7]: rows of 7, fewer than a vector holds, scalar again. Without the dims of one
// point and with the pool's two reduced dims as one, they are [144, reduce 576] and
// [576, reduce 49], whose rows fill vectors. This is the same canonical form that XLA's
// and Triton's code generators bring loops to (collapsed contiguous dims) before tiling.
#include <algorithm>
#include <optional>
#include <vector>

#include "kiln/codegen/dim_rewrite.h"
#include "kiln/codegen/kernel_ir.h"

namespace kiln::kir {
namespace {

// Dims `outer` and `inner` (only dims of one point between them) walk as one where every
// position steps along outer by what it steps over a whole run of inner: then (p floordiv
// W, p mod W) for the merged p cancels back into an affine position (affine_analysis), and
// each is as contiguous as before.
bool walk_as_one(const Kernel& k, const std::vector<std::optional<Affine>>& affine, const std::vector<Ref>& at,
                 int outer, int inner) {
  const auto o = static_cast<size_t>(outer), i = static_cast<size_t>(inner);
  if (k.reduced[o] != k.reduced[i]) return false;
  return std::all_of(at.begin(), at.end(), [&](Ref r) {
    const std::optional<Affine>& a = affine[static_cast<size_t>(r)];
    return a && a->stride[o] == a->stride[i] * k.domain[inner];
  });
}

}  // namespace

Kernel coalesce_dims(const Kernel& k, int apart) {
  const int rank = k.domain.rank();
  if (rank == 0 || k.in_order || !k.parts.empty() || k.rows_arg >= 0 || k.domain.numel() == 0) return k;
  const std::vector<std::optional<Affine>> affine = affine_analysis(k);
  const std::vector<Ref> at = positions(k);
  if (!std::all_of(at.begin(), at.end(), [&](Ref r) { return affine[static_cast<size_t>(r)].has_value(); })) return k;

  // group[d]: the new dim old dim d belongs to; -1 for a dim of one point that is dropped.
  // One dim of each kind that the domain has stays, if only of one point: a reduction keeps
  // a reduced dim to reduce over.
  std::vector<int> group(static_cast<size_t>(rank), -1);
  Shape domain;
  std::vector<bool> reduced;
  for (bool kind : {false, true}) {
    const bool present = std::find(k.reduced.begin(), k.reduced.end(), kind) != k.reduced.end();
    const bool all_unit = std::none_of(k.domain.begin(), k.domain.end(), [&, d = 0](int64_t n) mutable {
      return k.reduced[static_cast<size_t>(d++)] == kind && n != 1;
    });
    if (!present || !all_unit) continue;
    for (int d = rank - 1; d >= 0; --d)
      if (k.reduced[static_cast<size_t>(d)] == kind) {
        group[static_cast<size_t>(d)] = -2;  // kept, though of one point
        break;
      }
  }
  int previous = -1;  // the last old dim given a group
  for (int d = 0; d < rank; ++d) {
    const auto di = static_cast<size_t>(d);
    if (k.domain[d] == 1 && group[di] != -2) continue;
    const bool merge = previous >= 0 && !(previous < apart && d >= apart) && walk_as_one(k, affine, at, previous, d);
    if (merge) {
      domain[domain.rank() - 1] *= k.domain[d];
    } else {
      domain.push_back(k.domain[d]);
      reduced.push_back(k.reduced[di]);
    }
    group[di] = domain.rank() - 1;
    previous = d;
  }
  if (domain.rank() == rank) return k;

  // Each old dim's index from its group's: (p floordiv (extent of the dims after it in the
  // group)) mod (its own extent), the floordiv left out for the group's last dim and the mod
  // for its first; 0 for a dropped dim.
  std::vector<Ref> group_dim(static_cast<size_t>(domain.rank()), kNoRef);
  Ref zero = kNoRef;
  Kernel out = rewrite_dims(k, domain, reduced, [&](int d, IndexAppender& append) {
    const int g = group[static_cast<size_t>(d)];
    if (g < 0) {
      if (zero == kNoRef) zero = append.constant(0);
      return zero;
    }
    Ref& p = group_dim[static_cast<size_t>(g)];
    if (p == kNoRef) p = append.dim(g);
    int64_t after = 1;
    bool first = true;
    // (Dropped dims of one point may stand between a group's dims: they are skipped.)
    for (int e = d + 1; e < rank; ++e)
      if (group[static_cast<size_t>(e)] == g) after *= k.domain[e];
      else if (group[static_cast<size_t>(e)] >= 0) break;
    for (int e = d - 1; e >= 0 && first; --e)
      if (group[static_cast<size_t>(e)] == g) first = false;
      else if (group[static_cast<size_t>(e)] >= 0) break;
    Ref r = after > 1 ? append.floordiv(p, after) : p;
    return first ? r : append.mod(r, k.domain[d]);
  });
  remove_dead_instructions(out);
  return out;
}

}  // namespace kiln::kir
