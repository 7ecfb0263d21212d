// frontend/capture.cpp - kiln::capture: a function recorded once, its graph replayed.
//
// Capturing runs the function on placeholder inputs (kiln::trace's) while Tensor's hooks note
// every object whose value changes. Objects that changed and outlive the call are its state;
// the graph's outputs are the returned values and the states' new values, its parameters the
// inputs, then the evaluated values it reads (a state's value before the call, or a value
// kept as a constant). A replay checks the guards, binds buffers and scalars, runs the
// prepared graph and hands out the results: no recording, no canonical form, no lookup.
#include "kiln/frontend/capture.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "capture_state.h"
#include "cut.h"
#include "grad.h"
#include "kiln/backends/backend.h"
#include "kiln/frontend/lazy.h"
#include "kiln/ir/canonical.h"
#include "kiln/support/log.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln {
namespace detail {

std::atomic<int> g_captures_recording{0};

namespace {

// What one recording notes, on the thread that records.
struct Recorder {
  // Objects whose value changed, by address, with the value before (retained; null when
  // undefined). An object first seen holding a value made during the capture is a local
  // of the function: recorded as such (nullopt) so that later changes do not count.
  std::unordered_map<const Tensor*, std::optional<LazyValue*>> changed;
  std::vector<const Tensor*> order;  // first change order, for a stable state order
  std::vector<std::function<void()>> hooks;
  std::vector<std::function<double()>> sources;
  bool internal = false;  // InternalAssignments
};

thread_local Recorder* t_recorder = nullptr;

}  // namespace

void note_tensor_change(const Tensor* object) {
  Recorder* r = t_recorder;
  if (!r || r->internal) return;
  auto [it, inserted] = r->changed.try_emplace(object);
  if (!inserted) return;
  LazyValue* v = object->impl();
  // Every value that existed before the capture is evaluated (it synced first); a pending
  // one was made by the function.
  if (v && v->pending()) {
    it->second = std::nullopt;
    return;
  }
  if (v) retain(v);
  it->second = v;
  r->order.push_back(object);
}

void note_tensor_destroyed(const Tensor* object) {
  Recorder* r = t_recorder;
  if (!r) return;
  auto it = r->changed.find(object);
  if (it == r->changed.end()) return;
  if (it->second) {  // a candidate state after all a local: not one
    if (*it->second) release(*it->second);
    r->order.erase(std::find(r->order.begin(), r->order.end(), object));
  }
  r->changed.erase(it);
}

bool thread_is_capturing() { return t_recorder != nullptr; }

InternalAssignments::InternalAssignments() : was_(t_recorder && t_recorder->internal) {
  if (t_recorder) t_recorder->internal = true;
}
InternalAssignments::~InternalAssignments() {
  if (t_recorder) t_recorder->internal = was_;
}

}  // namespace detail

using detail::LazyValue;

namespace {

// A Tensor object the function assigned, which outlived it.
struct StateSlot {
  Tensor* object = nullptr;
  bool had_value = false;    // defined before the call
  TensorType type;           // of the value before, when it had one
  int32_t param = -1;        // the graph parameter reading the value before, or -1
  int32_t same_as = -1;      // an earlier state that held the same value before: one parameter
  int32_t result = -1;       // the graph output holding the value after, or -1: undefined
  bool leaf_after = false;   // the value after is a leaf that requires gradients
};

// An evaluated value the function read and did not assign: a constant of the capture.
struct ConstantSlot {
  LazyValue* value = nullptr;  // retained
  int32_t param = 0;
  bool held_outside = false;   // something besides the graph held it at capture
};

struct BoundSlot {
  size_t slot;
  size_t source;
  DType dtype;
};

// One capture: its graph, how to bind it, and what its replays must find.
struct Capture {
  Device device;
  Graph graph;
  std::vector<TensorType> input_types;  // per function input: parameter i
  std::vector<StateSlot> states;
  std::vector<ConstantSlot> constants;
  std::vector<int32_t> output_results;  // per function output: its graph output
  std::vector<Scalar> scalars;          // launch_scalars(graph), as captured
  std::vector<BoundSlot> bound;
  std::vector<std::function<void()>> hooks;
  std::vector<std::function<double()>> sources;

  mutable std::mutex mutex;
  mutable std::map<std::vector<bool>, std::shared_ptr<const PreparedGraph>> prepared;  // by donation

  ~Capture() {
    for (ConstantSlot& c : constants) detail::release(c.value);
  }

  std::shared_ptr<const PreparedGraph> prepared_for(const std::vector<bool>& donated) const {
    std::lock_guard lock(mutex);
    std::shared_ptr<const PreparedGraph>& p = prepared[donated];
    if (!p) p = engine_for(device).prepare(graph, donated);
    return p;
  }
};

// Whether `v`'s buffer may be written over by the run that reads it, when `holders`
// references are all that remain (as evaluate() decides for a sync).
bool donatable(const LazyValue* v, uint32_t holders) {
  return v->refs.load(std::memory_order_relaxed) == holders && v->buffer.use_count() == 1 &&
         !v->buffer->memory_shared() && !v->buffer->memory().borrowed();
}

// Puts the results of one run where the function would have: one new value per graph
// output, the states assigned, the outputs returned.
std::vector<Tensor> hand_out(const Capture& c, std::vector<BufferRef> results) {
  std::vector<Tensor> values;
  values.reserve(results.size());
  for (BufferRef& b : results) values.emplace_back(detail::make_evaluated(std::move(b), c.device));
  for (const StateSlot& s : c.states) {
    if (s.result < 0) {
      *s.object = Tensor();
      continue;
    }
    *s.object = values[static_cast<size_t>(s.result)];
    if (s.leaf_after) s.object->requires_grad_();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(c.output_results.size());
  for (int32_t r : c.output_results) outputs.push_back(values[static_cast<size_t>(r)]);
  return outputs;
}

std::string type_on(const TensorType& t, Device d) { return fmt::format("{} on {}", t.str(), d.str()); }

// Ends a recording on this thread: hooks off; with `restore`, every state object gets back
// the value it had before the call (the function failed, or its capture did).
class Recording {
 public:
  Recording() {
    if (detail::t_recorder) throw Error("capture: a capture is already recording on this thread");
    detail::t_recorder = &recorder;
    detail::g_captures_recording.fetch_add(1, std::memory_order_relaxed);
    detail::set_thread_tracing(true);
  }
  ~Recording() { finish(/*restore=*/true); }

  void finish(bool restore) {
    if (!active_) return;
    active_ = false;
    detail::set_thread_tracing(was_tracing_);
    detail::t_recorder = nullptr;
    detail::g_captures_recording.fetch_sub(1, std::memory_order_relaxed);
    for (const Tensor* o : recorder.order) {
      LazyValue* before = *recorder.changed.at(o);
      if (restore) {
        Tensor& object = *const_cast<Tensor*>(o);
        if (before) {
          detail::retain(before);
          object = Tensor(before);
        } else {
          object = Tensor();
        }
      }
      if (before) detail::release(before);
    }
  }

  detail::Recorder recorder;

 private:
  bool active_ = true;
  bool was_tracing_ = detail::thread_is_tracing();
};

}  // namespace

struct CapturedFunction::Impl {
  Fn fn;
  std::mutex mutex;                 // one capture at a time; guards `current` and `reason`
  std::shared_ptr<const Capture> current;
  std::string reason;
  std::atomic<uint64_t> captures{0}, replays{0};

  std::vector<Tensor> record(const std::vector<Tensor>& inputs);
  std::vector<Tensor> replay(const Capture& c, const std::vector<Tensor>& inputs, std::string* failed) const;
};

namespace {

// Why `c` cannot replay these inputs and the state it finds now, or "".
std::string failed_guard(const Capture& c, const std::vector<Tensor>& inputs) {
  if (inputs.size() != c.input_types.size())
    return fmt::format("{} inputs, captured with {}", inputs.size(), c.input_types.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const LazyValue* v = inputs[i].impl();
    if (!(v->type == c.input_types[i]) || !(v->device == c.device))
      return fmt::format("input {} is {}, captured as {}", i, type_on(v->type, v->device),
                         type_on(c.input_types[i], c.device));
  }
  for (size_t i = 0; i < c.states.size(); ++i) {
    const StateSlot& s = c.states[i];
    const LazyValue* v = s.object->impl();
    if (!v != !s.had_value)
      return fmt::format("state {} (a tensor the function assigns) is {}, captured {}", i,
                         v ? "defined" : "undefined", s.had_value ? "defined" : "undefined");
    if (v && (!(v->type == s.type) || !(v->device == c.device)))
      return fmt::format("state {} is {}, captured as {}", i, type_on(v->type, v->device), type_on(s.type, c.device));
    if (s.same_as >= 0 && c.states[static_cast<size_t>(s.same_as)].object->impl() != v)
      return fmt::format("states {} and {} held one tensor at capture and now hold two", s.same_as, i);
  }
  for (const ConstantSlot& k : c.constants)
    if (k.held_outside && k.value->refs.load(std::memory_order_relaxed) == 1)
      return fmt::format("a {} the function read from outside was replaced (only the capture still holds it)",
                         k.value->type.str());
  return "";
}

}  // namespace

std::vector<Tensor> CapturedFunction::Impl::replay(const Capture& c, const std::vector<Tensor>& inputs,
                                                 std::string* failed) const {
  *failed = failed_guard(c, inputs);
  if (!failed->empty()) return {};
  // Values the caller left pending are computed first, in one execution.
  std::vector<LazyValue*> pending;
  for (const Tensor& t : inputs)
    if (t.impl()->pending()) pending.push_back(t.impl());
  for (const StateSlot& s : c.states)
    if (s.object->defined() && s.object->impl()->pending()) pending.push_back(s.object->impl());
  if (!pending.empty()) detail::evaluate(pending);

  for (const std::function<void()>& hook : c.hooks) hook();
  std::vector<Scalar> scalars = c.scalars;
  for (const BoundSlot& b : c.bound) scalars[b.slot] = Scalar::from_float(c.sources[b.source]()).cast_to(b.dtype);

  const size_t params = c.graph.inputs().size();
  std::vector<bool> donated(params, false);
  for (const StateSlot& s : c.states)
    if (s.param >= 0) donated[static_cast<size_t>(s.param)] = donatable(s.object->impl(), 1);
  std::vector<BufferRef> buffers(params);
  for (size_t i = 0; i < inputs.size(); ++i) buffers[i] = inputs[i].impl()->buffer;
  for (const StateSlot& s : c.states)
    if (s.param >= 0) buffers[static_cast<size_t>(s.param)] = s.object->impl()->buffer;
  for (const ConstantSlot& k : c.constants) buffers[static_cast<size_t>(k.param)] = k.value->buffer;

  std::shared_ptr<const PreparedGraph> p = c.prepared_for(donated);
  std::vector<BufferRef> results = engine_for(c.device).run_prepared(*p, buffers, scalars);
  buffers.clear();
  return hand_out(c, std::move(results));
}

std::vector<Tensor> CapturedFunction::Impl::record(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw Error(fmt::format("capture: input {} is undefined", i));
  // Everything the function finds is then a value, and whatever is pending after it ran
  // was made by it.
  for (const Tensor& t : inputs) t.eval();
  sync();
  auto c = std::make_shared<Capture>();
  c->device = inputs.empty() ? Device::cpu() : inputs[0].device();
  std::vector<Tensor> placeholders;
  std::vector<LazyValue*> raw;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!(inputs[i].device() == c->device))
      throw Error(fmt::format("capture: input {} is on {}, input 0 on {}: a captured function runs on one device", i,
                              inputs[i].device().str(), c->device.str()));
    c->input_types.push_back(inputs[i].impl()->type);
    placeholders.emplace_back(detail::make_trace_input(c->input_types.back(), c->device));
    raw.push_back(placeholders.back().impl());
  }

  Recording recording;
  detail::Recorder& rec = recording.recorder;
  std::vector<LazyValue*> output_values;  // retained
  struct ReleaseAll {
    std::vector<LazyValue*>& v;
    ~ReleaseAll() {
      for (LazyValue* x : v) detail::release(x);
    }
  } release_outputs{output_values};
  {
    std::vector<Tensor> outputs = fn(placeholders);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined()) throw Error(fmt::format("capture: the function returned an undefined tensor (output {})", i));
      LazyValue* v = outputs[i].impl();
      detail::retain(v);
      output_values.push_back(v);
    }
  }  // the returned vector's objects are destroyed while the hooks still watch

  // The states: objects that changed and are still alive.
  std::vector<LazyValue*> targets;
  std::unordered_map<const LazyValue*, int32_t> target_index;
  auto target = [&](LazyValue* v) {
    auto [it, inserted] = target_index.try_emplace(v, static_cast<int32_t>(targets.size()));
    if (inserted) targets.push_back(v);
    return it->second;
  };
  for (LazyValue* v : output_values) c->output_results.push_back(target(v));
  for (const Tensor* o : rec.order) {
    LazyValue* before = *rec.changed.at(o);
    LazyValue* after = o->impl();
    if (!before && !after) continue;  // assigned and cleared again: nothing to replay
    StateSlot s;
    s.object = const_cast<Tensor*>(o);
    s.had_value = before != nullptr;
    if (before) s.type = before->type;
    if (after) {
      if (after->grad_fn && !after->grad_fn->is_leaf())
        throw Error(fmt::format("capture: the function stores a {} with gradient history in a tensor that outlives it; "
                                "a replay cannot rebuild that history: detach() it",
                                after->type.str()));
      s.leaf_after = after->grad_fn != nullptr;
      s.result = target(after);
    }
    c->states.push_back(s);
  }
  if (targets.empty()) throw Error("capture: the function returned nothing and assigned no tensor that outlives it");
  if (inputs.empty()) c->device = targets[0]->device;
  for (LazyValue* v : targets)
    if (!(v->device == c->device))
      throw Error(fmt::format("capture: the function computes a {}: a captured function runs on one device ({})",
                              type_on(v->type, v->device), c->device.str()));

  // Returned values carry no gradient history (a replay's would have none), and no value the
  // function made keeps a tape after it: the tapes are dropped now, while the hooks still see
  // the objects they held die. What is left holding history is an error below.
  for (LazyValue* v : detail::thread_pending_values())
    if (v->grad_fn && !v->grad_fn->is_leaf()) v->grad_fn.reset();

  // A value the function made and left in some tensor it neither returns nor assigned before
  // (a new tensor in an outside container, a gradient left on a leaf) would not be there
  // after a replay.
  {
    detail::clear_thread_scalar_cache();
    const std::vector<LazyValue*> pending = detail::thread_pending_values();
    std::unordered_map<const LazyValue*, uint32_t> inside;
    for (const LazyValue* v : pending)
      for (size_t i = 0; i < v->num_operands; ++i) ++inside[v->operand(i)];
    for (LazyValue* v : output_values) ++inside[v];
    for (const StateSlot& s : c->states)
      if (s.result >= 0) ++inside[s.object->impl()];
    for (const LazyValue* v : pending) {
      if (v->trace_input) continue;
      const auto it = inside.find(v);
      const uint32_t counted = (it == inside.end() ? 0 : it->second) + v->saved_refs.load(std::memory_order_relaxed);
      if (v->refs.load(std::memory_order_relaxed) > counted)
        throw Error(fmt::format("capture: the function leaves a {} it computed in a tensor that it neither returns nor "
                                "held before the call (a gradient left on a leaf, a tensor put in a container): a "
                                "replay would not put it there. Return it, or clear it",
                                v->type.str()));
    }
  }

  detail::CutGraph cg = detail::cut(targets, detail::LeafPolicy::Capture, raw);
  c->graph = std::move(cg.graph);
  c->scalars = launch_scalars(c->graph);
  for (auto [slot, source] : cg.bound_slots) {
    const ValueId node = [&] {
      for (ValueId id = 0; id < c->graph.size(); ++id)
        if (c->graph.node(id).op == OpKind::ScalarParam && c->graph.node(id).attr("slot").i == slot) return id;
      KILN_ASSERT(false, "a bound scalar's slot is a scalar node of the graph");
      return ValueId{0};
    }();
    c->bound.push_back({static_cast<size_t>(slot), static_cast<size_t>(source), c->graph.type(node).dtype});
  }
  c->hooks = std::move(rec.hooks);
  c->sources = std::move(rec.sources);

  // Parameters after the inputs: a state's value before the call, or a constant.
  std::unordered_map<const LazyValue*, size_t> state_of;  // the first state that held it
  for (size_t i = 0; i < c->states.size(); ++i)
    if (LazyValue* before = *rec.changed.at(c->states[i].object)) state_of.try_emplace(before, i);
  std::unordered_map<const LazyValue*, uint32_t> ours;  // references this capture holds
  for (LazyValue* v : output_values) ++ours[v];
  for (const auto& [o, before] : rec.changed)
    if (before && *before) ++ours[*before];
  std::vector<bool> donated(c->graph.inputs().size(), false);
  std::vector<BufferRef> buffers;
  for (const Tensor& t : inputs) buffers.push_back(t.impl()->buffer);
  for (size_t j = 0; j < cg.leaves.size(); ++j) {
    LazyValue* leaf = cg.leaves[j];
    const auto param = static_cast<int32_t>(inputs.size() + j);
    const uint32_t holders = cg.leaf_uses[j] + ours[leaf];
    if (auto s = state_of.find(leaf); s != state_of.end()) {
      // Every state that held this value reads it through this parameter; a replay checks
      // that they still hold one value.
      for (size_t i = 0; i < c->states.size(); ++i) {
        StateSlot& st = c->states[i];
        if (*rec.changed.at(st.object) != leaf) continue;
        st.param = param;
        if (i != s->second) st.same_as = static_cast<int32_t>(s->second);
      }
      donated[static_cast<size_t>(param)] = donatable(leaf, holders);
    } else {
      detail::retain(leaf);
      c->constants.push_back({leaf, param, leaf->refs.load(std::memory_order_relaxed) - 1 > holders});
    }
    buffers.push_back(leaf->buffer);
  }

  std::shared_ptr<const PreparedGraph> p = c->prepared_for(donated);
  std::vector<BufferRef> results = engine_for(c->device).run_prepared(*p, buffers, c->scalars);
  buffers.clear();
  placeholders.clear();
  raw.clear();
  recording.finish(/*restore=*/false);
  current = c;
  captures.fetch_add(1, std::memory_order_relaxed);
  return hand_out(*c, std::move(results));
}

CapturedFunction::CapturedFunction(Fn fn) : impl_(std::make_shared<Impl>()) {
  if (!fn) throw Error("capture: the function is empty");
  impl_->fn = std::move(fn);
}

std::vector<Tensor> CapturedFunction::operator()(const std::vector<Tensor>& inputs) const {
  // Called while another function is captured: its body is recorded into that one.
  if (detail::thread_is_capturing()) return impl_->fn(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw Error(fmt::format("capture: input {} is undefined", i));
  for (;;) {
    std::shared_ptr<const Capture> c;
    {
      std::lock_guard lock(impl_->mutex);
      c = impl_->current;
    }
    std::string failed = "not captured yet";
    if (c) {
      std::vector<Tensor> out = impl_->replay(*c, inputs, &failed);
      if (failed.empty()) {
        impl_->replays.fetch_add(1, std::memory_order_relaxed);
        return out;
      }
    }
    std::lock_guard lock(impl_->mutex);
    if (impl_->current != c) continue;  // another thread captured meanwhile: try that one
    if (c) {
      log_line("recompile", fmt::format("capture: capturing again: {}", failed));
      impl_->reason = failed;
    }
    return impl_->record(inputs);
  }
}

CapturedFunction::Counts CapturedFunction::counts() const {
  return {impl_->captures.load(std::memory_order_relaxed), impl_->replays.load(std::memory_order_relaxed)};
}

std::string CapturedFunction::last_recapture_reason() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->reason;
}

CapturedFunction capture(CapturedFunction::Fn fn) { return CapturedFunction(std::move(fn)); }

void on_replay(std::function<void()> hook) {
  if (!hook) throw Error("on_replay: the hook is empty");
  if (detail::Recorder* r = detail::t_recorder) r->hooks.push_back(std::move(hook));
}

Tensor bound_scalar(std::function<double()> value, const Tensor& like) {
  if (!value) throw Error("bound_scalar: the function is empty");
  detail::require_defined("bound_scalar", like);
  const double now = value();
  detail::Recorder* r = detail::t_recorder;
  if (!r) return detail::scalar_for("bound_scalar", now, like);
  r->sources.push_back(std::move(value));
  return detail::scalar_for("bound_scalar", now, like, static_cast<int64_t>(r->sources.size() - 1));
}

}  // namespace kiln
