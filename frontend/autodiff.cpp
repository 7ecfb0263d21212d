// frontend/autodiff.cpp - the gradient tape: recording nodes, and the backward walk.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "capture_state.h"
#include "grad.h"
#include "kiln/ir/custom_kernel.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln {
namespace detail {
namespace {

[[gnu::tls_model("initial-exec")]] thread_local bool t_grad_disabled = false;

// Nodes are numbered as they are made, so a node is always newer than the nodes of its
// operands: walking nodes from the newest down is a topological order of the backward.
std::atomic<uint64_t> next_sequence{1};

constexpr const GradRule* kRules[] = {
#define KILN_OP(Id, name, arity, category, traits, rule, attrs, grad) &grad,
#include "kiln/ir/ops.def"
#undef KILN_OP
};

bool saves(const GradRule& rule, size_t operand) {
  return rule.saves == kSavesAll || (operand < 32 && (rule.saves >> operand & 1u) != 0);
}

std::shared_ptr<GradNode> make_leaf_node(const LazyValue* v) {
  auto node = std::make_shared<GradNode>();
  node->result_type = v->type;
  node->device = v->device;
  node->sequence = next_sequence.fetch_add(1, std::memory_order_relaxed);
  return node;
}

}  // namespace

const GradRule grad_none{0, nullptr};

const GradRule& grad_rule(OpKind op) { return *kRules[static_cast<size_t>(op)]; }

GradNode::~GradNode() {
  // A long chain of nodes (a loop of many steps) would be freed by recursion, one frame per
  // node: what a node held is handed to the outermost destructor running on this thread,
  // which releases it in a loop. (A pointer, trivially destroyed: nodes may die during exit.)
  struct Deferred {
    std::vector<std::shared_ptr<GradNode>> nodes;
    std::vector<Tensor> tensors;
  };
  [[gnu::tls_model("initial-exec")]] static thread_local Deferred* outer = nullptr;
  Deferred own;
  Deferred& deferred = outer ? *outer : own;
  for (std::shared_ptr<GradNode>& n : next)
    if (n) deferred.nodes.push_back(std::move(n));
  for (Tensor& t : saved)
    if (t.defined()) {
      t.impl()->saved_refs.fetch_sub(1, std::memory_order_relaxed);
      deferred.tensors.push_back(std::move(t));
    }
  if (grad.defined()) deferred.tensors.push_back(std::move(grad));
  if (outer) return;
  outer = &own;
  while (!own.nodes.empty() || !own.tensors.empty()) {
    if (!own.tensors.empty()) {
      Tensor t = std::move(own.tensors.back());
      own.tensors.pop_back();
      continue;  // t is released here
    }
    std::shared_ptr<GradNode> n = std::move(own.nodes.back());
    own.nodes.pop_back();
  }
  outer = nullptr;
}

void GradNode::release_saved() {
  InternalAssignments internal;  // the tape's own slots, not a captured function's state
  for (Tensor& t : saved)
    if (t.defined()) {
      t.impl()->saved_refs.fetch_sub(1, std::memory_order_relaxed);
      t = Tensor();
    }
  released = true;
}

void record_grad(LazyValue* result, OpKind op, const Attrs& attrs, std::span<const Tensor* const> operands) {
  if (t_grad_disabled || !is_float(result->type.dtype)) return;
  bool any = false;
  for (const Tensor* t : operands) any = any || t->impl()->grad_fn != nullptr;
  if (!any) return;
  const GradRule& rule = grad_rule(op);
  if (!rule.backward) return;
  auto node = std::make_shared<GradNode>();
  node->rule = &rule;
  node->op = op;
  node->attrs = attrs;
  node->result_type = result->type;
  node->device = result->device;
  node->operand_types.reserve(operands.size());
  node->saved.reserve(operands.size());
  node->next.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    LazyValue* o = operands[i]->impl();
    node->operand_types.push_back(o->type);
    if (saves(rule, i)) {
      o->saved_refs.fetch_add(1, std::memory_order_relaxed);
      node->saved.push_back(*operands[i]);
    } else {
      node->saved.emplace_back();
    }
    node->next.push_back(o->grad_fn);
  }
  node->sequence = next_sequence.fetch_add(1, std::memory_order_relaxed);
  result->grad_fn = std::move(node);
}

Tensor sum_to(const Tensor& g, const TensorType& type) {
  const int extra = g.rank() - type.shape.rank();
  KILN_ASSERT(extra >= 0, "a gradient has at least its operand's rank");
  Axes axes;
  for (int d = 0; d < g.rank(); ++d)
    if (d < extra || (type.shape[d - extra] == 1 && g.shape()[d] != 1)) axes.push_back(d);
  Tensor r = g;
  if (!axes.empty()) r = r.sum(axes, /*keepdim=*/true);
  if (r.shape() != type.shape) r = r.reshape(std::vector<int64_t>(type.shape.begin(), type.shape.end()));
  return r.dtype() == type.dtype ? r : r.to(type.dtype);
}

namespace {

std::mutex& custom_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, CustomBackward>& custom_backwards() {
  static std::map<std::string, CustomBackward> m;  // by kernel digest
  return m;
}

/// The backward walk from `root` (whose gradient is `seed`): every node it reaches, newest
/// first. With `targets`, only the gradients flowing into those nodes are wanted: they are
/// returned in order and leaves are left alone; without, leaves accumulate theirs. Unless
/// `retain_graph`, the nodes gone through drop what they saved, as PyTorch's do: the values
/// only the tape held are then free to be fused away.
std::vector<Tensor> run_backward(const std::shared_ptr<GradNode>& root, const Tensor& seed,
                                 std::span<GradNode* const> targets, bool retain_graph) {
  // The nodes reachable from the root, and, for targets, which of them lead to one.
  std::vector<GradNode*> nodes;
  std::unordered_set<GradNode*> seen{root.get()};
  std::vector<GradNode*> stack{root.get()};
  while (!stack.empty()) {
    GradNode* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    for (const std::shared_ptr<GradNode>& o : n->next)
      if (o && seen.insert(o.get()).second) stack.push_back(o.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](GradNode* a, GradNode* b) { return a->sequence > b->sequence; });
  const bool capture = !targets.empty();
  std::unordered_set<GradNode*> needed(targets.begin(), targets.end());
  if (capture) {
    // Oldest first: a node leads to a target if it is one or an operand's node does.
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
      for (const std::shared_ptr<GradNode>& o : (*it)->next)
        if (o && needed.count(o.get())) {
          needed.insert(*it);
          break;
        }
  }

  NoGradGuard no_grad;     // the backward of the backward is not recorded
  BakedScalars baked;      // rules' constants (0.5, 2 / sqrt(pi)) fold like literals
  std::unordered_map<GradNode*, Tensor> grads{{root.get(), seed}};
  std::unordered_map<GradNode*, Tensor> captured;
  auto accumulate = [](Tensor& slot, const Tensor& g) { slot = slot.defined() ? slot + g : g; };
  for (GradNode* n : nodes) {
    auto it = grads.find(n);
    if (it == grads.end()) continue;
    const Tensor g = std::move(it->second);
    grads.erase(it);
    if (capture && std::find(targets.begin(), targets.end(), n) != targets.end()) captured[n] = g;
    if (n->is_leaf()) {
      if (!capture) {
        InternalAssignments internal;  // a leaf's gradient is not a captured function's state
        accumulate(n->grad, g);
      }
      continue;
    }
    uint32_t wanted = 0;
    for (size_t i = 0; i < n->next.size() && i < 32; ++i)
      if (n->next[i] && (!capture || needed.count(n->next[i].get()))) wanted |= 1u << i;
    if (wanted == 0) continue;
    if (n->released && n->rule->saves != 0)
      throw Error(fmt::format("backward: the '{}' node's saved values were dropped by an earlier backward; pass "
                              "retain_graph to the first to go through the graph again",
                              op_name(n->op)));
    const GradInput in{n->op, n->attrs, n->saved, n->operand_types, n->result_type, n->device, g, wanted};
    std::vector<Tensor> operand_grads = n->rule->backward(in);
    if (!retain_graph) n->release_saved();
    KILN_ASSERT(operand_grads.size() == n->next.size(), "a gradient rule gives one gradient per operand");
    for (size_t i = 0; i < operand_grads.size(); ++i) {
      if (!in.wants(i) || !operand_grads[i].defined()) continue;
      const Tensor& og = operand_grads[i];
      if (og.dtype() != n->operand_types[i].dtype || og.shape() != n->operand_types[i].shape)
        throw Error(fmt::format("backward: the gradient rule of '{}' gave {} for its operand {} of {}",
                                op_name(n->op), TensorType{og.dtype(), og.shape()}.str(), i,
                                n->operand_types[i].str()));
      accumulate(grads[n->next[i].get()], og);
    }
  }
  std::vector<Tensor> out;
  for (GradNode* t : targets) {
    auto c = captured.find(t);
    out.push_back(c == captured.end() ? Tensor() : c->second);
  }
  return out;
}

Tensor seed_for(std::string_view fn, const Tensor& output, const Tensor& given) {
  if (given.defined()) {
    if (given.dtype() != output.dtype() || given.shape() != output.shape())
      fail(fn, fmt::format("the gradient given is {}, the tensor is {}", type_str(given), type_str(output)));
    return given;
  }
  if (output.numel() != 1)
    fail(fn, fmt::format("needs a tensor with one element (a loss), or the gradient to start from; got {}",
                         type_str(output)));
  return kiln::ones(output.shape(), output.dtype(), output.device());
}

const std::shared_ptr<GradNode>& node_of(std::string_view fn, const Tensor& output) {
  require_defined(fn, output);
  const std::shared_ptr<GradNode>& node = output.impl()->grad_fn;
  if (!node)
    fail(fn, fmt::format("{} does not require a gradient: nothing it was computed from requires one, or it was "
                         "computed under a NoGradGuard",
                         type_str(output)));
  return node;
}

}  // namespace

const CustomBackward* custom_backward(const CustomKernel& kernel) {
  std::lock_guard lock(custom_mutex());
  auto it = custom_backwards().find(kernel.digest);
  return it == custom_backwards().end() ? nullptr : &it->second;
}

void set_custom_backward(const CustomKernel& kernel, CustomBackward backward) {
  std::lock_guard lock(custom_mutex());
  custom_backwards()[kernel.digest] = std::move(backward);
}

}  // namespace detail

using detail::fail;
using detail::LazyValue;

NoGradGuard::NoGradGuard() : was_(std::exchange(detail::t_grad_disabled, true)) {}
NoGradGuard::~NoGradGuard() { detail::t_grad_disabled = was_; }

bool grad_enabled() { return !detail::t_grad_disabled; }

bool differentiable(OpKind op) { return detail::grad_rule(op).backward != nullptr; }

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output,
                         bool allow_unused, bool retain_graph) {
  const std::shared_ptr<detail::GradNode>& root = detail::node_of("grad", output);
  const Tensor seed = detail::seed_for("grad", output, grad_output);
  std::vector<detail::GradNode*> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    detail::require_defined("grad", inputs[i]);
    detail::GradNode* n = inputs[i].impl()->grad_fn.get();
    if (!n) fail("grad", fmt::format("input {} ({}) does not require a gradient", i, detail::type_str(inputs[i])));
    targets.push_back(n);
  }
  if (targets.empty()) return {};
  std::vector<Tensor> grads = detail::run_backward(root, seed, targets, retain_graph);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    if (!allow_unused)
      fail("grad", fmt::format("input {} ({}) is not used to compute the output; pass allow_unused to get zeros",
                               i, detail::type_str(inputs[i])));
    grads[i] = zeros(inputs[i].shape(), inputs[i].dtype(), inputs[i].device());
  }
  return grads;
}

const Tensor& Tensor::requires_grad_(bool on) const {
  detail::require_defined("requires_grad_", *this);
  LazyValue* v = value_;
  if (v->grad_fn && !v->grad_fn->is_leaf())
    fail("requires_grad_", fmt::format("{} was computed from tensors that require gradients; only a leaf can be made "
                                       "one (detach() it first)",
                                       detail::type_str(*this)));
  if (!on) {
    v->grad_fn.reset();
    return *this;
  }
  if (!is_float(v->type.dtype))
    fail("requires_grad_", fmt::format("only float tensors take gradients, got {}", detail::type_str(*this)));
  if (!v->grad_fn) v->grad_fn = detail::make_leaf_node(v);
  return *this;
}

bool Tensor::requires_grad() const { return value_ && value_->grad_fn != nullptr; }

bool Tensor::is_leaf() const { return !value_ || !value_->grad_fn || value_->grad_fn->is_leaf(); }

Tensor Tensor::grad() const {
  detail::require_defined("grad", *this);
  const auto& node = value_->grad_fn;
  return node && node->is_leaf() ? node->grad : Tensor();
}

void Tensor::set_grad(const Tensor& gradient) const {
  detail::require_defined("set_grad", *this);
  const auto& node = value_->grad_fn;
  if (!node || !node->is_leaf())
    fail("set_grad", fmt::format("{} is not a leaf that requires gradients", detail::type_str(*this)));
  if (gradient.defined() && (gradient.dtype() != dtype() || gradient.shape() != shape() || gradient.device() != device()))
    fail("set_grad", fmt::format("the gradient of {} on {} cannot be {} on {}", detail::type_str(*this),
                                 device().str(), detail::type_str(gradient), gradient.device().str()));
  detail::InternalAssignments internal;
  node->grad = gradient;
}

void Tensor::backward() const { backward(Tensor()); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  const std::shared_ptr<detail::GradNode>& root = detail::node_of("backward", *this);
  const Tensor seed = detail::seed_for("backward", *this, gradient);
  detail::run_backward(root, seed, {}, retain_graph);
}

Tensor Tensor::detach() const {
  detail::require_defined("detach", *this);
  if (!value_->grad_fn) return *this;
  if (!value_->pending()) return Tensor(detail::make_evaluated(value_->buffer, value_->device));
  // A pending value: the same recipe read through an identity view, which simplify removes.
  NoGradGuard no_grad;
  const TensorType type = value_->type;
  return detail::record("detach", OpKind::Reshape, {this}, {}, &type);
}

}  // namespace kiln
