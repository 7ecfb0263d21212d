// codegen/index_range.cpp - which instructions only compute positions, and whether 32-bit
// arithmetic computes them exactly (index_instructions, index_fits_32 in kernel_ir.h).
//
// GPUs emulate 64-bit integer arithmetic (two or more instructions for an add, many for the
// divide and remainder of a position by a dim's extent), so a C-family backend computes
// positions in 32 bits where a kernel's ranges allow it; the interval analysis here is what
// makes that exact rather than hopeful.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/codegen/kernel_ir.h"

namespace kiln::kir {
namespace {

// In doubles: exact for the integers that matter (below 2^53), and beyond them rounding
// keeps a value far outside 32 bits, where it belongs, without overflowing.
struct Interval {
  double lo = 0, hi = 0;
};

bool is_comparison(OpKind op) {
  return op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt || op == OpKind::Ge || op == OpKind::Eq ||
         op == OpKind::Ne;
}

// Positions by construction: what lowering builds index expressions from.
bool index_shaped(const Inst& in, const std::vector<bool>& candidate) {
  if (in.type != DType::I64) return false;
  auto args_are = [&] {
    return std::ranges::all_of(in.args, [&](Ref a) { return candidate[static_cast<size_t>(a)]; });
  };
  switch (in.code) {
    case Code::Dim:
    case Code::Const: return true;
    case Code::IndexDiv:
    case Code::IndexMod: return args_are();
    case Code::Op:
      return (in.op == OpKind::Add || in.op == OpKind::Sub || in.op == OpKind::Mul) && args_are();
    default: return false;
  }
}

}  // namespace

std::vector<bool> index_instructions(const Kernel& k) {
  const size_t n = k.insts.size();
  std::vector<bool> index(n, false);
  for (size_t i = 0; i < n; ++i) index[i] = index_shaped(k.insts[i], index);
  // Uses that keep a value a position: load offsets, store offsets, other positions, and
  // comparisons whose sides are both positions. Any other use (arithmetic on data, a store
  // of the value itself, rand's element number) needs the full i64, and so do the operands
  // of a value computed in i64 (hence the fixpoint). A narrowed value may still have an
  // operand that other uses keep in i64: the emitter converts it there.
  bool changed = true;
  while (changed) {
    changed = false;
    std::vector<bool> ok(n, true);
    auto need_i64 = [&](Ref r) {
      if (r != kNoRef) ok[static_cast<size_t>(r)] = false;
    };
    for (size_t i = 0; i < n; ++i) {
      const Inst& in = k.insts[i];
      if (in.code == Code::Load || index[i]) continue;  // an offset (and a bool mask)
      const bool mask_of_positions = in.code == Code::Op && is_comparison(in.op) &&
                                     std::ranges::all_of(in.args, [&](Ref a) { return index[static_cast<size_t>(a)]; });
      if (mask_of_positions) continue;
      for (Ref a : in.args) need_i64(a);
    }
    for (const Store& st : k.stores) {
      need_i64(st.value);
      need_i64(st.guard);
    }
    for (size_t i = 0; i < n; ++i)
      if (index[i] && !ok[i]) {
        index[i] = false;
        changed = true;
      }
  }
  return index;
}

bool index_fits_32(const Kernel& k) {
  constexpr double kLo = std::numeric_limits<int32_t>::min(), kHi = std::numeric_limits<int32_t>::max();
  // A work-item's flat counters run to the count plus one work-group (at most 2^16 wide).
  constexpr int64_t kCountLimit = (int64_t{1} << 31) - (int64_t{1} << 16);
  int64_t kept = 1, reduced = 1;
  for (int d = 0; d < k.domain.rank(); ++d) (k.reduced[static_cast<size_t>(d)] ? reduced : kept) *= k.domain[d];
  if (kept >= kCountLimit || reduced >= kCountLimit) return false;

  // The positions index_instructions narrows, and every offset of a load or store with the
  // position-shaped values it is computed from, also where other uses keep them in i64: a
  // language that indexes arrays with 32-bit integers only (GLSL) converts those.
  const size_t n = k.insts.size();
  std::vector<bool> index = index_instructions(k), shaped(n, false), offset(n, false);
  for (size_t i = 0; i < n; ++i) shaped[i] = index_shaped(k.insts[i], shaped);
  for (const Inst& in : k.insts)
    if (in.code == Code::Load) offset[static_cast<size_t>(in.args[0])] = true;
  for (const Store& st : k.stores) offset[static_cast<size_t>(st.offset)] = true;
  for (size_t i = n; i-- > 0;) {
    if (!offset[i] || !shaped[i]) continue;
    index[i] = true;
    for (Ref a : k.insts[i].args) offset[static_cast<size_t>(a)] = true;
  }
  // Ranges of every position-shaped value (a narrowed one's operands may be kept in i64 by
  // other uses, but their values still bound it); only the checked ones must fit.
  std::vector<Interval> range(n);
  for (size_t i = 0; i < n; ++i) {
    if (!shaped[i]) continue;
    const Inst& in = k.insts[i];
    auto arg = [&](size_t a) { return range[static_cast<size_t>(in.args[a])]; };
    Interval& r = range[i];
    switch (in.code) {
      case Code::Dim: r = {0, std::max(0.0, static_cast<double>(k.domain[static_cast<int>(in.imm)]) - 1)}; break;
      case Code::Const: r = {static_cast<double>(in.literal.as_int()), static_cast<double>(in.literal.as_int())}; break;
      case Code::IndexDiv:  // operand >= 0 by contract
        r = {std::floor(arg(0).lo / static_cast<double>(in.imm)), std::floor(arg(0).hi / static_cast<double>(in.imm))};
        break;
      case Code::IndexMod: r = {0, std::min(arg(0).hi, static_cast<double>(in.imm) - 1)}; break;
      case Code::Op: {
        const Interval a = arg(0), b = arg(1);
        if (in.op == OpKind::Add) r = {a.lo + b.lo, a.hi + b.hi};
        else if (in.op == OpKind::Sub) r = {a.lo - b.hi, a.hi - b.lo};
        else {
          const double p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
          r = {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
        }
        break;
      }
      default: break;  // index_shaped admits nothing else
    }
    if (index[i] && !(r.lo >= kLo && r.hi <= kHi)) return false;
  }
  return true;
}

}  // namespace kiln::kir
