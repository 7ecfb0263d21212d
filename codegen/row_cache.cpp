// codegen/row_cache.cpp - which values a row's walk keeps between its passes over the row.
//
// A kernel whose last dim is reduced walks each row once per reduction stage and once more
// for its stores (softmax: the max, the sum of exp, then exp / sum). An expensive value that
// two of those passes need (softmax's exp) is computed in the first and kept in a per-row
// array for the others, where the row is short enough (Schedule::row_cache_elements and
// row_cache_bytes). The cpu backend's rows and a C-family work-item's rows cache the same
// values.
#include <algorithm>
#include <set>

#include "kiln/codegen/schedule.h"
#include "kiln/ir/op.h"

namespace kiln::kir {

std::vector<Ref> row_cached_values(const Kernel& k, const Schedule& s) {
  if (!s.lanes_reduce || k.in_order) return {};
  int64_t row = 1;
  uint64_t reduced_mask = 0;
  for (int d = 0; d < k.domain.rank(); ++d)
    if (k.reduced[static_cast<size_t>(d)]) {
      row *= k.domain[d];
      reduced_mask |= uint64_t{1} << d;
    }
  if (row <= 0 || row > s.row_cache_elements) return {};
  const std::vector<uint64_t> deps = dim_dependence(k);
  const std::vector<int> stage = reduction_stage(k);
  // The instructions each pass over the row evaluates (reductions' values come ready).
  auto reach = [&](std::vector<Ref> roots) {
    std::set<Ref> seen;
    while (!roots.empty()) {
      const Ref r = roots.back();
      roots.pop_back();
      if (!seen.insert(r).second) continue;
      const Inst& in = k.insts[static_cast<size_t>(r)];
      if (in.code == Code::Reduce) continue;
      for (Ref a : in.args) roots.push_back(a);
    }
    return seen;
  };
  std::vector<std::set<Ref>> passes;
  const int stages = stage.empty() ? 0 : *std::max_element(stage.begin(), stage.end());
  for (int st = 1; st <= stages; ++st) {
    std::vector<Ref> roots;
    for (size_t i = 0; i < k.insts.size(); ++i)
      if (k.insts[i].code == Code::Reduce && stage[i] == st)
        roots.insert(roots.end(), k.insts[i].args.begin(), k.insts[i].args.end());
    passes.push_back(reach(roots));
  }
  std::vector<Ref> roots;
  for (const Store& st : k.stores) {
    uint64_t m = deps[static_cast<size_t>(st.value)] | deps[static_cast<size_t>(st.offset)];
    if (st.guard != kNoRef) m |= deps[static_cast<size_t>(st.guard)];
    if (m & reduced_mask) roots.insert(roots.end(), {st.value, st.offset});  // stored once per element of a row
  }
  passes.push_back(reach(roots));
  std::vector<Ref> cached;
  int64_t cached_bytes = 0;
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    const bool expensive = in.code == Code::Op && is_float(in.type) && op_info(in.op).has(trait::Expensive);
    if (!expensive || !(deps[i] & reduced_mask)) continue;
    const auto needs = [&](const std::set<Ref>& pass) { return pass.count(static_cast<Ref>(i)) > 0; };
    const auto count = std::count_if(passes.begin(), passes.end(), needs);
    if (count < 2) continue;
    const int64_t bytes = row * static_cast<int64_t>(dtype_size(in.type));
    if (cached_bytes + bytes > s.row_cache_bytes) break;  // a worker's stack is finite
    cached_bytes += bytes;
    cached.push_back(static_cast<Ref>(i));
  }
  return cached;
}

}  // namespace kiln::kir
