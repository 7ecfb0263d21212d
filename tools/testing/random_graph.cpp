// tools/testing/random_graph.cpp - the random graph generator.
//
// Nodes are proposed at random and added through Graph::add, whose type rules reject the
// ill-typed ones; a rejected proposal is simply dropped. Operands are drawn mostly from
// recent values so that graphs grow deep, not just wide.
#include <cstdlib>
#include "random_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace kiln::test {
namespace {

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& options) : rng_(seed), opt_(options), g_(fmt::format("random{}", seed)) {}

  Graph run() {
    const int inputs = pick(1, 3);
    for (int i = 0; i < inputs; ++i) {
      const DType dtypes[] = {DType::F32, DType::F32, DType::F32, DType::F64, DType::I32, DType::Bool};
      pool_.push_back(g_.add_input(fmt::format("x{}", i), TensorType{dtypes[pick(0, 5)], random_shape()}));
    }
    for (int i = 0; i < opt_.nodes; ++i) step();
    // Outputs: most values nobody uses, so that a wrong rewrite anywhere shows; a few are
    // left dead on purpose for DCE.
    std::vector<bool> used(g_.size(), false);
    for (const Node& n : g_.nodes())
      for (ValueId o : n.operands) used[o] = true;
    std::vector<ValueId> outs{pool_.back()};
    for (ValueId v : pool_)
      if (!used[v] && v != pool_.back() && g_.node(v).op != OpKind::Input && chance(0.85)) outs.push_back(v);
    g_.set_outputs(outs);
    return std::move(g_);
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  Shape random_shape() {
    Shape s;
    const int rank = pick(0, opt_.max_rank);
    for (int d = 0; d < rank; ++d) s.push_back(opt_.zero_size && chance(0.04) ? 0 : pick(1, static_cast<int>(opt_.max_dim)));
    return s;
  }
  // Mostly recent values: graphs grow deep.
  ValueId operand() {
    const int n = static_cast<int>(pool_.size());
    return pool_[static_cast<size_t>(chance(0.7) ? std::max(0, n - 1 - pick(0, 3)) : pick(0, n - 1))];
  }
  const TensorType& type(ValueId v) const { return g_.type(v); }
  int64_t next_slot_ = 0;

  void add(OpKind op, std::vector<ValueId> operands, Attrs attrs = {}, const TensorType* declared = nullptr) {
    if (auto v = g_.add(op, operands, std::move(attrs), declared)) pool_.push_back(*v);
  }
  static AttrValue& set(Attrs& a, OpKind op, std::string_view name) {
    AttrValue& v = a[static_cast<size_t>(attr_index(op, name))];
    v.present = true;
    return v;
  }

  // A splat constant of a shape that broadcasts against `like`, holding a value the
  // simplifier cares about.
  ValueId splat_for(const TensorType& like) {
    Shape s;
    if (chance(0.5)) {  // a suffix of like's shape
      const int keep = pick(0, like.shape.rank());
      for (int d = like.shape.rank() - keep; d < like.shape.rank(); ++d) s.push_back(like.shape[d]);
    }
    DType dt = chance(0.8) ? like.dtype : (chance(0.5) ? DType::F32 : DType::I32);
    if (is_bool(dt)) dt = DType::F32;
    const double specials[] = {0.0, -0.0, 1.0, 2.0, 0.5, -1.0, 3.0};
    const double v = is_unsigned(dt) ? std::fabs(specials[pick(0, 6)]) : specials[pick(0, 6)];
    // Sometimes a launch-bound scalar instead: the optimizer must treat it as unknown.
    const OpKind op = chance(0.3) ? OpKind::ScalarParam : OpKind::Constant;
    Attrs a = Graph::make_attrs(op);
    set(a, op, "value").scalar = is_float(dt) ? Scalar::from_float(v) : Scalar::from_int(static_cast<int64_t>(v));
    if (op == OpKind::ScalarParam) set(a, op, "slot").i = next_slot_++;
    const TensorType t{dt, s};
    auto c = g_.add(op, {}, std::move(a), &t);
    return *c;
  }

  // The operand of a math op that would compute in f64 (on f64, and on integers and bools,
  // which promote to f64): `v`, or `v` cast to f32 when the options exclude f64 math.
  ValueId f32_unless_f64_math(ValueId v) {
    const TensorType t = type(v);
    if (opt_.f64_math || t.dtype == DType::F32) return v;
    const TensorType to{DType::F32, t.shape};
    add(OpKind::Cast, {v}, Graph::make_attrs(OpKind::Cast), &to);
    return pool_.back();
  }

  // Fresh weights of type `t`: rand for floats, a ramp for integers.
  ValueId weights(const TensorType& t) {
    if (is_float(t.dtype)) {
      Attrs a = Graph::make_attrs(OpKind::Rand);
      set(a, OpKind::Rand, "seed").i = pick(0, 3);
      return *g_.add(OpKind::Rand, {}, std::move(a), &t);
    }
    Attrs a = Graph::make_attrs(OpKind::Arange);
    set(a, OpKind::Arange, "start").scalar = Scalar::from_int(-2);
    set(a, OpKind::Arange, "step").scalar = Scalar::from_int(1);
    const TensorType flat{t.dtype, {t.shape.numel()}};
    const ValueId r = *g_.add(OpKind::Arange, {}, std::move(a), &flat);
    return *g_.add(OpKind::Reshape, std::array{r}, Graph::make_attrs(OpKind::Reshape), &t);
  }

  // A convolution of x, when it is [N, C, L] or [N, C, H, W] of a GEMM type, or else of a
  // fresh input of 1 or 2 spatial dims, by fresh weights.
  void conv(ValueId x, const TensorType& tx) {
    const bool gemm_type = tx.dtype == DType::F32 || tx.dtype == DType::F64 || tx.dtype == DType::I32;
    const bool own = (tx.shape.rank() == 3 || tx.shape.rank() == 4) && gemm_type && tx.shape.numel() > 0 && chance(0.5);
    TensorType ti = tx;
    if (!own) {
      ti.dtype = chance(0.7) ? DType::F32 : chance(0.5) ? DType::F64 : DType::I32;
      const int dims = pick(1, 2);
      ti.shape = Shape{pick(1, 2), pick(1, 3) * (chance(0.5) ? 1 : 2)};
      for (int d = 0; d < dims; ++d) ti.shape.push_back(pick(1, static_cast<int>(std::max<int64_t>(6, opt_.max_dim))));
      x = g_.add_input(fmt::format("x{}", g_.size()), ti);
    }
    const int64_t channels = ti.shape[1];
    const int64_t groups = chance(0.5) ? 1 : chance(0.5) ? channels : (channels % 2 == 0 ? 2 : 1);
    const int64_t filters = groups * (chance(0.5) ? pick(8, 10) : pick(1, 3));
    Attrs a = Graph::make_attrs(OpKind::Conv);
    std::vector<int64_t> strides, dilations, low, high;
    Shape ws{filters, channels / groups};
    for (int d = 2; d < ti.shape.rank(); ++d) {
      int64_t k = pick(1, 3), dil = pick(1, 2);
      const int64_t lo = pick(0, 2), hi = pick(0, 2);
      if ((k - 1) * dil + 1 > ti.shape[d] + lo + hi) k = 1;
      strides.push_back(pick(1, 2));
      dilations.push_back(dil);
      low.push_back(lo);
      high.push_back(hi);
      ws.push_back(k);
    }
    set(a, OpKind::Conv, "strides").ints = strides;
    if (chance(0.5)) set(a, OpKind::Conv, "dilations").ints = dilations;
    set(a, OpKind::Conv, "low").ints = low;
    set(a, OpKind::Conv, "high").ints = high;
    if (groups > 1) set(a, OpKind::Conv, "groups").i = groups;
    add(OpKind::Conv, {x, weights(TensorType{ti.dtype, ws})}, std::move(a));
  }

  // Attention as the frontend and the exporters write it, on fresh f32 inputs: q [.., T, D]
  // times k^T [.., D, S] (its batch dim sometimes broadcast over q's), scaled (mul or div by
  // a splat, or not), a bias added or not, softmax over the keys, NaN rows zeroed or not, times
  // v [.., S, E]. fuse-attention makes it one attention step.
  void attention() {
    const auto dim = [&] { return static_cast<int64_t>(pick(1, static_cast<int>(std::max<int64_t>(6, opt_.max_dim)))); };
    const int64_t t = dim(), d = dim(), s = dim(), e = dim(), heads = pick(1, 3);
    const bool shared = chance(0.3);
    const auto input = [&](Shape shape) { return g_.add_input(fmt::format("a{}", g_.size()), TensorType{DType::F32, shape}); };
    const ValueId q = input({heads, t, d}), kt = input({shared ? 1 : heads, d, s}), v = input({shared ? 1 : heads, s, e});
    ValueId x = *g_.add(OpKind::Matmul, std::array{q, kt});
    if (chance(0.7)) {
      Attrs a = Graph::make_attrs(OpKind::Constant);
      set(a, OpKind::Constant, "value").scalar = Scalar::from_float(chance(0.5) ? 0.25 : 3.0);
      const TensorType ct{DType::F32, {}};
      const ValueId c = *g_.add(OpKind::Constant, {}, std::move(a), &ct);
      x = *g_.add(chance(0.5) ? OpKind::Mul : OpKind::Div, std::array{x, c});
    }
    if (chance(0.5)) x = *g_.add(OpKind::Add, std::array{x, input(chance(0.5) ? Shape{s} : Shape{1, t, s})});
    Attrs axes = Graph::make_attrs(OpKind::ReduceMax);
    set(axes, OpKind::ReduceMax, "axes").ints = {2};
    set(axes, OpKind::ReduceMax, "keepdim");
    const ValueId m = *g_.add(OpKind::ReduceMax, std::array{x}, axes);
    const ValueId ex = *g_.add(OpKind::Exp, std::array{*g_.add(OpKind::Sub, std::array{x, m})});
    const ValueId sum = *g_.add(OpKind::ReduceSum, std::array{ex}, axes);
    ValueId p = *g_.add(OpKind::Div, std::array{ex, sum});
    if (chance(0.5)) {
      Attrs a = Graph::make_attrs(OpKind::Constant);
      set(a, OpKind::Constant, "value").scalar = Scalar::from_float(0.0);
      const TensorType zt{DType::F32, {1}};
      const ValueId zero = *g_.add(OpKind::Constant, {}, std::move(a), &zt);
      p = *g_.add(OpKind::Where, std::array{*g_.add(OpKind::IsNan, std::array{p}), zero, p});
    }
    add(OpKind::Matmul, {p, v});
  }

  void step() {
    const ValueId x = operand();
    const TensorType tx = type(x);  // a copy: adding nodes moves the node array
    switch (pick(0, 11)) {
      case 0:
      case 1: {  // unary, sometimes twice in a row
        const OpKind unary[] = {OpKind::Neg, OpKind::Abs, OpKind::Exp, OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt,
                                OpKind::Sin, OpKind::Cos, OpKind::Tanh, OpKind::Sigmoid, OpKind::Relu, OpKind::Erf,
                                OpKind::Floor, OpKind::Ceil, OpKind::Not};
        const OpKind op = unary[pick(0, 14)];
        const bool math = op != OpKind::Neg && op != OpKind::Abs && op != OpKind::Sqrt && op != OpKind::Rsqrt &&
                          op != OpKind::Relu && op != OpKind::Floor && op != OpKind::Ceil && op != OpKind::Not;
        add(op, {math ? f32_unless_f64_math(x) : x});
        if (chance(0.3)) add(op, {pool_.back()});
        break;
      }
      case 2:
      case 3: {  // binary arithmetic against a value or a planted splat
        const OpKind arith[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Max, OpKind::Min};
        const OpKind op = arith[pick(0, 6)];
        ValueId y = chance(0.5) ? splat_for(tx) : operand();
        ValueId xx = x;
        if (op == OpKind::Pow && promote(tx.dtype, type(y).dtype) == DType::F64) {  // not integer pow
          xx = f32_unless_f64_math(xx);
          y = f32_unless_f64_math(y);
        }
        if (chance(0.5)) add(op, {xx, y});
        else add(op, {y, xx});
        break;
      }
      case 4: {  // comparisons, logic, where
        const OpKind cmp[] = {OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge};
        const ValueId y = chance(0.5) ? splat_for(tx) : operand();
        add(cmp[pick(0, 5)], {x, y});
        const ValueId c = pool_.back();
        if (is_bool(type(c).dtype)) {
          if (chance(0.5)) add(chance(0.5) ? OpKind::And : OpKind::Or, {c, operand()});
          add(OpKind::Where, {c, x, chance(0.5) ? splat_for(tx) : operand()});
        }
        break;
      }
      case 5: {  // cast, sometimes a chain; to every type but u64, whose refusals (docs/ir.md)
                 // would leave most ops after it undrawn
        constexpr DType kTargets[] = {DType::Bool, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                                      DType::U16,  DType::U32, DType::F16, DType::BF16, DType::F32, DType::F64};
        const DType to = kTargets[pick(0, 11)];
        const TensorType t{to, tx.shape};
        add(OpKind::Cast, {x}, Graph::make_attrs(OpKind::Cast), &t);
        if (chance(0.4)) {
          const TensorType back{kTargets[pick(0, 11)], tx.shape};
          add(OpKind::Cast, {pool_.back()}, Graph::make_attrs(OpKind::Cast), &back);
        }
        break;
      }
      case 6: {  // reductions, and now and then a running sum or a sort
        if (tx.shape.rank() == 0) break;
        if (opt_.scans && chance(0.15)) {
          // The graphs that drew a cumsum here draw an argsort half the time; the rest are
          // as they were.
          const OpKind op = chance(0.5) ? OpKind::Argsort : OpKind::Cumsum;
          Attrs a = Graph::make_attrs(op);
          set(a, op, "axis").i = pick(0, tx.shape.rank() - 1);
          if (op == OpKind::Argsort && chance(0.5)) set(a, op, "descending");
          add(op, {x}, std::move(a));
          break;
        }
        const OpKind reduce[] = {OpKind::ReduceSum, OpKind::ReduceProd, OpKind::ReduceMax, OpKind::ReduceMin,
                                 OpKind::ArgMax, OpKind::ArgMin};
        const OpKind op = reduce[pick(0, 5)];
        Attrs a = Graph::make_attrs(op);
        auto& axes = set(a, op, "axes").ints;
        for (int d = 0; d < tx.shape.rank(); ++d)
          if (chance(0.5)) axes.push_back(d);
        if (axes.empty() || ((op == OpKind::ArgMax || op == OpKind::ArgMin) && axes.size() > 1)) axes = {pick(0, tx.shape.rank() - 1)};
        if (chance(0.5)) set(a, op, "keepdim");
        add(op, {x}, std::move(a));
        break;
      }
      case 7: {  // reshape (flatten, or split the first dim) and reshape chains
        Shape to;
        if (chance(0.5) || tx.shape.rank() == 0) to = Shape{tx.shape.numel()};
        else {
          to.push_back(1);
          for (int64_t d : tx.shape.dims()) to.push_back(d);
        }
        const TensorType t{tx.dtype, to};
        add(OpKind::Reshape, {x}, Graph::make_attrs(OpKind::Reshape), &t);
        if (chance(0.3)) {
          const TensorType back = tx;
          add(OpKind::Reshape, {pool_.back()}, Graph::make_attrs(OpKind::Reshape), &back);
        }
        break;
      }
      case 8: {  // permute (sometimes twice), expand
        if (tx.shape.rank() >= 2 && chance(0.6)) {
          std::vector<int64_t> perm(static_cast<size_t>(tx.shape.rank()));
          for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
          std::shuffle(perm.begin(), perm.end(), rng_);
          Attrs a = Graph::make_attrs(OpKind::Permute);
          set(a, OpKind::Permute, "perm").ints = perm;
          add(OpKind::Permute, {x}, a);
          if (chance(0.4)) add(OpKind::Permute, {pool_.back()}, a);
        } else if (tx.shape.rank() < opt_.max_rank) {
          Shape to{static_cast<int64_t>(pick(1, 3))};
          for (int64_t d : tx.shape.dims()) to.push_back(d == 1 && chance(0.5) ? pick(2, 3) : d);
          const TensorType t{tx.dtype, to};
          add(OpKind::Expand, {x}, Graph::make_attrs(OpKind::Expand), &t);
        }
        break;
      }
      case 9: {  // slice and pad
        if (tx.shape.rank() == 0) break;
        if (chance(0.5)) {
          Attrs a = Graph::make_attrs(OpKind::Slice);
          auto& start = set(a, OpKind::Slice, "start").ints;
          auto& stop = set(a, OpKind::Slice, "stop").ints;
          std::vector<int64_t> step;
          for (int64_t d : tx.shape.dims()) {
            const int64_t s0 = d > 0 ? pick(0, static_cast<int>(d) - 1) * (chance(0.5) ? 1 : 0) : 0;
            start.push_back(s0);
            stop.push_back(chance(0.5) ? d : pick(static_cast<int>(s0), static_cast<int>(d)));
            step.push_back(pick(1, 2));
          }
          if (chance(0.5)) set(a, OpKind::Slice, "step").ints = step;
          add(OpKind::Slice, {x}, std::move(a));
        } else {
          Attrs a = Graph::make_attrs(OpKind::Pad);
          auto& low = set(a, OpKind::Pad, "low").ints;
          auto& high = set(a, OpKind::Pad, "high").ints;
          for (int d = 0; d < tx.shape.rank(); ++d) {
            low.push_back(pick(0, 1));
            high.push_back(pick(0, 2));
          }
          if (chance(0.5)) {
            set(a, OpKind::Pad, "value").scalar = is_float(tx.dtype) ? Scalar::from_float(-1.5) : Scalar::from_int(1);
          }
          add(OpKind::Pad, {x}, std::move(a));
        }
        break;
      }
      case 10: {  // concat with itself or a value of the same shape
        if (tx.shape.rank() == 0) break;
        Attrs a = Graph::make_attrs(OpKind::Concat);
        set(a, OpKind::Concat, "axis").i = pick(0, tx.shape.rank() - 1);
        add(OpKind::Concat, {x, chance(0.5) ? x : operand()}, std::move(a));
        break;
      }
      case 11: {  // matmul against a fresh rand or arange operand
        if (opt_.attention && chance(0.5)) {
          attention();
          break;
        }
        if (opt_.convs && chance(0.4)) {
          conv(x, tx);
          break;
        }
        if (tx.shape.rank() < 2 || is_bool(tx.dtype)) break;
        const int64_t k = tx.shape[tx.shape.rank() - 1];
        const TensorType tb{is_float(tx.dtype) ? tx.dtype : DType::I32, {k, static_cast<int64_t>(pick(1, 3))}};
        ValueId b;
        if (is_float(tb.dtype) && chance(0.7)) {
          Attrs a = Graph::make_attrs(OpKind::Rand);
          set(a, OpKind::Rand, "seed").i = pick(0, 3);
          b = *g_.add(OpKind::Rand, {}, std::move(a), &tb);
        } else {
          Attrs a = Graph::make_attrs(OpKind::Arange);
          set(a, OpKind::Arange, "start").scalar = is_float(tb.dtype) ? Scalar::from_float(-1) : Scalar::from_int(-1);
          set(a, OpKind::Arange, "step").scalar = is_float(tb.dtype) ? Scalar::from_float(0.5) : Scalar::from_int(1);
          const TensorType flat{tb.dtype, {tb.shape.numel()}};
          const ValueId r = *g_.add(OpKind::Arange, {}, std::move(a), &flat);
          b = *g_.add(OpKind::Reshape, std::array{r}, Graph::make_attrs(OpKind::Reshape), &tb);
        }
        add(OpKind::Matmul, {x, b});
        // A repeated subexpression for CSE.
        if (chance(0.3)) add(OpKind::Matmul, {x, b});
        // A product of x's shape as ONNX Einsum writes it, a[..., M, 1, K] * c[N, K] summed
        // over K: a reduction kernel that lowering runs as a GEMM step when its operands are
        // in memory (kir::gemm_of_contraction), so they are fresh inputs, and when it is at
        // least 8 x 8, so only large graphs draw it (small ones keep their draws, and the
        // test time a driver's compiles of their kernels cost).
        if (opt_.max_dim >= 8 && is_float(tx.dtype) && chance(0.5)) {
          const int r = tx.shape.rank();
          const int64_t n = pick(1, static_cast<int>(opt_.max_dim));  // wide enough for a GEMM in large graphs
          Shape lifted(tx.shape.dims().first(static_cast<size_t>(r - 1)));
          Shape full = lifted;
          lifted.push_back(1);
          lifted.push_back(k);
          full.push_back(n);
          full.push_back(k);
          const TensorType xl{tx.dtype, lifted}, product{tx.dtype, full};
          Attrs sum = Graph::make_attrs(OpKind::ReduceSum);
          set(sum, OpKind::ReduceSum, "axes").ints = {r};
          const ValueId a = g_.add_input(fmt::format("a{}", g_.size()), tx);
          const ValueId bt = g_.add_input(fmt::format("c{}", g_.size()), TensorType{tx.dtype, {n, k}});
          const auto xr = g_.add(OpKind::Reshape, std::array{a}, Graph::make_attrs(OpKind::Reshape), &xl);
          if (!xr) break;
          const auto xe = g_.add(OpKind::Expand, std::array{*xr}, Graph::make_attrs(OpKind::Expand), &product);
          const auto be = g_.add(OpKind::Expand, std::array{bt}, Graph::make_attrs(OpKind::Expand), &product);
          if (!xe || !be) break;
          if (const auto p = g_.add(OpKind::Mul, std::array{*xe, *be})) add(OpKind::ReduceSum, {*p}, std::move(sum));
        }
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  RandomGraphOptions opt_;
  Graph g_;
  std::vector<ValueId> pool_;
};

}  // namespace

Graph random_graph(uint64_t seed, const RandomGraphOptions& options) { return Generator(seed, options).run(); }

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0xabcdef12345ULL);
  std::uniform_real_distribution<double> u(-3, 3);
  std::uniform_int_distribution<int> i5(-5, 5), pct(0, 99);
  std::vector<HostTensor> out;
  for (ValueId v : g.inputs()) {
    HostTensor t(g.type(v));
    for (int64_t k = 0; k < t.numel(); ++k) {
      if (is_float(t.dtype())) {
        const int p = pct(rng);
        const double x = p < 4 ? 0.0 : p < 8 ? -0.0 : p < 9 ? HUGE_VAL : p < 10 ? NAN : u(rng);
        t.set_double(k, x);
      } else if (is_bool(t.dtype())) {
        t.set_int(k, pct(rng) < 50);
      } else {
        t.set_int(k, i5(rng));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string compare_exact(const std::vector<HostTensor>& want, const std::vector<HostTensor>& got) {
  if (want.size() != got.size()) return fmt::format("{} outputs, expected {}", got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(want[i].type() == got[i].type()))
      return fmt::format("output {} has type {}, expected {}", i, got[i].type().str(), want[i].type().str());
    const size_t size = dtype_size(want[i].dtype());
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      const bool both_nan = is_float(want[i].dtype()) && std::isnan(want[i].get_double(k)) && std::isnan(got[i].get_double(k));
      if (both_nan) continue;
      if (std::memcmp(want[i].data() + static_cast<size_t>(k) * size, got[i].data() + static_cast<size_t>(k) * size, size) != 0)
        return fmt::format("output {} element {}: got {}, expected {}", i, k, got[i].get_double(k), want[i].get_double(k));
    }
  }
  return "";
}

std::vector<uint64_t> diff_seeds(uint64_t count) {
  if (const char* one = std::getenv("KILN_DIFF_SEED")) return {std::strtoull(one, nullptr, 10)};
#ifdef KILN_TESTING_SANITIZED
  // A graph costs 4 to 10 times as much under the sanitizers, which look at kiln's host code:
  // a quarter of the graphs reaches it; the main build's suites run them all.
  count = std::max<uint64_t>(1, count / 4);
#endif
  std::vector<uint64_t> s;
  for (uint64_t i = 0; i < count; ++i) s.push_back(i);
  return s;
}

}  // namespace kiln::test
