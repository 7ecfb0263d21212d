// codegen/merge_rows.cpp - a kernel whose last two kept dims walk as one.
//
// A depthwise convolution of a 7x7 plane is a reduction kernel over [N, C, 7, r5, r5, 7]:
// each iteration fills 7 of a vector's 16 lanes and sums its 25 taps in one chain of
// dependent adds. Over [N, C, r5, r5, 49] an iteration is the whole plane, 4 vectors: more
// lanes busy and 4 independent chains (C=576: 115 -> 16.5 us on AVX-512). The loads stay
// contiguous where the rows follow each other in memory: affine_analysis cancels
// (p floordiv 7) * 7 + p mod 7 into p.
#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "kiln/codegen/dim_rewrite.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/support/error.h"

namespace kiln::kir {

int merged_row_dim(const Kernel& k) {
  const int rank = k.domain.rank();
  if (rank < 2 || k.in_order || k.domain.numel() == 0 || k.reduced[static_cast<size_t>(rank - 1)]) return -1;
  for (int d = rank - 2; d >= 0; --d)
    if (!k.reduced[static_cast<size_t>(d)]) return d;
  return -1;
}

namespace {

Kernel merged(const Kernel& k, std::vector<Ref>& renumbered) {
  const int into = merged_row_dim(k);
  if (into < 0) throw Error(fmt::format("kernel @{} over {} has no two kept dims to merge", k.name, k.domain_str()));
  const int rank = k.domain.rank(), last = rank - 1;
  const int64_t width = k.domain[last];
  Shape domain;
  std::vector<bool> reduced;
  for (int d = 0; d < rank; ++d) {
    if (d == into) continue;
    domain.push_back(d == last ? k.domain[into] * width : k.domain[d]);
    reduced.push_back(k.reduced[static_cast<size_t>(d)]);
  }
  const int merged_dim = last - 1;  // the merged dim, last of the new domain
  Ref position = kNoRef;            // its index, emitted where first needed
  return rewrite_dims(k, domain, reduced, [&](int d, IndexAppender& append) {
    if (d != into && d != last) return append.dim(d > into ? d - 1 : d);
    if (position == kNoRef) position = append.dim(merged_dim);
    return d == into ? append.floordiv(position, width) : append.mod(position, width);
  }, &renumbered);
}

}  // namespace

Kernel merge_rows(const Kernel& k) {
  std::vector<Ref> renumbered;
  return merged(k, renumbered);
}

bool merge_keeps_positions_affine(const Kernel& k, bool compares) {
  if (merged_row_dim(k) < 0) return false;
  std::vector<Ref> renumbered;
  const Kernel m = merged(k, renumbered);
  const std::vector<std::optional<Affine>> before = affine_analysis(k), after = affine_analysis(m);
  auto kept = [&](Ref r) {
    return !before[static_cast<size_t>(r)] || after[static_cast<size_t>(renumbered[static_cast<size_t>(r)])];
  };
  std::vector<Ref> at;
  if (compares) {
    at = positions(k);
  } else {
    for (const Inst& in : k.insts)
      if (in.code == Code::Load) at.push_back(in.args[0]);
    for (const Store& st : k.stores) at.push_back(st.offset);
  }
  return std::all_of(at.begin(), at.end(), kept);
}

}  // namespace kiln::kir
