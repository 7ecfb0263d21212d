// codegen/affine_analysis.cpp - which positions are affine in the domain indices
// (affine_analysis in kernel_ir.h).
//
// Lowering writes a view's position as divisions and remainders of a flat position: x of
// f32[4,128,3072] viewed as [512,3072] is read at x[(3072*d1 + d0) floordiv 393216,
// d1 mod 128, d0]. Its offset is 3072*d1 + d0, but only because d0 < 3072, so the analysis
// keeps floordiv and mod terms of affine arguments, simplified with the dims' ranges, until
// they cancel (m * (a floordiv m) + (a mod m) == a). Without that a GEMM copies such an
// operand before packing it, and a vector loop gathers what is contiguous.
#include <algorithm>
#include <numeric>

#include "int_division.h"
#include "kiln/codegen/kernel_ir.h"
#include "kiln/support/error.h"

namespace kiln::kir {
namespace {

// `coeff * (arg floordiv m)`, with arg >= 0 at every point. A remainder is written
// `a - m * (a floordiv m)`, and a quotient of a quotient as one quotient, so that terms
// which cancel are equal terms.
struct Term {
  Affine arg;
  int64_t m = 1;
  int64_t coeff = 0;
};

struct QuasiAffine {
  Affine lin;
  std::vector<Term> terms;
};

bool same(const Affine& a, const Affine& b) { return a.base == b.base && a.stride == b.stride; }

bool divisible(const Affine& a, int64_t m) {
  return a.base % m == 0 && std::all_of(a.stride.begin(), a.stride.end(), [&](int64_t s) { return s % m == 0; });
}

void add_to(Affine& a, const Affine& b, int64_t c) {
  a.base += c * b.base;
  for (size_t d = 0; d < a.stride.size(); ++d) a.stride[d] += c * b.stride[d];
}

// The least and greatest value over the domain; nullopt where that overflows.
std::optional<std::pair<int64_t, int64_t>> range_of(const Affine& a, const Shape& domain) {
  int64_t lo = a.base, hi = a.base;
  for (size_t d = 0; d < a.stride.size(); ++d) {
    const int64_t extent = domain[static_cast<int>(d)];
    if (extent <= 1 || a.stride[d] == 0) continue;
    int64_t span = 0;
    if (__builtin_mul_overflow(a.stride[d], extent - 1, &span)) return std::nullopt;
    if (__builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi)) return std::nullopt;
  }
  return std::pair{lo, hi};
}

bool within(const Affine& a, int64_t lo, int64_t hi, const Shape& domain) {
  const auto r = range_of(a, domain);
  return r && r->first >= lo && r->second <= hi;
}

QuasiAffine plain(Affine a) { return QuasiAffine{std::move(a), {}}; }

// a floordiv m for a >= 0. Written as a == g*b + r with 0 <= r < g over the domain and g
// dividing m, a floordiv m == b floordiv (m/g); the largest such g leaves the least in the
// term (g = 1 always holds), and b's range may settle the rest.
QuasiAffine quotient(const Affine& a, int64_t m, const Shape& domain) {
  std::vector<int64_t> gs{m, 1};
  for (int64_t s : a.stride)
    if (s != 0) gs.push_back(std::gcd(s < 0 ? -s : s, m));
  std::sort(gs.begin(), gs.end(), std::greater<>());
  for (int64_t g : gs) {
    Affine b{floor_div(a.base, g), std::vector<int64_t>(a.stride.size(), 0)};
    Affine r{a.base - b.base * g, std::vector<int64_t>(a.stride.size(), 0)};
    for (size_t d = 0; d < a.stride.size(); ++d) {
      if (a.stride[d] % g == 0)
        b.stride[d] = a.stride[d] / g;
      else
        r.stride[d] = a.stride[d];
    }
    if (!within(r, 0, g - 1, domain)) continue;
    const int64_t n = m / g;
    if (within(b, 0, n - 1, domain)) return plain(Affine{0, std::vector<int64_t>(a.stride.size(), 0)});
    if (divisible(b, n)) {
      b.base /= n;
      for (int64_t& s : b.stride) s /= n;
      return plain(std::move(b));
    }
    QuasiAffine q = plain(Affine{0, std::vector<int64_t>(a.stride.size(), 0)});
    q.terms.push_back({std::move(b), n, 1});
    return q;
  }
  KILN_ASSERT(false, "g = 1 splits every position");
  return {};
}

QuasiAffine combined(const QuasiAffine& x, const QuasiAffine& y, int64_t scale) {
  QuasiAffine out = x;
  add_to(out.lin, y.lin, scale);
  for (Term t : y.terms) {
    t.coeff *= scale;
    auto same_term = [&](const Term& u) { return u.m == t.m && same(u.arg, t.arg); };
    if (auto it = std::find_if(out.terms.begin(), out.terms.end(), same_term); it != out.terms.end())
      it->coeff += t.coeff;
    else
      out.terms.push_back(std::move(t));
  }
  std::erase_if(out.terms, [](const Term& t) { return t.coeff == 0; });
  return out;
}

// x floordiv m, where x is affine or one quotient ((a floordiv k) floordiv m == a floordiv
// k*m); nullopt otherwise.
std::optional<QuasiAffine> quotient(const QuasiAffine& x, int64_t m, const Shape& domain) {
  if (x.terms.empty()) return quotient(x.lin, m, domain);
  const bool one_quotient = x.terms.size() == 1 && x.terms[0].coeff == 1 &&
                            std::all_of(x.lin.stride.begin(), x.lin.stride.end(), [](int64_t s) { return s == 0; }) &&
                            x.lin.base == 0;
  int64_t km = 0;
  if (!one_quotient || __builtin_mul_overflow(x.terms[0].m, m, &km)) return std::nullopt;
  return quotient(x.terms[0].arg, km, domain);
}

}  // namespace

std::vector<std::optional<Affine>> affine_analysis(const Kernel& k) {
  const auto rank = static_cast<size_t>(k.domain.rank());
  std::vector<std::optional<QuasiAffine>> value(k.insts.size());
  auto at = [&](Ref r) -> const std::optional<QuasiAffine>& { return value[static_cast<size_t>(r)]; };
  auto constant = [](const QuasiAffine& v) {
    return v.terms.empty() && std::all_of(v.lin.stride.begin(), v.lin.stride.end(), [](int64_t s) { return s == 0; });
  };
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const Inst& in = k.insts[i];
    if (in.type != DType::I64 && in.type != DType::I32) continue;
    const QuasiAffine zero = plain(Affine{0, std::vector<int64_t>(rank, 0)});
    std::optional<QuasiAffine> q = zero;
    switch (in.code) {
      case Code::Dim: q->lin.stride[static_cast<size_t>(in.imm)] = 1; break;
      case Code::Const: q->lin.base = in.literal.as_int(); break;
      case Code::Op: {
        if (in.args.size() != 2 || !at(in.args[0]) || !at(in.args[1])) continue;
        const QuasiAffine &x = *at(in.args[0]), &y = *at(in.args[1]);
        if (in.op == OpKind::Add || in.op == OpKind::Sub)
          q = combined(x, y, in.op == OpKind::Add ? 1 : -1);
        else if (in.op == OpKind::Mul && constant(x))
          q = combined(zero, y, x.lin.base);
        else if (in.op == OpKind::Mul && constant(y))
          q = combined(zero, x, y.lin.base);
        else
          continue;
        break;
      }
      case Code::IndexDiv:
      case Code::IndexMod: {
        if (!at(in.args[0]) || in.imm <= 0) continue;
        q = quotient(*at(in.args[0]), in.imm, k.domain);
        if (q && in.code == Code::IndexMod) q = combined(*at(in.args[0]), *q, -in.imm);  // a - m * (a floordiv m)
        break;
      }
      default: continue;  // casts included: a narrowing one may wrap
    }
    value[i] = std::move(q);
  }
  std::vector<std::optional<Affine>> out(k.insts.size());
  for (size_t i = 0; i < value.size(); ++i)
    if (value[i] && value[i]->terms.empty()) out[i] = std::move(value[i]->lin);
  return out;
}

}  // namespace kiln::kir
