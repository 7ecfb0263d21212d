// passes/memory_plan.cpp - buffer assignment with reuse and in-place writes.
#include "kiln/passes/memory_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kiln {
namespace {

constexpr size_t kForever = SIZE_MAX;

int64_t bytes_of(const TensorType& t) { return t.shape.numel() * static_cast<int64_t>(dtype_size(t.dtype)); }

// One launch: a kernel region, or an operation outside kernels that computes.
struct Unit {
  std::vector<ValueId> reads;
  std::vector<ValueId> writes;
  bool elementwise_only = true;  // every member is elementwise: element i is read before i is written
};

bool needs_storage_of_its_own(const Node& n) {
  if (n.op == OpKind::Input) return true;
  if (n.op == OpKind::Constant) return !n.attr("value").present;  // a literal; a splat is an argument
  const OpCategory cat = n.info().category;
  return cat != OpCategory::Source && !n.info().is_view();
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

  // Launch units in order.
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
        unit.reads = g.kernel_inputs(n.kernel);
        unit.writes = g.kernel_outputs(n.kernel);
        for (ValueId m : g.kernel_members(n.kernel))
          unit.elementwise_only = unit.elementwise_only && g.node(m).info().category == OpCategory::Elementwise;
        units.push_back(std::move(unit));
      }
      continue;
    }
    if (n.op == OpKind::Input || !needs_storage_of_its_own(n) || n.op == OpKind::Constant) continue;
    units.push_back(Unit{n.operands, {v}, n.info().category == OpCategory::Elementwise});
  }

  // Last unit reading each stored value (through views); outputs live to the end.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t u = 0; u < units.size(); ++u)
    for (ValueId r : units[u].reads) last_use[root[r]] = std::max(last_use[root[r]], u);
  for (ValueId v : g.outputs()) last_use[root[v]] = kForever;

  auto new_buffer = [&](int64_t bytes, int32_t param) {
    plan.buffer_bytes.push_back(bytes);
    plan.buffer_param.push_back(param);
    if (param < 0) plan.allocated_bytes += bytes;
    return static_cast<int32_t>(plan.buffer_bytes.size() - 1);
  };
  // Parameters live in their own buffers; literal constants in buffers of the plan's.
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId v = g.inputs()[i];
    plan.buffer_of[v] = new_buffer(bytes_of(g.type(v)), static_cast<int32_t>(i));
  }
  std::vector<bool> is_donated(g.size(), false);
  for (size_t i = 0; i < g.inputs().size() && i < donated.size(); ++i) is_donated[g.inputs()[i]] = donated[i];
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<ValueId>(id));
    if (n.op == OpKind::Constant && !n.attr("value").present) {
      plan.buffer_of[id] = new_buffer(bytes_of(n.type), -1);
      last_use[id] = kForever;  // constants are baked into the executable
    }
  }

  std::multimap<int64_t, int32_t> free_buffers;  // bytes -> buffer
  auto reusable = [&](ValueId v) {
    const Node& n = g.node(v);
    return n.op != OpKind::Input || is_donated[v];
  };
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& unit = units[u];
    std::vector<ValueId> taken;
    for (ValueId w : unit.writes) {
      if (plan.buffer_of[w] != MemoryPlan::kNone) continue;
      plan.naive_bytes += bytes_of(g.type(w));
      // In place: an input read directly (not through a view) of the same type that dies here.
      if (unit.elementwise_only) {
        for (ValueId r : unit.reads) {
          if (root[r] != r || last_use[r] != u || !(g.type(r) == g.type(w)) || !reusable(r) ||
              plan.buffer_of[r] == MemoryPlan::kNone || std::find(taken.begin(), taken.end(), r) != taken.end())
            continue;
          plan.buffer_of[w] = plan.buffer_of[r];
          plan.in_place.push_back({w, r});
          taken.push_back(r);
          break;
        }
        if (plan.buffer_of[w] != MemoryPlan::kNone) continue;
      }
      const int64_t bytes = bytes_of(g.type(w));
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
      if (last_use[s] != u || plan.buffer_of[s] == MemoryPlan::kNone || !reusable(s)) continue;
      if (std::find(taken.begin(), taken.end(), s) != taken.end()) continue;
      if (std::any_of(unit.writes.begin(), unit.writes.end(), [&](ValueId w) { return plan.buffer_of[w] == plan.buffer_of[s]; }))
        continue;
      last_use[s] = kForever;  // released once
      free_buffers.insert({plan.buffer_bytes[static_cast<size_t>(plan.buffer_of[s])], plan.buffer_of[s]});
    }
  }
  return plan;
}

std::string MemoryPlan::str(const Graph& g) const {
  auto name = [&](ValueId v) { return g.node(v).name.empty() ? fmt::format("%{}", v) : "%" + g.node(v).name; };
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
