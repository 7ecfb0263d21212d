// passes/cse.cpp - common subexpression elimination, structural, across the whole graph.
//
// Two nodes are the same when they have the same op, result type, attributes and (already
// deduplicated) operands, in any order for commutative ops. `rand` nodes with equal seeds
// and types draw the same numbers, so they merge too. Guarantees: outputs bit-identical;
// the first occurrence (and its name) survives.
#include <algorithm>
#include <unordered_map>

#include "kiln/passes/pass_manager.h"
#include "kiln/ir/hash.h"
#include "rewriter.h"

namespace kiln {
namespace {

// Everything the equality below compares, so that distinct nodes rarely share a bucket.
uint64_t key_hash(const Node& n, const std::vector<ValueId>& operands) {
  uint64_t h = hash_mix(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.type.dtype));
  for (int64_t d : n.type.shape.dims()) h = hash_mix(h, static_cast<uint64_t>(d));
  for (ValueId o : operands) h = hash_mix(h, o);
  return hash_attrs(h, n.attrs);
}

}  // namespace

Graph common_subexpression_elimination(const Graph& g, const PassOptions&) {
  passes::Rewriter r(g);
  std::unordered_multimap<uint64_t, ValueId> seen;  // key hash -> new value
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(r.map(o));
    if (n.info().has(trait::Commutative)) std::sort(operands.begin(), operands.end());
    const uint64_t h = key_hash(n, operands);
    bool merged = false;
    for (auto [it, end] = seen.equal_range(h); it != end; ++it) {
      const Node& c = r.out().node(it->second);
      std::vector<ValueId> c_operands = c.operands;
      if (c.info().has(trait::Commutative)) std::sort(c_operands.begin(), c_operands.end());
      if (c.op == n.op && c.type == n.type && c_operands == operands && c.attrs == n.attrs) {
        r.set(v, it->second);
        merged = true;
        break;
      }
    }
    if (merged) continue;
    seen.emplace(h, r.copy(v));
  }
  return r.finish();
}

}  // namespace kiln
