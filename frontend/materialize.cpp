// frontend/materialize.cpp - from pending values to a Graph, and from a Graph to results.
//
// At a sync point the pending subgraph behind the requested values is cut out (evaluated
// values it reads become graph parameters), handed to the device's engine as one Graph, and
// the results are stored back. Besides the requested values, every pending value in the
// subgraph that some other tensor still refers to is returned too, so it is not recomputed
// later; values only the subgraph itself refers to die with it.
#include <cstdlib>
#include <iostream>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "kiln/backends/backend.h"
#include "kiln/frontend/lazy.h"
#include "kiln/ir/text.h"
#include "kiln/support/env.h"
#include "kiln/support/log.h"
#include "capture_state.h"
#include "cut.h"
#include "lazy_value.h"

namespace kiln {
namespace detail {
namespace {

// Ops a backward may compute again rather than have the forward keep their result: memory-
// bound ops that fuse into whatever reads them. Not a user's custom kernel (its cost is
// unknown), nor gathers, scans, sorts and contractions.
bool cheap_to_recompute(OpKind op) {
  const OpInfo& info = op_info(op);
  switch (info.category) {
    case OpCategory::Source: return true;
    case OpCategory::Elementwise: return op != OpKind::Custom;
    case OpCategory::Movement: return info.is_view();
    default: return false;
  }
}

}  // namespace

CutGraph cut(std::span<LazyValue* const> targets, LeafPolicy policy, std::span<LazyValue* const> trace_inputs) {
  clear_thread_scalar_cache();  // its references are not the program's
  CutGraph out;
  static constexpr const char* kNames[] = {"stream", "traced", "pending", "captured"};
  out.graph.set_name(kNames[static_cast<int>(policy)]);
  // Pending values keep their cut state in their scratch fields (no hashing: this runs at
  // every sync); the few evaluated leaves in a small map.
  static thread_local uint32_t epoch_counter = 0;
  if (++epoch_counter == 0) ++epoch_counter;
  const uint32_t epoch = epoch_counter;
  constexpr uint32_t kNoId = UINT32_MAX;
  struct LeafState {
    uint32_t uses = 0;
    uint32_t id = UINT32_MAX;
  };
  std::unordered_map<const LazyValue*, LeafState> leaf_state;
  // True the first time `v` is met in this cut.
  auto first_visit = [&](LazyValue* v) {
    if (!v->pending()) return leaf_state.try_emplace(v).second;
    if (v->cut_epoch == epoch) return false;
    v->cut_epoch = epoch;
    v->cut_uses = 0;
    v->cut_id = kNoId;
    return true;
  };
  auto count_use = [&](LazyValue* v) {
    if (v->pending()) ++v->cut_uses;
    else ++leaf_state[v].uses;
  };
  auto uses_of = [&](LazyValue* v) { return v->pending() ? v->cut_uses : leaf_state[v].uses; };
  auto id_of = [&](LazyValue* v) -> uint32_t& { return v->pending() ? v->cut_id : leaf_state[v].id; };

  for (size_t i = 0; i < trace_inputs.size(); ++i) {
    first_visit(trace_inputs[i]);
    id_of(trace_inputs[i]) = out.graph.add_input(fmt::format("arg{}", i), trace_inputs[i]->type);
  }

  // Iterative post-order DFS: chains can be thousands of values long.
  struct Frame {
    LazyValue* v;
    size_t next_operand;
  };
  std::vector<Frame> stack;
  std::vector<LazyValue*> order;
  auto visit = [&](LazyValue* root) {
    if (!first_visit(root)) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      LazyValue* v = f.v;
      if (!v->pending()) {  // evaluated: a leaf
        stack.pop_back();
        continue;
      }
      if (f.next_operand < v->num_operands) {
        LazyValue* o = v->operand(f.next_operand++);
        const bool first = first_visit(o);
        count_use(o);
        if (first) stack.push_back({o, 0});
        continue;
      }
      order.push_back(v);
      stack.pop_back();
    }
  };
  for (LazyValue* t : targets) visit(t);

  // Parameters: trace inputs first (already added), then evaluated leaves in first-use order.
  auto leaf_id = [&](LazyValue* v) -> ValueId {
    uint32_t& id = id_of(v);
    if (id != kNoId) return id;
    if (v->trace_input && policy == LeafPolicy::Evaluate)
      throw Error("a value computed from a kiln::trace input cannot be evaluated inside the trace");
    const bool traced = policy == LeafPolicy::Trace || policy == LeafPolicy::Capture;
    const std::string name = fmt::format("{}{}", traced ? "capture" : "in", out.leaves.size());
    id = out.graph.add_input(name, v->type);
    out.leaves.push_back(v);
    out.leaf_uses.push_back(uses_of(v));
    return id;
  };
  int64_t next_slot = 0;  // launch-bound scalars, numbered in node order
  for (LazyValue* v : order) {
    if (v->trace_input) {
      leaf_id(v);
      continue;
    }
    Node n;
    n.op = v->op;
    n.type = v->type;
    n.attrs = v->attrs;
    if (n.op == OpKind::ScalarParam) {
      int64_t& slot = n.attr("slot").i;
      if (slot < 0) out.bound_slots.push_back({next_slot, -slot - 1});  // a bound_scalar's source
      slot = next_slot++;
    }
    n.operands.reserve(v->num_operands);
    for (size_t i = 0; i < v->num_operands; ++i) {
      LazyValue* o = v->operand(i);
      n.operands.push_back(o->pending() && !o->trace_input ? id_of(o) : leaf_id(o));
    }
    id_of(v) = out.graph.add_unchecked(std::move(n));
  }
  for (LazyValue* t : targets) {
    if (!t->pending() || t->trace_input) leaf_id(t);
  }
  auto id_at = [&](LazyValue* v) -> ValueId { return id_of(v); };

  // Outputs: the targets, then pending values that tensors outside the subgraph hold.
  std::vector<ValueId> outputs;
  for (LazyValue* t : targets) {
    outputs.push_back(id_at(t));
    out.produced.push_back(t);
  }
  if (policy == LeafPolicy::Evaluate) {
    // A value that only gradient nodes hold (saved for a backward not recorded yet) is kept
    // only if it is not cheap to compute again: an elementwise op or a view whose operands
    // are kept, evaluated or themselves cheap is recomputed by the backward instead (the
    // rematerialization policy, docs/autodiff.md). Order is topological: operands first.
    const std::unordered_set<const LazyValue*> target_set(targets.begin(), targets.end());
    // Pending operands come earlier in `order`, so their scratch flag is already this cut's.
    auto operands_recomputable = [&](const LazyValue* v) {
      for (size_t i = 0; i < v->num_operands; ++i) {
        const LazyValue* o = v->operand(i);
        if (o->pending() && !o->cut_recomputable) return false;
      }
      return true;
    };
    for (LazyValue* v : order) {
      const bool target = target_set.count(v) != 0;
      const uint32_t refs = v->refs.load(std::memory_order_relaxed), uses = uses_of(v);
      const bool cheap = cheap_to_recompute(v->op) && operands_recomputable(v);
      bool keep = false;
      if (!target && refs > uses) {
        const bool only_saved = refs - uses <= v->saved_refs.load(std::memory_order_relaxed);
        keep = !(only_saved && cheap);
        if (keep) {
          outputs.push_back(id_at(v));
          out.produced.push_back(v);
        }
      }
      v->cut_recomputable = target || keep || cheap;
    }
  }
  out.graph.set_outputs(std::move(outputs));
  return out;
}

namespace {

bool log_flushes() {
  static const bool on = log_enabled("flush");
  return on;
}

}  // namespace

void evaluate(std::span<LazyValue* const> targets, bool forced_by_cap) {
  if (thread_is_capturing())
    throw Error("capture: the function being captured needs a value computed (item, to_vector, host, eval, sync or "
                "a copy to another device): a replay does not run the function, so it could not do that again. "
                "Compute such values outside the captured function, or return them");
  // One execution per device: group the targets.
  std::vector<LazyValue*> todo;
  for (LazyValue* t : targets)
    if (t->pending()) todo.push_back(t);
  while (!todo.empty()) {
    const Device device = todo.front()->device;
    std::vector<LazyValue*> group, rest;
    for (LazyValue* t : todo) (t->device == device ? group : rest).push_back(t);
    todo = std::move(rest);
    // Deduplicate while keeping order.
    std::vector<LazyValue*> unique;
    std::unordered_set<const LazyValue*> seen;
    for (LazyValue* t : group)
      if (seen.insert(t).second) unique.push_back(t);

    CutGraph cg = cut(unique, LeafPolicy::Evaluate);
#ifndef NDEBUG
    if (Status st = verify(cg.graph); !st) KILN_ASSERT(false, "the frontend records verified graphs");
#endif
    // A leaf only this graph refers to (no tensor holds it, no one else shares its buffer or
    // that buffer's memory) is dead after this run: its buffer is donated, and the engine may
    // write over it. Not a borrowed one: its bytes are a caller's host tensor (from_host of a
    // shared one). Not one whose memory another buffer holds: two values that CSE made one
    // (two optimizer states of equal gradients) share it, and writing one would write both.
    std::vector<bool> donated(cg.leaves.size(), false);
    for (size_t i = 0; i < cg.leaves.size(); ++i) {
      const LazyValue* leaf = cg.leaves[i];
      donated[i] = leaf->refs.load(std::memory_order_relaxed) == cg.leaf_uses[i] && leaf->buffer.use_count() == 1 &&
                   !leaf->buffer->memory_shared() && !leaf->buffer->memory().borrowed();
    }
    std::vector<BufferRef> inputs;
    inputs.reserve(cg.leaves.size());
    for (LazyValue* leaf : cg.leaves) inputs.push_back(leaf->buffer);
    // Keep every produced value alive while its result is stored.
    for (LazyValue* v : cg.produced) retain(v);
    std::vector<BufferRef> results;
    try {
      results = engine_for(device).run(cg.graph, inputs, donated);
    } catch (...) {
      for (LazyValue* v : cg.produced) release(v);
      throw;
    }
    Counters& c = counters();
    c.executions.fetch_add(1, std::memory_order_relaxed);
    c.nodes_executed.fetch_add(cg.graph.size() - cg.graph.inputs().size(), std::memory_order_relaxed);
    c.donated_inputs.fetch_add(static_cast<uint64_t>(std::count(donated.begin(), donated.end(), true)),
                               std::memory_order_relaxed);
    if (forced_by_cap) {
      c.cap_flushes.fetch_add(1, std::memory_order_relaxed);
      if (log_flushes())
        std::cerr << fmt::format("kiln: flush: the pending stream passed {} values; executed {} nodes\n",
                                 max_pending(), cg.graph.size() - cg.graph.inputs().size());
    }
    for (size_t i = 0; i < cg.produced.size(); ++i) {
      if (cg.produced[i]->pending()) set_result(cg.produced[i], std::move(results[i]));
    }
    for (LazyValue* v : cg.produced) release(v);
  }
}

}  // namespace detail

using detail::LazyValue;

namespace detail {

void flush_pending(bool forced_by_cap) {
  // The targets are the pending values some tensor holds: more references than the other
  // pending values account for. The rest are intermediates, computed inside the same graphs.
  // The scalar cache's references are not a tensor's: drop them first.
  clear_thread_scalar_cache();
  const std::vector<LazyValue*> pending = thread_pending_values();
  std::unordered_map<const LazyValue*, uint32_t> from_pending;
  for (const LazyValue* v : pending)
    for (size_t i = 0; i < v->num_operands; ++i) ++from_pending[v->operand(i)];
  std::vector<LazyValue*> held;
  for (LazyValue* v : pending) {
    // Gradient nodes' references do not make a value a target: if something computed needs
    // it, the cut decides whether to keep it (above).
    const auto it = from_pending.find(v);
    const uint32_t inside = (it == from_pending.end() ? 0 : it->second) + v->saved_refs.load(std::memory_order_relaxed);
    if (v->refs.load(std::memory_order_relaxed) > inside) held.push_back(v);
  }
  // Hold them while evaluation changes the list under us.
  for (LazyValue* v : held) retain(v);
  try {
    evaluate(held, forced_by_cap);
  } catch (...) {
    for (LazyValue* v : held) release(v);
    throw;
  }
  for (LazyValue* v : held) release(v);
}

}  // namespace detail

void sync() { detail::flush_pending(/*forced_by_cap=*/false); }

void synchronize(Device device) { engine_for(device).finish(); }

Graph pending_graph(const Tensor& t) {
  if (!t.defined()) throw Error("dump: the tensor is undefined");
  LazyValue* v = t.impl();
  return detail::cut({&v, 1}, detail::LeafPolicy::Dump).graph;
}

std::string dump(const Tensor& t) { return print_graph(pending_graph(t)); }

Graph trace(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& example_inputs) {
  std::vector<Tensor> inputs;
  std::vector<LazyValue*> raw;
  for (const Tensor& e : example_inputs) {
    if (!e.defined()) throw Error("trace: an example input is undefined");
    inputs.emplace_back(detail::make_trace_input(TensorType{e.dtype(), e.shape()}, e.device()));
    raw.push_back(inputs.back().impl());
  }
  struct TracingScope {
    bool was = detail::thread_is_tracing();
    TracingScope() { detail::set_thread_tracing(true); }
    ~TracingScope() { detail::set_thread_tracing(was); }
  } scope;
  const std::vector<Tensor> outputs = fn(inputs);
  if (outputs.empty()) throw Error("trace: the function returned no tensors");
  std::vector<LazyValue*> targets;
  for (const Tensor& o : outputs) {
    if (!o.defined()) throw Error("trace: the function returned an undefined tensor");
    targets.push_back(o.impl());
  }
  return detail::cut(targets, detail::LeafPolicy::Trace, raw).graph;
}

Graph trace(const std::function<Tensor(const Tensor&)>& fn, const Tensor& example_input) {
  return trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
               std::vector<Tensor>{example_input});
}

Stats stats() {
  const detail::Counters& c = detail::counters();
  Stats s;
  s.executions = c.executions.load();
  s.nodes_executed = c.nodes_executed.load();
  s.ops_recorded = c.ops_recorded.load();
  s.cap_flushes = c.cap_flushes.load();
  s.donated_inputs = c.donated_inputs.load();
  s.live_values = c.live_values.load();
  s.live_buffer_bytes = c.live_buffer_bytes.load();
  return s;
}

namespace {
std::atomic<uint32_t>& pending_cap() {
  // A plain integer from 1 to 2^32 - 1 (the largest turns the cap off in practice); anything
  // else keeps the default, with one warning.
  static std::atomic<uint32_t> cap{
      static_cast<uint32_t>(env_int("KILN_MAX_PENDING", 1, std::numeric_limits<uint32_t>::max()).value_or(4096))};
  return cap;
}
}  // namespace

void set_max_pending(uint32_t nodes) {
  if (nodes == 0) throw Error("set_max_pending: the cap must be at least 1");
  pending_cap().store(nodes);
}

uint32_t max_pending() { return pending_cap().load(); }

}  // namespace kiln
