// codegen/contraction.cpp - a Kernel IR kernel that is a matrix product, found by its form.
//
// An einsum, or any sum of a broadcast product that a user writes (`(a[:, :, None, :] *
// b[:, None, :, :]).sum(-1)`), fuses into one reduction kernel:
//
//   kernel @k0 over [4, 30, 50, reduce 20]
//     %10 = load #0[600*d0 + 20*d1 + d3]     A: no step along d2
//     %16 = load #1[1000*d0 + 20*d2 + d3]    B: no step along d1
//     %18 = reduce_sum (mul %10, %16)
//     store #2[1500*d0 + 50*d1 + d2], %18
//
// which a work-item per output element computes with one load of each operand per
// multiply-add. The same kernel is a GEMM step (m = 30, n = 50, k = 20, batch [4]) whose
// operands are read in place at the loads' strides, packed and register-blocked: what
// `matmul` runs. The loads' offsets come from affine_analysis, so any view the operands went
// through (transposes, broadcasts, slices, reversed slices) is a stride.
#include <algorithm>

#include "kiln/codegen/lower.h"

namespace kiln::kir {
namespace {

bool gemm_type(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::I32 || t == DType::I64; }

// A load of a whole element of a buffer the kernel only reads, of type `t`.
bool plain_load(const Kernel& k, Ref r, DType t) {
  const Inst& in = k.insts[static_cast<size_t>(r)];
  if (in.code != Code::Load || in.args.size() != 1) return false;  // a mask: a pad
  const BufferParam& p = k.buffers[static_cast<size_t>(in.buffer)];
  return !p.written && p.type.dtype == t;
}

// Gives the strides along `g`'s dims of one element (whose index is always 0, so any stride
// is right for it) their row-major values: a column step of 1 is what lets the cpu read B's
// panels in place, and what the tuner's key calls not strided (gemm_structure).
void normalize_unit_dims(LaunchPlan::Gemm& g) {
  if (g.m == 1) g.a_row_stride = g.k;
  if (g.k == 1) {
    g.a_col_stride = 1;
    g.b_row_stride = g.n;
  }
  if (g.n == 1) g.b_col_stride = 1;
}

// Folds the innermost batch dims into A's rows where B is the same for each of them and A's
// rows run on into the next batch entry: [197, 1, 768] x [768, 2304] (a linear layer over a
// [seq, batch, dim] view, as ViT's exports write it) is one 197-row product, not 197 products
// of one row. C is row-major over the batch dims and rows either way.
void fold_batch_into_rows(LaunchPlan::Gemm& g) {
  while (g.batch.rank() > 0) {
    const auto last = g.a_batch_stride.size() - 1;
    if (g.b_batch_stride[last] != 0 || (g.m > 1 && g.a_batch_stride[last] != g.m * g.a_row_stride)) return;
    if (g.m == 1) g.a_row_stride = g.a_batch_stride[last];
    g.m *= g.batch[g.batch.rank() - 1];
    g.batch = Shape(g.batch.dims().first(static_cast<size_t>(g.batch.rank() - 1)));
    g.a_batch_stride.pop_back();
    g.b_batch_stride.pop_back();
  }
}

}  // namespace

std::optional<LaunchPlan::Gemm> gemm_of_contraction(const Kernel& k) {
  if (k.in_order || !k.customs.empty() || k.stores.size() != 1 || k.stores[0].guard != kNoRef) return std::nullopt;
  const int rank = k.domain.rank();
  std::vector<int> kept;
  int reduced = -1;
  for (int d = 0; d < rank; ++d) {
    if (!k.reduced[static_cast<size_t>(d)]) {
      kept.push_back(d);
    } else if (reduced >= 0) {
      return std::nullopt;  // a sum over several dims
    } else {
      reduced = d;
    }
  }
  if (reduced < 0 || kept.size() < 2) return std::nullopt;

  // store #c[row-major over the kept dims], reduce_sum(mul(load, load)), all of one type.
  const Store& store = k.stores[0];
  const Inst& sum = k.insts[static_cast<size_t>(store.value)];
  const DType t = sum.type;
  if (sum.code != Code::Reduce || sum.op != OpKind::ReduceSum || !gemm_type(t) ||
      k.buffers[static_cast<size_t>(store.buffer)].type.dtype != t)
    return std::nullopt;
  const Inst& product = k.insts[static_cast<size_t>(sum.args[0])];
  if (product.code != Code::Op || product.op != OpKind::Mul || product.type != t || !plain_load(k, product.args[0], t) ||
      !plain_load(k, product.args[1], t))
    return std::nullopt;
  const std::vector<std::optional<Affine>> affine = affine_analysis(k);
  const std::optional<Affine>& out = affine[static_cast<size_t>(store.offset)];
  if (!out || out->base != 0 || out->stride[static_cast<size_t>(reduced)] != 0) return std::nullopt;
  int64_t row_major = 1;
  for (size_t i = kept.size(); i-- > 0;) {
    const auto d = static_cast<size_t>(kept[i]);
    if (k.domain[kept[i]] != 1 && out->stride[d] != row_major) return std::nullopt;
    row_major *= k.domain[kept[i]];
  }

  // The last two kept dims are C's rows, which only A steps along, and columns, only B's.
  const auto mdim = static_cast<size_t>(kept[kept.size() - 2]), ndim = static_cast<size_t>(kept.back());
  const auto kdim = static_cast<size_t>(reduced);
  Ref x = product.args[0], y = product.args[1];
  // A load's offset, with no step along the dims of one element (whose index is always 0,
  // whatever the offset multiplies it by).
  auto offset = [&](Ref load) -> std::optional<Affine> {
    std::optional<Affine> at = affine[static_cast<size_t>(k.insts[static_cast<size_t>(load)].args[0])];
    if (at)
      for (int d = 0; d < rank; ++d)
        if (k.domain[d] == 1) at->stride[static_cast<size_t>(d)] = 0;
    return at;
  };
  std::optional<Affine> ax = offset(x), ay = offset(y);
  if (!ax || !ay) return std::nullopt;
  if (ax->stride[ndim] != 0 || ay->stride[mdim] != 0) {
    std::swap(x, y);
    std::swap(ax, ay);
  }
  const Affine& a = *ax;
  const Affine& b = *ay;
  if (a.stride[ndim] != 0 || b.stride[mdim] != 0) return std::nullopt;

  LaunchPlan::Gemm g;
  g.dtype = t;
  g.a = k.insts[static_cast<size_t>(x)].buffer;
  g.b = k.insts[static_cast<size_t>(y)].buffer;
  g.c = store.buffer;
  g.m = k.domain[static_cast<int>(mdim)];
  g.n = k.domain[static_cast<int>(ndim)];
  g.k = k.domain[reduced];
  for (size_t i = 0; i + 2 < kept.size(); ++i) {
    const auto d = static_cast<size_t>(kept[i]);
    g.batch.push_back(k.domain[kept[i]]);
    g.a_batch_stride.push_back(a.stride[d]);
    g.b_batch_stride.push_back(b.stride[d]);
  }
  g.a_offset = a.base;
  g.a_row_stride = a.stride[mdim];
  g.a_col_stride = a.stride[kdim];
  g.b_offset = b.base;
  g.b_row_stride = b.stride[kdim];
  g.b_col_stride = b.stride[ndim];
  normalize_unit_dims(g);
  fold_batch_into_rows(g);
  normalize_unit_dims(g);
  return g;
}

}  // namespace kiln::kir
