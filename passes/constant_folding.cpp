// passes/constant_folding.cpp - evaluate what depends only on constants, at compile time.
//
// A node whose operands are all constants is evaluated by the reference interpreter (the
// scalar semantics of every backend; nothing is re-implemented here) and replaced by a
// `constant`: a splat (`value`) when every element is the same, of any size; a literal
// (`data`) when it has at most PassOptions::max_folded_elements elements; otherwise it
// stays. Compile-time work is bounded: operands and results of more than 2^20 elements are
// only folded when elementwise on splats or views of splats (computed on one element).
// Chains fold in one pass, so whole constant subgraphs collapse. `rand` and `arange` are
// left alone (their parameters are smaller than their numbers). Guarantees: outputs
// bit-identical.
#include <algorithm>
#include <cstring>
#include <optional>

#include "kiln/passes/pass_manager.h"
#include "kiln/ir/interpreter.h"
#include "rewriter.h"

namespace kiln {
namespace {

// A known constant: a rank-0 value broadcast to the node's shape, or the full tensor.
struct Known {
  HostTensor value;
  bool splat = false;
};

constexpr int64_t kMaxOperandElements = int64_t{1} << 20;  // bounds compile-time work
constexpr int64_t kMaxFoldWork = int64_t{1} << 22;          // element operations per folded node

bool all_equal(const HostTensor& t) {
  const size_t size = dtype_size(t.dtype());
  for (int64_t k = 1; k < t.numel(); ++k)
    if (std::memcmp(t.data(), t.data() + static_cast<size_t>(k) * size, size) != 0) return false;
  return true;
}

Scalar element(const HostTensor& t, int64_t k) {
  return is_float(t.dtype()) ? Scalar::from_float(t.get_double(k)) : Scalar::from_int(t.get_int(k));
}

HostTensor first_element(const HostTensor& t) {
  HostTensor s(TensorType{t.dtype(), {}});
  std::memcpy(s.data(), t.data(), dtype_size(t.dtype()));
  return s;
}

HostTensor broadcast(const HostTensor& scalar, const Shape& shape) {
  HostTensor t(TensorType{scalar.dtype(), shape});
  const size_t size = dtype_size(scalar.dtype());
  for (int64_t k = 0; k < t.numel(); ++k) std::memcpy(t.data() + static_cast<size_t>(k) * size, scalar.data(), size);
  return t;
}

// The value a `constant` node holds.
Known from_constant(const Node& n) {
  const AttrValue& value = n.attr("value");
  if (value.present) {
    HostTensor s(TensorType{n.type.dtype, {}});
    if (is_float(n.type.dtype)) s.set_double(0, value.scalar.as_double());
    else s.set_int(0, value.scalar.as_int());
    return {std::move(s), true};
  }
  HostTensor t(n.type);
  const auto& data = *n.attr("data").scalars;
  for (size_t k = 0; k < data.size(); ++k) {
    if (is_float(n.type.dtype)) t.set_double(static_cast<int64_t>(k), data[k].as_double());
    else t.set_int(static_cast<int64_t>(k), data[k].as_int());
  }
  return {std::move(t), false};
}

Node make_constant(const Node& like, const Known& k) {
  Node c;
  c.op = OpKind::Constant;
  c.type = like.type;
  c.name = like.name;
  c.loc = like.loc;
  c.kernel = like.kernel;  // stays inside a fused region, where it is inlined
  c.attrs = Graph::make_attrs(OpKind::Constant);
  if (k.splat || (k.value.numel() > 0 && all_equal(k.value))) {
    AttrValue& v = c.attr("value");
    v.present = true;
    v.scalar = element(k.value, 0);
  } else {
    AttrValue& v = c.attr("data");
    v.present = true;
    auto values = std::make_shared<std::vector<Scalar>>();
    for (int64_t i = 0; i < k.value.numel(); ++i) values->push_back(element(k.value, i));
    v.scalars = std::move(values);
  }
  return c;
}

// Evaluates one node on known operands with the interpreter. `scalar_shapes` evaluates an
// elementwise node on the splat values themselves (rank 0), which is exact for splats.
HostTensor evaluate(const Node& n, const std::vector<const Known*>& operands, bool scalar_shapes) {
  Graph g("fold");
  std::vector<ValueId> params;
  std::vector<const HostTensor*> inputs;
  for (size_t i = 0; i < operands.size(); ++i) {
    inputs.push_back(&operands[i]->value);
    params.push_back(g.add_input("p" + std::to_string(i), operands[i]->value.type()));
  }
  Node copy = passes::with_operands(n, params);
  if (scalar_shapes) copy.type.shape = Shape();
  g.add_unchecked(std::move(copy));
  g.set_outputs({static_cast<ValueId>(g.size() - 1)});
  return std::move(interpret(g, inputs)[0]);
}

}  // namespace

Graph constant_folding(const Graph& g, const PassOptions& options) {
  passes::Rewriter r(g);
  std::vector<std::optional<Known>> known(g.size());  // by old value
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    if (n.op == OpKind::Constant) {
      known[id] = from_constant(n);
      r.copy(v);
      continue;
    }
    // A launch-bound scalar has no value at compile time (that is its point); a custom
    // kernel runs only where a compiler of its language is (ops.def).
    bool foldable = n.op != OpKind::Rand && n.op != OpKind::Arange && n.op != OpKind::ScalarParam &&
                    n.op != OpKind::Custom;
    std::vector<const Known*> operands;
    for (ValueId o : n.operands) {
      foldable = foldable && known[o].has_value();
      if (foldable) operands.push_back(&*known[o]);
    }
    if (!foldable) {
      r.copy(v);
      continue;
    }
    const OpCategory cat = n.info().category;
    const bool all_splat = std::all_of(operands.begin(), operands.end(), [](const Known* k) { return k->splat; });
    std::optional<Known> result;
    if (all_splat && cat == OpCategory::Elementwise) {
      result = Known{evaluate(n, operands, /*scalar_shapes=*/true), true};
    } else if (all_splat && (n.op == OpKind::Reshape || n.op == OpKind::Expand || n.op == OpKind::Permute ||
                             n.op == OpKind::Slice || n.op == OpKind::Unfold)) {
      result = Known{operands[0]->value, true};  // a view of a splat is the same splat
    } else if (n.type.shape.numel() <= options.max_folded_elements ||
               (all_splat && n.type.shape.numel() <= kMaxOperandElements)) {
      // Materialize the operands (bounded) and evaluate the node as it is. A reduction,
      // pad, concat or matmul of splats may give a splat of any (bounded) size.
      std::vector<Known> full;
      bool small = true;
      for (size_t i = 0; i < operands.size(); ++i) {
        const Shape& shape = g.type(n.operands[i]).shape;
        small = small && shape.numel() <= kMaxOperandElements;
        if (small) full.push_back({operands[i]->splat ? broadcast(operands[i]->value, shape) : operands[i]->value, false});
      }
      // The interpreter's work: every output element touches each (broadcast) operand, and a
      // matmul's contracted dim; bounded so that folding never stalls the compiler.
      int64_t work = n.type.shape.numel() * static_cast<int64_t>(std::max<size_t>(1, n.operands.size()));
      if (n.op == OpKind::Matmul) {
        const Shape& a = g.type(n.operands[0]).shape;
        work *= std::max<int64_t>(1, a[a.rank() - 1]);
      } else if (n.op == OpKind::Attention) {  // each output row walks every key's k and v rows
        const Shape& k = g.type(n.operands[1]).shape;
        work *= std::max<int64_t>(1, k.numel());
      } else if (n.op == OpKind::Conv) {  // each output element sums C/groups x window products
        const Shape& w = g.type(n.operands[1]).shape;
        work *= std::max<int64_t>(1, w.numel() / std::max<int64_t>(1, w[0]));
      }
      small = small && work <= kMaxFoldWork;
      if (small) {
        std::vector<const Known*> ptrs;
        for (const Known& k : full) ptrs.push_back(&k);
        HostTensor out = evaluate(n, ptrs, false);
        const bool splat = out.numel() > 0 && all_equal(out);
        if (splat) result = Known{first_element(out), true};
        else if (out.numel() <= options.max_folded_elements) result = Known{std::move(out), false};
      }
    }
    if (!result) {
      r.copy(v);
      continue;
    }
    r.set(v, r.add(make_constant(n, *result)));
    known[id] = std::move(result);
  }
  return r.finish();
}

}  // namespace kiln
