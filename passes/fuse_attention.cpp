// passes/fuse_attention.cpp - scaled dot-product attention written out in primitives becomes
// one `attention` node, which runs as one kernel with an online softmax.
//
//   %s = matmul %q, %kt                  scores [B.., T, S] (kt: k transposed, [B.., D, S])
//   %x = mul %s, %c   (or div, or none)   a splat scale, or a `scalar` bound at launch
//   %x2 = add %x, %bias (or none)         a mask or position bias, broadcast to the scores
//   %p = softmax(%x2) over the last axis: reduce_max, sub, exp, reduce_sum, div
//   %p2 = where(isnan(%p), 0, %p) (or none: PyTorch's exports zero a fully masked row)
//   %y = matmul %p2, %v
// becomes
//   %k = permute %kt {perm = [.., -1, -2]}
//   %y = attention %q, %k, %v, %bias {scale = c, masked_zero}
// (a `scalar` scale, which the frontend records for a C++ number, scales q instead: %q2 = mul
// %q, %c, and scale = 1) when every intermediate value is used only inside the pattern and the
// types are f32. The frontend's softmax and the ONNX importer's are the primitives above, so
// both the frontend's form and the exporters' (Reshape/Transpose/Split around it are views the
// attention step reads in place) are matched. In real arithmetic the result is the same; in
// floats the normalization moves after the product and the sums run in another order, as a
// matmul's may (docs/passes.md).
#include <cmath>

#include "kiln/passes/pass_manager.h"
#include "rewriter.h"

namespace kiln {
namespace {

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), users_(g.size(), 0) {
    for (const Node& n : g.nodes())
      for (ValueId o : n.operands) ++users_[o];
    for (ValueId v : g.outputs()) ++users_[v];
  }

  struct Match {
    ValueId q, kt, v;
    std::optional<ValueId> bias;
    double scale = 1;
    /// A scale known only at launch (a `scalar`), which q is multiplied (or divided) by
    /// instead: the attribute is a compile-time constant.
    std::optional<std::pair<OpKind, ValueId>> q_scaled_by;
    bool masked_zero = false;
  };

  std::optional<Match> at(ValueId y) const {
    const Node& mm = g_.node(y);
    if (mm.op != OpKind::Matmul || mm.kernel >= 0 || mm.type.dtype != DType::F32) return std::nullopt;
    Match m;
    m.v = mm.operands[1];
    ValueId p = mm.operands[0];
    // where(isnan(p), 0, p): p has two users, both here.
    if (const Node& w = g_.node(p); w.op == OpKind::Where && only_users(p, 1)) {
      const Node& cond = g_.node(w.operands[0]);
      if (cond.op != OpKind::IsNan || cond.operands[0] != w.operands[2] || !only_users(w.operands[0], 1) ||
          !is_splat(w.operands[1], 0.0) || !(w.type == g_.type(w.operands[2])))
        return std::nullopt;
      p = w.operands[2];
      m.masked_zero = true;
      if (!only_users(p, 2)) return std::nullopt;
    } else if (!only_users(p, 1)) {
      return std::nullopt;
    }
    // p = e / sum(e), e = exp(x - max(x)), over the last axis, rows kept.
    const Node& div = g_.node(p);
    if (div.op != OpKind::Div) return std::nullopt;
    const ValueId e = div.operands[0], sum = div.operands[1];
    if (!is_last_axis_reduction(sum, OpKind::ReduceSum) || g_.node(sum).operands[0] != e || !only_users(sum, 1) ||
        !only_users(e, 2))
      return std::nullopt;
    const Node& exp = g_.node(e);
    if (exp.op != OpKind::Exp || !only_users(exp.operands[0], 1)) return std::nullopt;
    const Node& sub = g_.node(exp.operands[0]);
    if (sub.op != OpKind::Sub) return std::nullopt;
    const ValueId x = sub.operands[0], most = sub.operands[1];
    if (!is_last_axis_reduction(most, OpKind::ReduceMax) || g_.node(most).operands[0] != x || !only_users(most, 1) ||
        !only_users(x, 2) || !(g_.type(x) == g_.type(p)))
      return std::nullopt;
    // x = scores (* or / a splat) (+ bias), of the scores' own type.
    ValueId t = x;
    if (const Node& add = g_.node(x); add.op == OpKind::Add) {
      for (int i : {0, 1}) {
        const ValueId chain = add.operands[static_cast<size_t>(i)], other = add.operands[static_cast<size_t>(1 - i)];
        if (g_.type(chain) == g_.type(x) && scores_of(chain) && g_.type(other).dtype == DType::F32) {
          t = chain;
          m.bias = other;
          break;
        }
      }
      if (!m.bias || !only_users(t, 1)) return std::nullopt;
    }
    const std::optional<Scores> scores = scores_of(t);
    if (!scores) return std::nullopt;
    m.scale = scores->scale;
    m.q_scaled_by = scores->q_scaled_by;
    const Node& qk = g_.node(scores->matmul);
    m.q = qk.operands[0];
    m.kt = qk.operands[1];
    // q * c keeps q's type: c has one element, and no more dims than q.
    if (m.q_scaled_by && (g_.type(m.q).dtype != DType::F32 ||
                          g_.type(m.q_scaled_by->second).shape.rank() > g_.type(m.q).shape.rank()))
      return std::nullopt;
    return m;
  }

 private:
  bool only_users(ValueId v, int n) const { return users_[v] == n; }

  struct Scores {
    ValueId matmul;
    double scale = 1;
    std::optional<std::pair<OpKind, ValueId>> q_scaled_by;
  };
  // The matmul of q and k^T that `t` is, or scales by a splat constant, or by a `scalar`
  // (a value bound at launch, as the frontend records a C++ number).
  std::optional<Scores> scores_of(ValueId t) const {
    const Node& n = g_.node(t);
    auto is_scores = [&](ValueId s) {
      const Node& mm = g_.node(s);
      return mm.op == OpKind::Matmul && mm.kernel < 0 && mm.type == g_.type(t) && mm.type.dtype == DType::F32;
    };
    if (is_scores(t)) return Scores{t, 1.0, std::nullopt};
    if (n.kernel >= 0 || (n.op != OpKind::Mul && n.op != OpKind::Div)) return std::nullopt;
    for (int i : {0, 1}) {
      if (n.op == OpKind::Div && i == 1) break;  // c / s is no scaling
      const ValueId s = n.operands[static_cast<size_t>(i)], c = n.operands[static_cast<size_t>(1 - i)];
      if (!is_scores(s) || !only_users(s, 1)) continue;
      if (const std::optional<double> k = splat(c); k && std::isfinite(*k) && *k != 0)
        return Scores{s, n.op == OpKind::Mul ? *k : 1.0 / *k, std::nullopt};
      const Node& cn = g_.node(c);
      if (cn.op == OpKind::ScalarParam && cn.type.dtype == DType::F32 && cn.type.shape.numel() == 1)
        return Scores{s, 1.0, std::pair{n.op, c}};
    }
    return std::nullopt;
  }

  bool is_last_axis_reduction(ValueId v, OpKind op) const {
    const Node& n = g_.node(v);
    if (n.op != op || n.kernel >= 0) return false;
    const int rank = g_.type(n.operands[0]).shape.rank();
    return n.attr("keepdim").present && n.attr("axes").ints == std::vector<int64_t>{rank - 1};
  }

  std::optional<double> splat(ValueId v) const { return passes::splat_value(g_.node(v)); }
  // Bits compared: a where that picks -0.0 is not a zero row.
  bool is_splat(ValueId v, double value) const {
    const std::optional<double> s = splat(v);
    return s && *s == value && std::signbit(*s) == std::signbit(value);
  }

  const Graph& g_;
  std::vector<int> users_;
};

}  // namespace

Graph fuse_attention(const Graph& g, const PassOptions& options) {
  const Matcher matcher(g);
  passes::Rewriter r(g);
  bool changed = false;
  for (size_t id = 0; id < g.size(); ++id) {
    const auto v = static_cast<ValueId>(id);
    const std::optional<Matcher::Match> m = matcher.at(v);
    if (!m) {
      if (g.node(v).op != OpKind::Input) r.copy(v);
      continue;
    }
    const Node& y = g.node(v);
    const Node& kt = g.node(m->kt);
    std::vector<int64_t> perm;
    const int rank = kt.type.shape.rank();
    for (int d = 0; d < rank; ++d) perm.push_back(d);
    std::swap(perm[static_cast<size_t>(rank - 2)], perm[static_cast<size_t>(rank - 1)]);
    Node k;
    k.op = OpKind::Permute;
    k.attrs = Graph::make_attrs(OpKind::Permute);
    k.attr("perm").present = true;
    k.attr("perm").ints = perm;
    const TensorType kt_type = r.out().type(r.map(m->kt));
    k.type = infer_type(OpKind::Permute, std::span(&kt_type, 1), k.attrs, nullptr).take();
    k.operands = {r.map(m->kt)};
    k.loc = y.loc;
    const ValueId kv = r.add(std::move(k));

    Node a;
    a.op = OpKind::Attention;
    a.attrs = Graph::make_attrs(OpKind::Attention);
    a.attr("scale").present = true;
    a.attr("scale").scalar = Scalar::from_float(m->scale);
    if (m->masked_zero) a.attr("masked_zero").present = true;
    ValueId q = r.map(m->q);
    if (m->q_scaled_by) {  // q * c (or q / c): of q's type, as checked
      const auto [op, c] = *m->q_scaled_by;
      Node scaled;
      scaled.op = op;
      scaled.attrs = Graph::make_attrs(op);
      scaled.operands = {q, r.map(c)};
      scaled.type = r.out().type(q);
      scaled.loc = y.loc;
      q = r.add(std::move(scaled));
    }
    a.operands = {q, kv, r.map(m->v)};
    if (m->bias) a.operands.push_back(r.map(*m->bias));
    std::vector<TensorType> types;
    for (ValueId o : a.operands) types.push_back(r.out().type(o));
    Expected<TensorType> t = infer_type(OpKind::Attention, types, a.attrs, nullptr);
    if (!t || !(*t == y.type)) {  // a shape the op does not take (bias broadcasting the batch up)
      r.copy(v);
      continue;
    }
    a.type = *t;
    a.name = y.name;
    a.loc = y.loc;
    r.set(v, r.add(std::move(a)));
    changed = true;
  }
  Graph out = r.finish();
  // The softmax and the scores are left without users.
  return changed ? dead_code_elimination(out, options) : out;
}

}  // namespace kiln
