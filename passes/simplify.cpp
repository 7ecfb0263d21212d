// passes/simplify.cpp - algebraic simplification: local rewrites, one declarative rule each.
//
// A rule fires only when its replacement has exactly the node's type (so x + 0 does not
// fire when the 0 broadcasts x to a larger shape or promotes its dtype). Rules that can
// change NaN or infinity behaviour run only with PassOptions::fast_math. Operands are
// already simplified when a node is visited, so chains collapse in one pass; dead nodes
// left behind are DCE's job. Guarantees without fast-math: outputs bit-identical.
#include <cmath>
#include <optional>

#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {
namespace {

using Replacement = std::optional<ValueId>;

// What a rule sees: the new graph and the node being visited, with its operands mapped.
struct Ctx {
  passes::Rewriter& r;
  const Node& node;  // old node; `operands` holds its mapped operands
  const std::vector<ValueId>& operands;

  const Node& def(ValueId v) const { return r.out().node(v); }
  const TensorType& type() const { return node.type; }
  bool same_type(ValueId v) const { return def(v).type == node.type; }
  Replacement if_same_type(ValueId v) const { return same_type(v) ? Replacement(v) : std::nullopt; }

  // The value every element of `v` holds, if `v` is a constant splat.
  std::optional<double> splat(ValueId v) const { return passes::splat_value(def(v)); }
  // Compares bits, so -0.0 and 0.0 differ: x + (-0.0) is x for every x, x + 0.0 is not
  // (it turns -0.0 into 0.0).
  bool is_splat(ValueId v, double value) const {
    const auto s = splat(v);
    return s && *s == value && std::signbit(*s) == std::signbit(value);
  }
  bool is_integer() const { return !is_float(node.type.dtype); }
  // A new `constant` splat of the node's type.
  ValueId make_splat(double value) const {
    Node c;
    c.op = OpKind::Constant;
    c.type = node.type;
    c.name = node.name;  // it replaces the node, so it may carry its name and kernel
    c.loc = node.loc;
    c.kernel = node.kernel;
    c.attrs = Graph::make_attrs(OpKind::Constant);
    AttrValue& v = c.attr("value");
    v.present = true;
    v.scalar = is_float(node.type.dtype) ? Scalar::from_float(value) : Scalar::from_int(static_cast<int64_t>(value));
    return r.add(std::move(c));
  }
  // A new node of the visited node's type and name, with the given op, operands and attributes.
  ValueId make(OpKind op, std::vector<ValueId> ops, Attrs attrs) const {
    Node n;
    n.op = op;
    n.type = node.type;
    n.operands = std::move(ops);
    n.attrs = std::move(attrs);
    n.name = node.name;
    n.loc = node.loc;
    n.kernel = node.kernel;
    return r.add(std::move(n));
  }
};

// Casting from `from` to `to` keeps every value exactly (so a later cast sees the original).
bool lossless(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  switch (from) {
    case DType::I32: return to == DType::I64 || to == DType::F64;
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

bool is_identity_slice(const Node& n, const Shape& in) {
  const auto& start = n.attr("start").ints;
  const auto& stop = n.attr("stop").ints;
  const AttrValue& step = n.attr("step");
  for (int d = 0; d < in.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    if (start[i] != 0 || stop[i] != in[d] || (step.present && step.ints[i] != 1 && in[d] > 1)) return false;
  }
  return true;
}

struct Rule {
  OpKind op;
  bool fast_math;
  const char* doc;
  Replacement (*apply)(const Ctx&);
};

// clang-format off
const Rule kRules[] = {
  {OpKind::Add, false, "add(x, -0.0) -> x; add(x, 0) -> x for integers (0.0 would turn -0.0 into 0.0)", [](const Ctx& c) -> Replacement {
     for (int i : {0, 1}) {
       const ValueId zero = c.operands[static_cast<size_t>(1 - i)];
       if (c.is_splat(zero, -0.0) || (c.is_integer() && c.is_splat(zero, 0)))
         if (auto r = c.if_same_type(c.operands[static_cast<size_t>(i)])) return r;
     }
     return std::nullopt; }},
  {OpKind::Add, true, "add(x, 0.0) -> x (fast-math: wrong for x = -0.0)", [](const Ctx& c) -> Replacement {
     for (int i : {0, 1})
       if (c.is_splat(c.operands[static_cast<size_t>(1 - i)], 0)) if (auto r = c.if_same_type(c.operands[static_cast<size_t>(i)])) return r;
     return std::nullopt; }},
  {OpKind::Sub, false, "sub(x, 0.0) -> x (exact: -0.0 - 0.0 is -0.0)", [](const Ctx& c) -> Replacement {
     return c.is_splat(c.operands[1], 0) ? c.if_same_type(c.operands[0]) : std::nullopt; }},
  {OpKind::Mul, false, "mul(x, 1) -> x, mul(1, x) -> x", [](const Ctx& c) -> Replacement {
     for (int i : {0, 1}) if (c.is_splat(c.operands[static_cast<size_t>(1 - i)], 1)) if (auto r = c.if_same_type(c.operands[static_cast<size_t>(i)])) return r;
     return std::nullopt; }},
  {OpKind::Div, false, "div(x, 1) -> x", [](const Ctx& c) -> Replacement {
     return c.is_splat(c.operands[1], 1) ? c.if_same_type(c.operands[0]) : std::nullopt; }},
  {OpKind::Pow, false, "pow(x, 1) -> x", [](const Ctx& c) -> Replacement {
     return c.is_splat(c.operands[1], 1) ? c.if_same_type(c.operands[0]) : std::nullopt; }},
  {OpKind::Pow, false, "pow(x, 2) -> x * x, pow(x, 3) -> x * x * x in f64 (pow's definition for these exponents: a multiply-add chain instead of a libm call per element)", [](const Ctx& c) -> Replacement {
     const Node& x = c.def(c.operands[0]);
     const bool square = c.is_splat(c.operands[1], 2), cube = c.is_splat(c.operands[1], 3);
     if ((!square && !cube) || !is_float(c.type().dtype) || !is_float(x.type.dtype) || !(x.type.shape == c.type().shape))
       return std::nullopt;
     // A square of a float is exact in the next wider type, so it rounds once in its own; a
     // cube is computed in f64 as the interpreter computes it, and rounded once.
     if (square && x.type.dtype == c.type().dtype) return c.make(OpKind::Mul, {c.operands[0], c.operands[0]}, Graph::make_attrs(OpKind::Mul));
     auto in_f64 = [&](OpKind op, std::vector<ValueId> ops) {
       Node n;
       n.op = op;
       n.type = TensorType{DType::F64, c.type().shape};
       n.operands = std::move(ops);
       n.attrs = Graph::make_attrs(op);
       n.loc = c.node.loc;
       n.kernel = c.node.kernel;
       return c.r.add(std::move(n));
     };
     const ValueId x64 = x.type.dtype == DType::F64 ? c.operands[0] : in_f64(OpKind::Cast, {c.operands[0]});
     ValueId y = in_f64(OpKind::Mul, {x64, x64});
     if (cube) y = in_f64(OpKind::Mul, {y, x64});
     if (c.type().dtype == DType::F64) return y;
     return c.make(OpKind::Cast, {y}, Graph::make_attrs(OpKind::Cast)); }},
  {OpKind::Mul, true, "mul(x, 0) -> 0 (fast-math: wrong for x = inf or nan, and for the sign of -0)", [](const Ctx& c) -> Replacement {
     if (c.is_splat(c.operands[0], 0) || c.is_splat(c.operands[1], 0)) return c.make_splat(0);
     return std::nullopt; }},
  {OpKind::Sub, true, "sub(x, x) -> 0 (fast-math: wrong for x = inf or nan)", [](const Ctx& c) -> Replacement {
     return c.operands[0] == c.operands[1] ? Replacement(c.make_splat(0)) : std::nullopt; }},
  {OpKind::Exp, true, "exp(log(x)) -> x (fast-math: wrong for x < 0)", [](const Ctx& c) -> Replacement {
     const Node& in = c.def(c.operands[0]);
     return in.op == OpKind::Log ? c.if_same_type(in.operands[0]) : std::nullopt; }},
  {OpKind::Log, true, "log(exp(x)) -> x (fast-math: wrong where exp overflows)", [](const Ctx& c) -> Replacement {
     const Node& in = c.def(c.operands[0]);
     return in.op == OpKind::Exp ? c.if_same_type(in.operands[0]) : std::nullopt; }},
  {OpKind::Cast, false, "cast(x) to x's own type -> x", [](const Ctx& c) -> Replacement {
     return c.if_same_type(c.operands[0]); }},
  {OpKind::Cast, false, "cast(cast(x, T1), T2) -> cast(x, T2) when x -> T1 loses nothing (and, for an integer x through a float T1 into an integer T2, x -> T2 neither: the float saturates where a direct cast wraps)", [](const Ctx& c) -> Replacement {
     const Node& in = c.def(c.operands[0]);
     if (in.op != OpKind::Cast) return std::nullopt;
     const ValueId x = in.operands[0];
     const DType from = c.def(x).type.dtype, to = c.node.type.dtype;
     if (!lossless(from, in.type.dtype)) return std::nullopt;
     if (is_integer(from) && is_float(in.type.dtype) && is_integer(to) && !lossless(from, to)) return std::nullopt;
     if (c.same_type(x)) return x;
     return c.make(OpKind::Cast, {x}, Graph::make_attrs(OpKind::Cast)); }},
  {OpKind::Reshape, false, "reshape(x) to x's shape -> x; reshape(reshape(x)) -> reshape(x)", [](const Ctx& c) -> Replacement {
     if (c.same_type(c.operands[0])) return c.operands[0];
     const Node& in = c.def(c.operands[0]);
     if (in.op != OpKind::Reshape) return std::nullopt;
     if (c.same_type(in.operands[0])) return in.operands[0];
     return c.make(OpKind::Reshape, {in.operands[0]}, Graph::make_attrs(OpKind::Reshape)); }},
  {OpKind::Expand, false, "expand(x) to x's shape -> x; expand(expand(x)) -> expand(x)", [](const Ctx& c) -> Replacement {
     if (c.same_type(c.operands[0])) return c.operands[0];
     const Node& in = c.def(c.operands[0]);
     if (in.op != OpKind::Expand) return std::nullopt;
     return c.make(OpKind::Expand, {in.operands[0]}, Graph::make_attrs(OpKind::Expand)); }},
  {OpKind::Permute, false, "permute(x, identity) -> x; permute(permute(x, p), q) -> permute(x, p[q])", [](const Ctx& c) -> Replacement {
     const auto& q = c.node.attr("perm").ints;
     bool identity = true;
     for (size_t k = 0; k < q.size(); ++k) identity = identity && q[k] == static_cast<int64_t>(k);
     if (identity) return c.operands[0];
     const Node& in = c.def(c.operands[0]);
     if (in.op != OpKind::Permute) return std::nullopt;
     const auto& p = in.attr("perm").ints;
     Attrs a = Graph::make_attrs(OpKind::Permute);
     AttrValue& perm = a[0];
     perm.present = true;
     bool composed_identity = true;
     for (size_t k = 0; k < q.size(); ++k) {
       perm.ints.push_back(p[static_cast<size_t>(q[k])]);
       composed_identity = composed_identity && perm.ints.back() == static_cast<int64_t>(k);
     }
     if (composed_identity) return in.operands[0];
     return c.make(OpKind::Permute, {in.operands[0]}, std::move(a)); }},
  {OpKind::Slice, false, "slice(x) covering all of x -> x", [](const Ctx& c) -> Replacement {
     return is_identity_slice(c.node, c.def(c.operands[0]).type.shape) ? c.if_same_type(c.operands[0]) : std::nullopt; }},
  {OpKind::Pad, false, "pad(x) by nothing -> x", [](const Ctx& c) -> Replacement {
     return c.if_same_type(c.operands[0]); }},
};
// clang-format on

// Unary traits from the op table: an involution undoes itself, an idempotent op repeats.
Replacement unary_traits(const Ctx& c) {
  const OpInfo& info = c.node.info();
  if (c.operands.size() != 1) return std::nullopt;
  const Node& in = c.def(c.operands[0]);
  if (in.op != c.node.op) return std::nullopt;
  if (info.has(trait::Involution)) return c.if_same_type(in.operands[0]);   // neg(neg x) -> x
  if (info.has(trait::Idempotent)) return c.operands[0];                    // relu(relu x) -> relu x
  return std::nullopt;
}

// Binary idempotent ops: max(x, x) -> x, and(x, x) -> x.
Replacement binary_traits(const Ctx& c) {
  if (c.operands.size() != 2 || !c.node.info().has(trait::Idempotent)) return std::nullopt;
  return c.operands[0] == c.operands[1] ? c.if_same_type(c.operands[0]) : std::nullopt;
}

}  // namespace

Graph simplify(const Graph& g, const PassOptions& options) {
  passes::Rewriter r(g);
  std::vector<ValueId> operands;
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const Node& n = g.node(v);
    if (n.op == OpKind::Input) continue;
    operands.clear();
    for (ValueId o : n.operands) operands.push_back(r.map(o));
    const Ctx ctx{r, n, operands};
    Replacement rep = unary_traits(ctx);
    if (!rep) rep = binary_traits(ctx);
    for (const Rule& rule : kRules) {
      if (rep) break;
      if (rule.op == n.op && (!rule.fast_math || options.fast_math)) rep = rule.apply(ctx);
    }
    if (rep) r.set(v, *rep);
    else r.copy(v);
  }
  return r.finish();
}

}  // namespace kiln
