// passes/memory_plan.cpp - buffer assignment with reuse and in-place writes.
#include "kiln/passes/memory_plan.h"

#include "kiln/ir/index_map.h"
#include "kiln/ir/text.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include <fmt/format.h>

namespace kiln {
namespace {
// Statistics of the plan: every buffer's size fits in int64 (verified types), their sum may not.
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
}  // namespace
namespace {

constexpr size_t kForever = SIZE_MAX;

// One launch: a kernel region, or an operation outside kernels that computes.
struct Unit {
  std::vector<ValueId> reads;
  std::vector<ValueId> writes;
  // Reads that may be overwritten by a write of the same type: every member is elementwise
  // and both are accessed through the identity map of the unit's domain, so element i is
  // read (once) before element i is written.
  std::vector<ValueId> aligned_reads;
};

bool is_identity(const IndexMap& m, const Shape& domain) {
  if (static_cast<int>(m.size()) != domain.rank()) return false;
  for (size_t j = 0; j < m.size(); ++j)
    if (m[j].str() != fmt::format("d{}", j)) return false;
  return true;
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const std::vector<bool>& donated) {
  MemoryPlan plan;
  plan.buffer_of.assign(g.size(), MemoryPlan::kNone);

  // The value whose storage a value reads: itself, or through views its source's.
  std::vector<ValueId> root(g.size());
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    const bool view = n.kernel < 0 && n.info().is_view();
    root[id] = view ? root[n.operands[0]] : static_cast<ValueId>(id);
  }

  std::vector<bool> is_output(g.size(), false);
  for (ValueId v : g.outputs()) is_output[v] = true;

  // Launch units in order.
  const KernelIndex index = g.kernel_index();
  std::vector<Unit> units;
  std::vector<int32_t> unit_of_kernel(g.kernels().size(), -1);
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.kernel >= 0) {
      int32_t& u = unit_of_kernel[static_cast<size_t>(n.kernel)];
      if (u < 0) {
        u = static_cast<int32_t>(units.size());
        Unit unit;
        const auto ki = static_cast<size_t>(n.kernel);
        unit.reads = index.inputs[ki];
        unit.writes = index.outputs[ki];
        bool elementwise = true;
        for (ValueId m : index.members[ki])
          elementwise = elementwise && g.node(m).info().category == OpCategory::Elementwise;
        if (elementwise) {
          const KernelIndexMaps maps = kernel_index_maps(g, index, n.kernel);
          bool writes_aligned = true;
          for (const auto& [w, m] : maps.outputs) writes_aligned = writes_aligned && is_identity(m, maps.domain);
          for (const auto& [r, list] : maps.inputs)
            if (writes_aligned && list.size() == 1 && is_identity(list[0], maps.domain)) unit.aligned_reads.push_back(r);
        }
        units.push_back(std::move(unit));
      }
      continue;
    }
    if (n.op == OpKind::Input || n.info().is_view()) continue;
    // A literal constant has a buffer of its own; a splat is a kernel argument unless it is
    // returned; rand and arange are computed into a buffer (matmuls read operands from memory).
    if (n.op == OpKind::Constant && !(n.attr("value").present && is_output[id])) continue;
    if (n.op == OpKind::ScalarParam && !is_output[id]) continue;  // a kernel argument
    Unit unit{n.operands, {v}, {}};
    if (n.info().category == OpCategory::Elementwise)
      for (ValueId o : n.operands)
        if (g.type(o).shape == n.type.shape) unit.aligned_reads.push_back(o);
    units.push_back(std::move(unit));
  }

  // Last unit reading each stored value (through views); outputs live to the end.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t u = 0; u < units.size(); ++u)
    for (ValueId r : units[u].reads) last_use[root[r]] = std::max(last_use[root[r]], u);
  for (ValueId v : g.outputs()) last_use[root[v]] = kForever;

  auto new_buffer = [&](int64_t bytes, int32_t param) {
    plan.buffer_bytes.push_back(bytes);
    plan.buffer_param.push_back(param);
    if (param < 0) plan.allocated_bytes = saturating_add(plan.allocated_bytes, bytes);
    return static_cast<int32_t>(plan.buffer_bytes.size() - 1);
  };
  // Parameters live in their own buffers; literal constants in buffers of the plan's.
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId v = g.inputs()[i];
    plan.buffer_of[v] = new_buffer(g.type(v).bytes(), static_cast<int32_t>(i));
  }
  std::vector<bool> is_donated(g.size(), false);
  for (size_t i = 0; i < g.inputs().size() && i < donated.size(); ++i) is_donated[g.inputs()[i]] = donated[i];
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    if (n.op == OpKind::Constant && !n.attr("value").present) {
      plan.buffer_of[id] = new_buffer(n.type.bytes(), -1);
      last_use[id] = kForever;  // constants are baked into the executable
    }
  }

  std::multimap<int64_t, int32_t> free_buffers;  // bytes -> buffer
  std::vector<bool> released(g.size(), false);
  auto reusable = [&](ValueId v) {
    const Node& n = g.node(v);
    return n.op != OpKind::Input || is_donated[v];
  };
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& unit = units[u];
    std::vector<ValueId> taken;
    for (ValueId w : unit.writes) {
      if (plan.buffer_of[w] != MemoryPlan::kNone) continue;
      plan.naive_bytes = saturating_add(plan.naive_bytes, g.type(w).bytes());
      // In place: an aligned read (identity access, not through a view) of the same type that
      // dies here and that no other read of this launch reaches through a view.
      {
        for (ValueId r : unit.aligned_reads) {
          if (root[r] != r || last_use[r] != u || !(g.type(r) == g.type(w)) || !reusable(r) ||
              plan.buffer_of[r] == MemoryPlan::kNone || std::find(taken.begin(), taken.end(), r) != taken.end())
            continue;
          const bool aliased = std::any_of(unit.reads.begin(), unit.reads.end(),
                                           [&](ValueId other) { return other != r && root[other] == r; });
          if (aliased) continue;
          plan.buffer_of[w] = plan.buffer_of[r];
          plan.in_place.push_back({w, r});
          taken.push_back(r);
          break;
        }
        if (plan.buffer_of[w] != MemoryPlan::kNone) continue;
      }
      const int64_t bytes = g.type(w).bytes();
      if (auto it = free_buffers.find(bytes); it != free_buffers.end()) {
        plan.buffer_of[w] = it->second;
        free_buffers.erase(it);
      } else {
        plan.buffer_of[w] = new_buffer(bytes, -1);
      }
    }
    // Values read for the last time here free their buffers (unless written over in place).
    for (ValueId r : unit.reads) {
      const ValueId s = root[r];
      if (last_use[s] != u || released[s] || plan.buffer_of[s] == MemoryPlan::kNone || !reusable(s)) continue;
      if (std::find(taken.begin(), taken.end(), s) != taken.end()) continue;
      if (std::any_of(unit.writes.begin(), unit.writes.end(), [&](ValueId w) { return plan.buffer_of[w] == plan.buffer_of[s]; }))
        continue;
      released[s] = true;  // a value read twice in one launch is freed once
      free_buffers.insert({plan.buffer_bytes[static_cast<size_t>(plan.buffer_of[s])], plan.buffer_of[s]});
    }
  }
  return plan;
}

std::string MemoryPlan::str(const Graph& g) const {
  const std::vector<std::string> names = value_names(g);
  auto name = [&](ValueId v) { return "%" + names[v]; };
  std::string out = fmt::format("// memory plan: {} bytes allocated, {} without reuse; {} in-place write{}\n",
                                allocated_bytes, naive_bytes, in_place.size(), in_place.size() == 1 ? "" : "s");
  for (size_t b = 0; b < buffer_bytes.size(); ++b) {
    std::vector<std::string> values;
    for (size_t v = 0; v < buffer_of.size(); ++v)
      if (buffer_of[v] == static_cast<int32_t>(b)) values.push_back(name(static_cast<ValueId>(v)));
    out += fmt::format("//   buffer {} ({} bytes{}): {}\n", b, buffer_bytes[b],
                       buffer_param[b] >= 0 ? fmt::format(", parameter {}", buffer_param[b]) : "",
                       fmt::join(values, ", "));
  }
  for (const auto& [w, r] : in_place) out += fmt::format("//   in place: {} over {}\n", name(w), name(r));
  return out;
}

}  // namespace kiln
