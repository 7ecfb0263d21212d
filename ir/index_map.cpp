// ir/index_map.cpp - index expressions and the index maps of fused kernels.
#include "kiln/ir/index_map.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kiln {

// ---- IndexExpr -------------------------------------------------------------------------
//
// A Linear expression is sum(coef * atom) + constant, where an atom is a domain dim or a
// FloorDiv/Mod expression; floordiv and mod simplify when the dims' extents bound the rest.

namespace {

int64_t floor_div(int64_t a, int64_t n) { return a / n - ((a % n != 0) && ((a < 0) != (n < 0))); }
int64_t floor_mod(int64_t a, int64_t n) { return a - floor_div(a, n) * n; }

}  // namespace

bool IndexExpr::Term::same_atom(const Term& o) const {
  if (dim >= 0 || o.dim >= 0) return dim == o.dim;
  return *atom == *o.atom;
}

bool IndexExpr::operator==(const IndexExpr& o) const {
  if (this == &o) return true;
  if (op_ != o.op_ || constant_ != o.constant_ || divisor_ != o.divisor_ || terms_.size() != o.terms_.size())
    return false;
  if (op_ != Op::Linear)
    return inner_ == o.inner_ || (inner_->shared_hash_ == o.inner_->shared_hash_ && *inner_ == *o.inner_);
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term &a = terms_[i], &b = o.terms_[i];
    if (a.dim != b.dim || a.coef != b.coef) return false;
    if (a.dim < 0 && a.atom != b.atom && (a.atom->shared_hash_ != b.atom->shared_hash_ || !(*a.atom == *b.atom)))
      return false;
  }
  return true;
}

uint64_t IndexExpr::structural_hash() const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(op_);
  auto mix = [&](uint64_t x) { h = (h ^ x) * 0x100000001b3ull + (h >> 29); };
  mix(static_cast<uint64_t>(constant_));
  mix(static_cast<uint64_t>(divisor_));
  if (inner_) mix(inner_->shared_hash_);
  for (const Term& t : terms_) {
    mix(static_cast<uint64_t>(t.dim));
    mix(static_cast<uint64_t>(t.coef));
    if (t.atom) mix(t.atom->shared_hash_);
  }
  return h;
}

std::shared_ptr<const IndexExpr> IndexExpr::share(IndexExpr e) {
  e.shared_range_ = e.range();
  e.shared_hash_ = e.structural_hash();
  return std::make_shared<const IndexExpr>(std::move(e));
}

IndexExpr IndexExpr::constant(int64_t c) {
  IndexExpr e;
  e.constant_ = c;
  return e;
}

IndexExpr IndexExpr::dim(int d, int64_t extent) {
  IndexExpr e;
  e.terms_.push_back({d, 1, std::max<int64_t>(extent, 1), nullptr});
  return e;
}

// A non-linear expression entering a linear one becomes an atom term.
IndexExpr IndexExpr::as_linear() const {
  if (is_linear()) return *this;
  IndexExpr out;
  out.terms_.push_back({-1, 1, range().second + 1, share(*this)});
  return out;
}

std::pair<int64_t, int64_t> IndexExpr::range() const {
  if (op_ == Op::FloorDiv) {
    const auto [lo, hi] = inner_->shared_range_;
    return {floor_div(lo, divisor_), floor_div(hi, divisor_)};
  }
  if (op_ == Op::Mod) return {0, divisor_ - 1};
  int64_t lo = constant_, hi = constant_;
  for (const Term& t : terms_) {
    const auto [alo, ahi] = t.atom ? t.atom->shared_range_ : std::pair<int64_t, int64_t>{0, t.extent - 1};
    const int64_t a = t.coef * alo, b = t.coef * ahi;
    lo += std::min(a, b);
    hi += std::max(a, b);
  }
  return {lo, hi};
}

IndexExpr IndexExpr::operator+(const IndexExpr& o) const {
  IndexExpr out = as_linear();
  const IndexExpr b = o.as_linear();
  out.constant_ += b.constant_;
  for (const Term& t : b.terms_) {
    auto it = std::find_if(out.terms_.begin(), out.terms_.end(), [&](const Term& x) { return x.same_atom(t); });
    if (it == out.terms_.end()) out.terms_.push_back(t);
    else it->coef += t.coef;
  }
  std::erase_if(out.terms_, [](const Term& t) { return t.coef == 0; });
  return out;
}

IndexExpr IndexExpr::operator*(int64_t k) const {
  if (k == 0) return constant(0);
  IndexExpr out = as_linear();
  out.constant_ *= k;
  for (Term& t : out.terms_) t.coef *= k;
  return out;
}

// Both floordiv and mod split a linear expression into n * high + rest (terms whose
// coefficient n divides, and the constant's multiple of n) and rest: then
// (n*high + rest) floordiv n = high + rest floordiv n and (n*high + rest) mod n = rest mod n,
// and rest is often within [0, n), where its floordiv is 0 and its mod is itself.

IndexExpr IndexExpr::floordiv(int64_t n) const {
  if (n <= 0) return constant(0);  // only for zero-size shapes, which are never indexed
  if (n == 1) return *this;
  const auto [lo, hi] = range();
  if (lo >= 0 && hi < n) return constant(0);
  if (lo == hi) return constant(floor_div(lo, n));
  if (is_linear()) {
    IndexExpr high = constant(floor_div(constant_, n)), rest = constant(floor_mod(constant_, n));
    for (const Term& t : terms_) (t.coef % n == 0 ? high : rest).terms_.push_back(t);
    for (Term& t : high.terms_) t.coef /= n;
    const auto [rlo, rhi] = rest.range();
    if (rlo >= 0 && rhi < n) return high;
    // Only a rest that stays non-negative may be divided on its own (build()'s contract).
    if (rlo >= 0 && (!high.terms_.empty() || high.constant_ != 0)) return high + rest.floordiv(n);
  }
  IndexExpr out;
  out.op_ = Op::FloorDiv;
  out.inner_ = share(*this);
  out.divisor_ = n;
  return out;
}

IndexExpr IndexExpr::mod(int64_t n) const {
  if (n <= 1) return constant(0);  // n == 0 only for zero-size shapes, which are never indexed
  const auto [lo, hi] = range();
  if (lo >= 0 && hi < n) return *this;
  if (lo == hi) return constant(floor_mod(lo, n));
  if (is_linear()) {
    IndexExpr rest = constant(floor_mod(constant_, n));
    for (const Term& t : terms_)
      if (t.coef % n != 0) rest.terms_.push_back(t);
    const auto [rlo, rhi] = rest.range();
    if (rlo >= 0 && rhi < n) return rest;
    if (rlo >= 0 && (rest.terms_.size() < terms_.size() || rest.constant_ != constant_)) return rest.mod(n);
  }
  IndexExpr out;
  out.op_ = Op::Mod;
  out.inner_ = share(*this);
  out.divisor_ = n;
  return out;
}

std::string IndexExpr::str(size_t limit) const {
  std::string out;
  write(out, limit);
  return out;
}

bool IndexExpr::write(std::string& out, size_t limit) const {
  if (out.size() > limit) {
    out += "...";
    return false;
  }
  if (op_ != Op::Linear) {
    const bool simple = inner_->is_linear() && inner_->terms_.size() <= 1 && inner_->constant_ == 0;
    if (!simple) out += '(';
    if (!inner_->write(out, limit)) return false;
    if (!simple) out += ')';
    out += fmt::format(" {} {}", op_ == Op::FloorDiv ? "floordiv" : "mod", divisor_);
    return true;
  }
  bool first = true;
  for (const Term& t : terms_) {
    if (out.size() > limit) {
      out += "...";
      return false;
    }
    const int64_t mag = t.coef < 0 ? -t.coef : t.coef;
    out += first ? (t.coef < 0 ? "-" : "") : (t.coef < 0 ? " - " : " + ");
    first = false;
    if (t.dim >= 0) {
      out += fmt::format("d{}", t.dim);
    } else {
      out += '(';
      if (!t.atom->write(out, limit)) return false;
      out += ')';
    }
    if (mag != 1) out += fmt::format(" * {}", mag);
  }
  if (first) {
    out += std::to_string(constant_);
    return true;
  }
  if (constant_ > 0) out += fmt::format(" + {}", constant_);
  if (constant_ < 0) out += fmt::format(" - {}", -constant_);
  return true;
}

// ---- kernel index maps -------------------------------------------------------------------

namespace {

IndexMap identity(const Shape& s, int first_dim, const Shape& domain) {
  IndexMap m;
  for (int j = 0; j < s.rank(); ++j) m.push_back(IndexExpr::dim(first_dim + j, domain[first_dim + j]));
  return m;
}

}  // namespace

IndexMap operand_index_map(const Graph& g, const Node& c, size_t operand, const IndexMap& p, const Shape& domain) {
  const Shape& cs = c.type.shape;
  const ValueId ov = c.operands[operand];
  const Shape& os = g.type(ov).shape;
  IndexMap m;
  // Broadcasting (elementwise operands, expand): right-aligned, size-1 dims read index 0.
  if (c.info().category == OpCategory::Elementwise || c.op == OpKind::Expand) {
    const int off = cs.rank() - os.rank();
    for (int j = 0; j < os.rank(); ++j)
      m.push_back(os[j] == 1 && cs[j + off] != 1 ? IndexExpr::constant(0) : p[static_cast<size_t>(j + off)]);
    return m;
  }
  switch (c.info().category) {
    case OpCategory::Reduce: {
      // The reduction visits its whole input: reduced axes come from the domain.
      const auto& axes = c.attr("axes").ints;
      const bool keep = c.attr("keepdim").present;
      size_t k = 0;
      for (int j = 0; j < os.rank(); ++j) {
        const bool reduced = std::find(axes.begin(), axes.end(), j) != axes.end();
        if (reduced) {
          m.push_back(j < domain.rank() ? IndexExpr::dim(j, domain[j]) : IndexExpr::constant(0));
          if (keep) ++k;
        } else {
          m.push_back(k < p.size() ? p[k] : IndexExpr::constant(0));
          ++k;
        }
      }
      return m;
    }
    case OpCategory::Matmul: {
      KILN_ASSERT(c.op == OpKind::Matmul, "a conv or attention reads its operands through its step, not index maps");
      const int r = cs.rank(), ro = os.rank();
      const IndexExpr dk = IndexExpr::dim(domain.rank() - 1, domain[domain.rank() - 1]);
      for (int j = 0; j < ro - 2; ++j) {
        const int cj = j + (r - ro);
        m.push_back(os[j] == 1 && cs[cj] != 1 ? IndexExpr::constant(0) : p[static_cast<size_t>(cj)]);
      }
      if (operand == 0) {
        m.push_back(p[static_cast<size_t>(r - 2)]);
        m.push_back(dk);
      } else {
        m.push_back(dk);
        m.push_back(p[static_cast<size_t>(r - 1)]);
      }
      return m;
    }
    default: break;
  }
  switch (c.op) {
    case OpKind::Permute: {
      m.assign(static_cast<size_t>(os.rank()), IndexExpr::constant(0));
      const auto& perm = c.attr("perm").ints;
      for (size_t k = 0; k < perm.size(); ++k) m[static_cast<size_t>(perm[k])] = p[k];
      return m;
    }
    case OpKind::Slice: {
      const auto& start = c.attr("start").ints;
      const AttrValue& step = c.attr("step");
      // An axis that keeps one element reads only its start (its step may be as large as
      // INT64_MIN, which strides would overflow).
      for (size_t j = 0; j < static_cast<size_t>(os.rank()); ++j)
        m.push_back(os[static_cast<int>(j)] <= 1 ? IndexExpr::constant(start[j])
                                                 : p[j] * (step.present ? step.ints[j] : 1) + IndexExpr::constant(start[j]));
      return m;
    }
    case OpKind::Unfold: {
      // Window w, element k along the new last axis: w * step + k * dilation.
      const auto axis = static_cast<size_t>(c.attr("axis").i);
      const AttrValue& dil = c.attr("dilation");
      m.assign(p.begin(), p.begin() + os.rank());
      m[axis] = p[axis] * c.attr("step").i + p.back() * (dil.present ? dil.i : 1);
      return m;
    }
    case OpKind::Pad: {
      const auto& low = c.attr("low").ints;
      for (size_t j = 0; j < static_cast<size_t>(os.rank()); ++j) m.push_back(p[j] + IndexExpr::constant(-low[j]));
      return m;
    }
    case OpKind::Gather: {
      // The indices are read where the result is; the data along the other axes too, and
      // along the gathered axis at the index read (a value: the map holds 0 there, and
      // kernel_index_maps leaves the data out).
      m = p;
      if (operand == 0) m[static_cast<size_t>(c.attr("axis").i)] = IndexExpr::constant(0);
      return m;
    }
    case OpKind::Scatter:
      // Computed over the updates' positions (the kernel's domain): the indices and updates
      // are read there; the data is copied into the result before the kernel runs.
      return identity(os, 0, domain);
    case OpKind::Concat: {
      const auto axis = static_cast<size_t>(c.attr("axis").i);
      int64_t offset = 0;
      for (size_t i = 0; i < operand; ++i) offset += g.type(c.operands[i]).shape[static_cast<int>(axis)];
      m = p;
      m[axis] = m[axis] + IndexExpr::constant(-offset);
      return m;
    }
    case OpKind::Reshape: {
      // Through the row-major linear index.
      const auto cst = cs.strides(), ost = os.strides();
      IndexExpr linear = IndexExpr::constant(0);
      for (size_t k = 0; k < static_cast<size_t>(cs.rank()); ++k) linear = linear + p[k] * cst[k];
      for (int j = 0; j < os.rank(); ++j)
        m.push_back(linear.floordiv(ost[static_cast<size_t>(j)]).mod(os[j]));
      return m;
    }
    default: break;
  }
  return identity(os, 0, domain);
}

std::string index_map_str(const IndexMap& m) {
  std::vector<std::string> parts;
  for (const IndexExpr& e : m) parts.push_back(e.str());
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

KernelIndexMaps kernel_index_maps(const Graph& g, int32_t k) { return kernel_index_maps(g, g.kernel_index(), k); }

KernelIndexMaps kernel_index_maps(const Graph& g, const KernelIndex& index, int32_t k) {
  KernelIndexMaps out;
  const std::vector<ValueId>& members = index.members[static_cast<size_t>(k)];
  const std::vector<ValueId>& outputs = index.outputs[static_cast<size_t>(k)];
  // The domain.
  bool found = false;
  for (ValueId v : members) {
    const Node& n = g.node(v);
    if (n.info().category == OpCategory::Reduce) {
      out.domain = g.type(n.operands[0]).shape;
      found = true;
      break;
    }
  }
  for (ValueId v : members) {
    const Node& n = g.node(v);
    if (n.op == OpKind::Gather) out.at_run_time.push_back(n.operands[0]);
    if (n.op != OpKind::Scatter) continue;
    out.at_run_time.push_back(v);
    if (!found) out.domain = g.type(n.operands[2]).shape;  // the updates' positions
    found = true;
  }
  int contracted = 0;  // trailing domain dims that no value is written over (matmul's k)
  for (ValueId v : members) {
    if (found) break;
    const Node& n = g.node(v);
    if (n.op == OpKind::Matmul) {
      contracted = 1;
      out.domain = n.type.shape;
      const Shape& a = g.type(n.operands[0]).shape;
      out.domain.push_back(a[a.rank() - 1]);
      found = true;
    }
  }
  if (!found) {
    int64_t best = -1;
    for (ValueId v : outputs.empty() ? members : outputs)
      if (g.type(v).shape.numel() > best) {
        best = g.type(v).shape.numel();
        out.domain = g.type(v).shape;
      }
  }
  // Positions, from the kernel's outputs back to its inputs (members are in order).
  std::map<ValueId, std::vector<IndexMap>> pos;
  auto add_pos = [&](ValueId v, IndexMap m) {
    auto& list = pos[v];
    if (list.size() < 4 && std::none_of(list.begin(), list.end(), [&](const IndexMap& x) { return x == m; }))
      list.push_back(std::move(m));
  };
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    const ValueId v = *it;
    const Node& n = g.node(v);
    if (n.op == OpKind::Scatter) {
      pos[v] = {identity(g.type(n.operands[2]).shape, 0, out.domain)};  // computed at each update
    } else if (pos[v].empty()) {
      // Written where its dims line up with the domain's trailing dims (reduced axes kept as 0).
      const Shape& s = n.type.shape;
      IndexMap m;
      const int off = out.domain.rank() - contracted - s.rank();
      for (int j = 0; j < s.rank(); ++j)
        m.push_back(off + j >= 0 && s[j] == out.domain[off + j] ? IndexExpr::dim(off + j, out.domain[off + j])
                                                                 : IndexExpr::constant(0));
      if (n.info().category == OpCategory::Reduce && s.rank() < out.domain.rank() && !n.attr("keepdim").present) {
        // A reduction without keepdim: its dims are the domain's unreduced axes.
        m.clear();
        const auto& axes = n.attr("axes").ints;
        for (int j = 0; j < out.domain.rank(); ++j)
          if (std::find(axes.begin(), axes.end(), j) == axes.end()) m.push_back(IndexExpr::dim(j, out.domain[j]));
      }
      add_pos(v, std::move(m));
    }
    for (const IndexMap& p : std::vector<IndexMap>(pos[v]))
      for (size_t i = 0; i < n.operands.size(); ++i)
        // Not read at these positions: gather's and scatter's data, a conv's operands (its GEMM
        // gathers their windows), attention's (its step reads them through their strides).
        if (!((n.op == OpKind::Gather || n.op == OpKind::Scatter) && i == 0) && n.op != OpKind::Conv &&
            n.op != OpKind::Attention)
          add_pos(n.operands[i], operand_index_map(g, n, i, p, out.domain));
  }
  for (ValueId v : index.inputs[static_cast<size_t>(k)]) out.inputs.push_back({v, pos[v]});
  for (ValueId v : outputs) out.outputs.push_back({v, pos[v].empty() ? IndexMap{} : pos[v][0]});
  return out;
}

std::string format_index_maps(const KernelIndexMaps& maps, const std::vector<std::string>& names) {
  std::vector<std::string> ins, outs;
  for (const auto& [v, list] : maps.inputs) {
    const bool run_time = std::find(maps.at_run_time.begin(), maps.at_run_time.end(), v) != maps.at_run_time.end();
    std::string s = "%" + names[v];
    for (const IndexMap& m : list) s += index_map_str(m);
    if (run_time) s += "[at run time]";
    ins.push_back(s);
  }
  for (const auto& [v, m] : maps.outputs) {
    const bool run_time = std::find(maps.at_run_time.begin(), maps.at_run_time.end(), v) != maps.at_run_time.end();
    outs.push_back("%" + names[v] + (run_time ? "[at run time]" : index_map_str(m)));
  }
  return fmt::format("over {}: {} -> {}", maps.domain.str(), fmt::join(ins, ", "), fmt::join(outs, ", "));
}

}  // namespace kiln
