// runtime/interpreter.cpp - the reference interpreter.
//
// Clarity over speed: every value is held in a wide domain (double for float types, int64
// for integers and bool), every op is evaluated whole, broadcasts are materialized. What
// each element means comes from kiln/ir/scalar_semantics.h, shared with constant folding.
#include "kiln/ir/interpreter.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <fmt/format.h>

#include "kiln/ir/conv.h"
#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/scalar_semantics.h"
#include "kiln/ir/symbolic.h"

namespace kiln {
namespace {

using Strides = std::array<int64_t, Shape::kMaxRank>;

/// A value in the wide domain. Exactly one of `f` (float types) or `i` (integers, bool)
/// holds the elements, already rounded or wrapped to `dtype`.
struct Wide {
  TensorType type;
  std::vector<double> f;
  std::vector<int64_t> i;

  bool is_f() const { return is_float(type.dtype); }
  int64_t numel() const { return type.shape.numel(); }
};

Wide make_wide(TensorType type) {
  Wide w;
  w.type = std::move(type);
  const auto n = static_cast<size_t>(w.numel());
  if (w.is_f()) w.f.assign(n, 0.0);
  else w.i.assign(n, 0);
  return w;
}

/// Calls fn(index, flat) for every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& fn) {
  const int64_t n = shape.numel();
  if (n == 0) return;
  std::array<int64_t, Shape::kMaxRank> idx{};
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(idx, flat);
    for (int d = shape.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

int64_t dot(const std::array<int64_t, Shape::kMaxRank>& idx, const Strides& strides, int rank) {
  int64_t off = 0;
  for (int d = 0; d < rank; ++d) off += idx[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
  return off;
}

/// out[idx] = src[offset + idx . strides]: every view (broadcast, permute, slice) is one.
Wide gather(const Wide& src, TensorType out_type, int64_t offset, const Strides& strides) {
  Wide out = make_wide(std::move(out_type));
  const int rank = out.type.shape.rank();
  for_each_index(out.type.shape, [&](const auto& idx, int64_t flat) {
    const auto from = static_cast<size_t>(offset + dot(idx, strides, rank));
    if (out.is_f()) out.f[static_cast<size_t>(flat)] = src.f[from];
    else out.i[static_cast<size_t>(flat)] = src.i[from];
  });
  return out;
}

/// `v` broadcast (NumPy rules, already verified) to `shape`.
Wide broadcast_to(const Wide& v, const Shape& shape) {
  if (v.type.shape == shape) return v;
  const Strides src = v.type.shape.strides();
  Strides s{};
  const int shift = shape.rank() - v.type.shape.rank();
  for (int d = 0; d < v.type.shape.rank(); ++d)
    s[static_cast<size_t>(d + shift)] = v.type.shape[d] == 1 ? 0 : src[static_cast<size_t>(d)];
  return gather(v, TensorType{v.type.dtype, shape}, 0, s);
}

/// `v` converted to element type `t` with the semantics of the `cast` op.
Wide convert(const Wide& v, DType t) {
  if (v.type.dtype == t) return v;
  Wide out = make_wide(TensorType{t, v.type.shape});
  const auto n = static_cast<size_t>(v.numel());
  for (size_t k = 0; k < n; ++k) {
    if (out.is_f()) out.f[k] = scalar::store_float(t, v.is_f() ? v.f[k] : scalar::int_to_float(v.type.dtype, v.i[k]));
    else out.i[k] = v.is_f() ? scalar::float_to_int(t, v.f[k]) : scalar::store_int(t, v.i[k]);
  }
  return out;
}

/// Operand `k` of an elementwise node, broadcast to the result shape and converted to `t`.
Wide operand_as(const Wide& v, const Shape& shape, DType t) { return convert(broadcast_to(v, shape), t); }

Wide eval_source(const Node& n) {
  Wide out = make_wide(n.type);
  const DType t = n.type.dtype;
  const auto numel = static_cast<size_t>(out.numel());
  auto put = [&](size_t k, const Scalar& s) {
    if (out.is_f()) out.f[k] = scalar::store_float(t, s.as_double());
    else out.i[k] = s.is_int() ? scalar::store_int(t, s.as_int()) : scalar::float_to_int(t, s.as_double());
  };
  switch (n.op) {
    case OpKind::Constant:
      if (n.attr("value").present) {
        for (size_t k = 0; k < numel; ++k) put(k, n.attr("value").scalar);
      } else {
        for (size_t k = 0; k < numel; ++k) put(k, (*n.attr("data").scalars)[k]);
      }
      break;
    case OpKind::ScalarParam:
      for (size_t k = 0; k < numel; ++k) put(k, n.attr("value").scalar);
      break;
    case OpKind::Arange: {
      const Scalar start = n.attr("start").scalar, step = n.attr("step").scalar;
      for (size_t k = 0; k < numel; ++k) {
        if (out.is_f()) out.f[k] = scalar::store_float(t, start.as_double() + static_cast<double>(k) * step.as_double());
        else out.i[k] = scalar::store_int(t, static_cast<int64_t>(static_cast<uint64_t>(start.as_int()) + k * static_cast<uint64_t>(step.as_int())));
      }
      break;
    }
    case OpKind::Rand:
      for (size_t k = 0; k < numel; ++k) out.f[k] = scalar::store_float(t, scalar::rand_uniform(n.attr("seed").i, k));
      break;
    default: KILN_ASSERT(false, "eval_source called with a source op");
  }
  return out;
}

// Element storage of `t` (bool as one byte), the layout a custom kernel's host function reads.
std::vector<std::byte> to_storage(const Wide& w, DType t) {
  const auto n = static_cast<size_t>(w.numel());
  std::vector<std::byte> out(n * (t == DType::Bool ? 1 : dtype_size(t)));
  for (size_t k = 0; k < n; ++k) {
    std::byte* p = out.data() + k * (t == DType::Bool ? 1 : dtype_size(t));
    switch (t) {
      case DType::Bool: *p = static_cast<std::byte>(w.i[k] != 0); break;
      case DType::I32: {
        const auto v = static_cast<int32_t>(w.i[k]);
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::I64: std::memcpy(p, &w.i[k], sizeof(int64_t)); break;
      case DType::F32: {
        const auto v = static_cast<float>(w.f[k]);
        std::memcpy(p, &v, sizeof v);
        break;
      }
      case DType::F64: std::memcpy(p, &w.f[k], sizeof(double)); break;
      default: KILN_ASSERT(false, "custom kernels take compute types only (custom_kernel.cpp)");
    }
  }
  return out;
}

// A custom kernel: its function, compiled for the host, on every broadcast element.
Wide eval_custom(const Node& n, const std::vector<const Wide*>& args) {
  const CustomKernel& k = *n.attrs[0].custom;
  const TensorType& rt = n.type;
  std::vector<std::vector<std::byte>> storage;
  std::vector<const void*> ptrs;
  for (size_t i = 0; i < args.size(); ++i) {
    storage.push_back(to_storage(operand_as(*args[i], rt.shape, k.signature.params[i]), k.signature.params[i]));
    ptrs.push_back(storage.back().data());
  }
  Wide out = make_wide(rt);
  std::vector<std::byte> result(static_cast<size_t>(out.numel()) * 8);
  custom_host_function(k)(ptrs, result.data(), out.numel());
  for (size_t e = 0; e < static_cast<size_t>(out.numel()); ++e) {
    switch (rt.dtype) {
      case DType::Bool: out.i[e] = result[e] != std::byte{0}; break;
      case DType::I32: {
        int32_t v = 0;
        std::memcpy(&v, result.data() + 4 * e, 4);
        out.i[e] = v;
        break;
      }
      case DType::I64: std::memcpy(&out.i[e], result.data() + 8 * e, 8); break;
      case DType::F32: {
        float v = 0;
        std::memcpy(&v, result.data() + 4 * e, 4);
        out.f[e] = v;
        break;
      }
      case DType::F64: std::memcpy(&out.f[e], result.data() + 8 * e, 8); break;
      default: KILN_ASSERT(false, "custom kernels return compute types only (custom_kernel.cpp)");
    }
  }
  return out;
}

Wide eval_elementwise(const Node& n, const std::vector<const Wide*>& args) {
  const TensorType& rt = n.type;
  const auto numel = static_cast<size_t>(rt.shape.numel());
  const OpKind op = n.op;
  if (op == OpKind::Cast) return convert(*args[0], rt.dtype);
  if (op == OpKind::Custom) return eval_custom(n, args);
  Wide out = make_wide(rt);

  if (n.info().has(trait::Predicate)) {
    const Wide a = broadcast_to(*args[0], rt.shape);
    for (size_t k = 0; k < numel; ++k) out.i[k] = scalar::predicate_float(op, a.f[k]);
    return out;
  }
  if (n.operands.size() == 1) {
    const Wide a = operand_as(*args[0], rt.shape, rt.dtype);
    const bool u64 = rt.dtype == DType::U64;  // never negative: abs and relu keep it, sign is 0 or 1
    for (size_t k = 0; k < numel; ++k) {
      if (out.is_f()) out.f[k] = scalar::store_float(rt.dtype, scalar::unary_float(op, a.f[k]));
      else if (u64 && op != OpKind::Neg) out.i[k] = op == OpKind::Sign ? a.i[k] != 0 : a.i[k];
      else out.i[k] = scalar::store_int(rt.dtype, scalar::unary_int(op, a.i[k]));
    }
    return out;
  }
  if (op == OpKind::Where) {
    const Wide c = operand_as(*args[0], rt.shape, DType::Bool);
    const Wide a = operand_as(*args[1], rt.shape, rt.dtype), b = operand_as(*args[2], rt.shape, rt.dtype);
    for (size_t k = 0; k < numel; ++k) {
      if (out.is_f()) out.f[k] = c.i[k] ? a.f[k] : b.f[k];
      else out.i[k] = c.i[k] ? a.i[k] : b.i[k];
    }
    return out;
  }
  // Binary: comparisons compute in the operands' promoted type, the rest in the result's.
  const bool is_compare = rt.dtype == DType::Bool && op != OpKind::And && op != OpKind::Or;
  const DType domain = is_compare ? promote(args[0]->type.dtype, args[1]->type.dtype) : rt.dtype;
  const Wide a = operand_as(*args[0], rt.shape, domain), b = operand_as(*args[1], rt.shape, domain);
  const bool fd = is_float(domain);
  if (domain == DType::U64 && (is_compare || op == OpKind::Max || op == OpKind::Min)) {  // in u64's order
    for (size_t k = 0; k < numel; ++k) {
      const int64_t x = scalar::u64_order_key(a.i[k]), y = scalar::u64_order_key(b.i[k]);
      out.i[k] = is_compare ? scalar::compare_int(op, x, y) : scalar::u64_order_key(scalar::binary_int(op, x, y));
    }
    return out;
  }
  if (domain == DType::U64 && (op == OpKind::Mod || op == OpKind::Fmod || op == OpKind::Shr)) {
    for (size_t k = 0; k < numel; ++k) out.i[k] = scalar::binary_u64(op, a.i[k], b.i[k]);
    return out;
  }
  for (size_t k = 0; k < numel; ++k) {
    if (is_compare) out.i[k] = fd ? scalar::compare_float(op, a.f[k], b.f[k]) : scalar::compare_int(op, a.i[k], b.i[k]);
    else if (fd) out.f[k] = scalar::store_float(rt.dtype, scalar::binary_float(op, a.f[k], b.f[k]));
    else out.i[k] = scalar::store_int(rt.dtype, scalar::binary_int(op, a.i[k], b.i[k]));
  }
  return out;
}

Wide eval_reduce(const Node& n, const Wide& x) {
  const auto& axes = n.attr("axes").ints;
  const Shape& in_shape = x.type.shape;
  const int rank = in_shape.rank();
  // Strides that map an input index to its output element (0 along reduced axes).
  Strides to_out{};
  {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
      to_out[static_cast<size_t>(d)] = stride;
      stride *= in_shape[d];
    }
  }
  Wide out = make_wide(n.type);
  const auto count = static_cast<size_t>(out.numel());
  const OpKind op = n.op;
  const bool fx = x.is_f();
  switch (op) {
    case OpKind::ReduceSum: {
      // Neumaier-compensated double sums: the oracle must beat any backend's accuracy.
      std::vector<double> sum(count, 0.0), comp(count, 0.0);
      std::vector<int64_t> isum(count, 0);
      for_each_index(in_shape, [&](const auto& idx, int64_t flat) {
        const auto o = static_cast<size_t>(dot(idx, to_out, rank));
        const auto k = static_cast<size_t>(flat);
        if (!fx) {
          isum[o] = static_cast<int64_t>(static_cast<uint64_t>(isum[o]) + static_cast<uint64_t>(x.i[k]));
          return;
        }
        const double v = x.f[k], t = sum[o] + v;
        // Compensation only between finite values: with an infinity it would be inf - inf.
        if (std::isfinite(t)) comp[o] += std::fabs(sum[o]) >= std::fabs(v) ? (sum[o] - t) + v : (v - t) + sum[o];
        sum[o] = t;
      });
      for (size_t o = 0; o < count; ++o) {
        const double total = std::isfinite(sum[o]) ? sum[o] + comp[o] : sum[o];
        if (out.is_f()) out.f[o] = scalar::store_float(n.type.dtype, total);
        else out.i[o] = scalar::store_int(n.type.dtype, isum[o]);
      }
      return out;
    }
    case OpKind::ReduceProd: {
      std::vector<double> prod(count, 1.0);
      std::vector<int64_t> iprod(count, 1);
      for_each_index(in_shape, [&](const auto& idx, int64_t flat) {
        const auto o = static_cast<size_t>(dot(idx, to_out, rank));
        const auto k = static_cast<size_t>(flat);
        if (fx) prod[o] *= x.f[k];
        else iprod[o] = scalar::binary_int(OpKind::Mul, iprod[o], x.i[k]);
      });
      for (size_t o = 0; o < count; ++o) {
        if (out.is_f()) out.f[o] = scalar::store_float(n.type.dtype, prod[o]);
        else out.i[o] = scalar::store_int(n.type.dtype, iprod[o]);
      }
      return out;
    }
    default: break;
  }
  // max, min, argmax, argmin: the first extreme element wins; NaN beats every number.
  const bool is_max = op == OpKind::ReduceMax || op == OpKind::ArgMax;
  const bool is_arg = op == OpKind::ArgMax || op == OpKind::ArgMin;
  const auto axis = static_cast<size_t>(axes[0]);
  std::vector<double> best(count, 0.0);
  std::vector<int64_t> ibest(count, 0), where(count, 0);
  std::vector<bool> seen(count, false);
  for_each_index(in_shape, [&](const auto& idx, int64_t flat) {
    const auto o = static_cast<size_t>(dot(idx, to_out, rank));
    const auto k = static_cast<size_t>(flat);
    bool better;
    if (!seen[o]) {
      better = true;
    } else if (fx) {
      const double v = x.f[k], b = best[o];
      better = !std::isnan(b) && (std::isnan(v) || (is_max ? v > b : v < b));
      // reduce_max/min pick +0.0 / -0.0 as the elementwise max/min do; arg* keep the first.
      if (!is_arg && v == 0 && b == 0 && std::signbit(v) != std::signbit(b))
        better = is_max ? std::signbit(b) : std::signbit(v);
    } else {
      const bool u64 = x.type.dtype == DType::U64;  // in u64's order
      const int64_t v = u64 ? scalar::u64_order_key(x.i[k]) : x.i[k], b = u64 ? scalar::u64_order_key(ibest[o]) : ibest[o];
      better = is_max ? v > b : v < b;
    }
    if (better) {
      seen[o] = true;
      if (fx) best[o] = x.f[k];
      else ibest[o] = x.i[k];
      where[o] = idx[axis];
    }
  });
  for (size_t o = 0; o < count; ++o) {
    if (is_arg) out.i[o] = where[o];
    else if (out.is_f()) out.f[o] = best[o];
    else out.i[o] = ibest[o];
  }
  return out;
}

// Index `j` into an axis of `extent` as gather and scatter read it: a negative one counts from
// the end; nullopt outside.
std::optional<int64_t> index_along(int64_t j, int64_t extent) {
  if (j < 0) j += extent;
  if (j < 0 || j >= extent) return std::nullopt;
  return j;
}

Wide eval_movement(const Node& n, const std::vector<const Wide*>& args) {
  const Wide& x = *args[0];
  const Strides xs = x.type.shape.strides();
  const int rank = x.type.shape.rank();
  switch (n.op) {
    case OpKind::Reshape: {
      Wide out = x;
      out.type = n.type;
      return out;
    }
    case OpKind::Expand: return broadcast_to(x, n.type.shape);
    case OpKind::Permute: {
      const auto& perm = n.attr("perm").ints;
      Strides s{};
      for (size_t k = 0; k < perm.size(); ++k) s[k] = xs[static_cast<size_t>(perm[k])];
      return gather(x, n.type, 0, s);
    }
    case OpKind::Slice: {
      const auto& start = n.attr("start").ints;
      const AttrValue& step = n.attr("step");
      int64_t offset = 0;
      Strides s{};
      for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
        offset += start[d] * xs[d];
        // An axis that keeps one element reads only its start: its step (which may be as
        // large as INT64_MIN) times the stride would overflow for nothing.
        const bool one = n.type.shape[static_cast<int>(d)] <= 1;
        s[d] = one ? 0 : xs[d] * (step.present ? step.ints[d] : 1);
      }
      return gather(x, n.type, offset, s);
    }
    case OpKind::Unfold: {
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const AttrValue& dil = n.attr("dilation");
      Strides s{};
      for (size_t d = 0; d < static_cast<size_t>(rank); ++d) s[d] = xs[d];
      s[axis] = xs[axis] * n.attr("step").i;
      s[static_cast<size_t>(rank)] = xs[axis] * (dil.present ? dil.i : 1);
      return gather(x, n.type, 0, s);
    }
    case OpKind::Pad: {
      Wide out = make_wide(n.type);
      const AttrValue& value = n.attr("value");
      if (value.present) {
        if (out.is_f()) std::fill(out.f.begin(), out.f.end(), value.scalar.as_double());
        else std::fill(out.i.begin(), out.i.end(), value.scalar.as_int());
      }
      const auto& low = n.attr("low").ints;
      const Strides os = n.type.shape.strides();
      int64_t base = 0;
      for (size_t d = 0; d < static_cast<size_t>(rank); ++d) base += low[d] * os[d];
      for_each_index(x.type.shape, [&](const auto& idx, int64_t flat) {
        const auto to = static_cast<size_t>(base + dot(idx, os, rank));
        if (out.is_f()) out.f[to] = x.f[static_cast<size_t>(flat)];
        else out.i[to] = x.i[static_cast<size_t>(flat)];
      });
      return out;
    }
    case OpKind::Gather: {
      const Wide& index = *args[1];
      Wide out = make_wide(n.type);
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const int64_t extent = x.type.shape[static_cast<int>(axis)];
      for_each_index(index.type.shape, [&](auto idx, int64_t flat) {
        const std::optional<int64_t> j = index_along(index.i[static_cast<size_t>(flat)], extent);
        if (!j) return;  // reads 0
        idx[axis] = *j;
        const auto from = static_cast<size_t>(dot(idx, xs, rank));
        if (out.is_f()) out.f[static_cast<size_t>(flat)] = x.f[from];
        else out.i[static_cast<size_t>(flat)] = x.i[from];
      });
      return out;
    }
    case OpKind::Scatter: {
      const Wide &index = *args[1], &updates = *args[2];
      Wide out = x;
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const int64_t extent = x.type.shape[static_cast<int>(axis)];
      const std::optional<OpKind> combine = n.scatter_combine();
      for_each_index(index.type.shape, [&](auto idx, int64_t flat) {
        const auto k = static_cast<size_t>(flat);
        const std::optional<int64_t> j = index_along(index.i[k], extent);
        if (!j) return;  // dropped
        idx[axis] = *j;
        const auto to = static_cast<size_t>(dot(idx, xs, rank));
        if (out.is_f())
          out.f[to] = combine ? scalar::store_float(n.type.dtype, scalar::binary_float(*combine, out.f[to], updates.f[k]))
                              : updates.f[k];
        else if (combine && n.type.dtype == DType::U64 && (*combine == OpKind::Max || *combine == OpKind::Min))
          out.i[to] = scalar::u64_order_key(
              scalar::binary_int(*combine, scalar::u64_order_key(out.i[to]), scalar::u64_order_key(updates.i[k])));
        else
          out.i[to] = combine ? scalar::store_int(n.type.dtype, scalar::binary_int(*combine, out.i[to], updates.i[k]))
                              : updates.i[k];
      });
      return out;
    }
    case OpKind::Cumsum: {
      const Wide v = convert(x, n.type.dtype);
      Wide out = make_wide(n.type);
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const int64_t before = xs[axis];  // the flat distance to the previous sum
      for_each_index(x.type.shape, [&](const auto& idx, int64_t flat) {
        const auto k = static_cast<size_t>(flat);
        const bool first = idx[axis] == 0;
        if (out.is_f())
          out.f[k] = first ? v.f[k] : scalar::store_float(n.type.dtype, out.f[k - static_cast<size_t>(before)] + v.f[k]);
        else
          out.i[k] = first ? v.i[k]
                           : scalar::store_int(n.type.dtype, scalar::binary_int(OpKind::Add, out.i[k - static_cast<size_t>(before)], v.i[k]));
      });
      return out;
    }
    case OpKind::Argsort: {
      Wide out = make_wide(n.type);
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const bool descending = n.attr("descending").present;
      const int64_t len = x.type.shape[static_cast<int>(axis)];
      const int64_t step = xs[axis];
      // Whether the element at flat offset a orders before the one at b (NaN after every
      // number, or before with `descending`; u64 by its order key).
      auto before = [&](int64_t a, int64_t b) {
        const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
        if (x.is_f()) {
          const double va = x.f[ua], vb = x.f[ub];
          if (std::isnan(va) || std::isnan(vb)) return descending ? std::isnan(va) && !std::isnan(vb)
                                                                  : !std::isnan(va) && std::isnan(vb);
          return descending ? va > vb : va < vb;
        }
        int64_t va = x.i[ua], vb = x.i[ub];
        if (x.type.dtype == DType::U64) va = scalar::u64_order_key(va), vb = scalar::u64_order_key(vb);
        return descending ? va > vb : va < vb;
      };
      std::vector<int64_t> lane(static_cast<size_t>(len));
      for_each_index(x.type.shape, [&](const auto& idx, int64_t flat) {
        if (idx[axis] != 0) return;  // once per lane, from its first element
        for (int64_t j = 0; j < len; ++j) lane[static_cast<size_t>(j)] = j;
        // Stable: ties by position (std::stable_sort's buffer is deprecated in libstdc++ 12).
        std::sort(lane.begin(), lane.end(), [&](int64_t a, int64_t b) {
          const int64_t pa = flat + a * step, pb = flat + b * step;
          return before(pa, pb) || (!before(pb, pa) && a < b);
        });
        for (int64_t r = 0; r < len; ++r) out.i[static_cast<size_t>(flat + r * step)] = lane[static_cast<size_t>(r)];
      });
      return out;
    }
    case OpKind::Concat: {
      Wide out = make_wide(n.type);
      const auto axis = static_cast<size_t>(n.attr("axis").i);
      const Strides os = n.type.shape.strides();
      int64_t along = 0;
      for (const Wide* arg : args) {
        const Wide part = convert(*arg, n.type.dtype);
        const int64_t base = along * os[axis];
        for_each_index(part.type.shape, [&](const auto& idx, int64_t flat) {
          const auto to = static_cast<size_t>(base + dot(idx, os, rank));
          if (out.is_f()) out.f[to] = part.f[static_cast<size_t>(flat)];
          else out.i[to] = part.i[static_cast<size_t>(flat)];
        });
        along += part.type.shape[static_cast<int>(axis)];
      }
      return out;
    }
    default: KILN_ASSERT(false, "eval_movement called with a movement op");
  }
}

Wide eval_matmul(const Node& n, const Wide& a0, const Wide& b0) {
  const Shape& os = n.type.shape;
  const int r = os.rank();
  const int64_t m = os[r - 2], nn = os[r - 1];
  const int64_t k = a0.type.shape[a0.type.shape.rank() - 1];
  // Broadcast both operands over the result's batch dims.
  Shape a_shape(os.dims().first(static_cast<size_t>(r - 2))), b_shape = a_shape;
  a_shape.push_back(m);
  a_shape.push_back(k);
  b_shape.push_back(k);
  b_shape.push_back(nn);
  const Wide a = operand_as(a0, a_shape, n.type.dtype), b = operand_as(b0, b_shape, n.type.dtype);
  Wide out = make_wide(n.type);
  const int64_t batches = m * nn == 0 ? 0 : out.numel() / (m * nn);
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t bi = 0; bi < batches; ++bi) {
    if (out.is_f()) {
      Eigen::Map<const Mat> am(a.f.data() + bi * m * k, m, k), bm(b.f.data() + bi * k * nn, k, nn);
      Eigen::Map<Mat> cm(out.f.data() + bi * m * nn, m, nn);
      cm.noalias() = am * bm;
      for (double& v : std::span(out.f).subspan(static_cast<size_t>(bi * m * nn), static_cast<size_t>(m * nn)))
        v = scalar::store_float(n.type.dtype, v);
    } else {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nn; ++j) {
          int64_t acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc = scalar::binary_int(OpKind::Add, acc,
                                     scalar::binary_int(OpKind::Mul, a.i[static_cast<size_t>(bi * m * k + i * k + p)],
                                                        b.i[static_cast<size_t>(bi * k * nn + p * nn + j)]));
          out.i[static_cast<size_t>(bi * m * nn + i * nn + j)] = scalar::store_int(n.type.dtype, acc);
        }
    }
  }
  return out;
}

// attention row by row, in double: the scores, their softmax (the maximum subtracted), then
// the weighted sum of v's rows divided by the softmax's sum, rounded once to f32.
Wide eval_attention(const Node& n, std::span<const Wide* const> args) {
  const Shape& os = n.type.shape;
  const int r = os.rank();
  const int64_t t = os[r - 2], e = os[r - 1];
  const int64_t d = args[0]->type.shape.dims().back(), s = args[1]->type.shape[args[1]->type.shape.rank() - 2];
  const Shape batch(os.dims().first(static_cast<size_t>(r - 2)));
  auto with = [&](int64_t rows, int64_t cols) {
    Shape x = batch;
    x.push_back(rows);
    x.push_back(cols);
    return x;
  };
  const Wide q = operand_as(*args[0], with(t, d), DType::F64), k = operand_as(*args[1], with(s, d), DType::F64);
  const Wide v = operand_as(*args[2], with(s, e), DType::F64);
  const std::optional<Wide> bias =
      args.size() > 3 ? std::optional<Wide>(operand_as(*args[3], with(t, s), DType::F64)) : std::nullopt;
  const double scale = n.attr("scale").scalar.as_double();
  const bool masked_zero = n.attr("masked_zero").present;
  Wide out = make_wide(n.type);
  const int64_t batches = batch.numel();
  std::vector<double> p(static_cast<size_t>(s));
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t i = 0; i < t; ++i) {
      double most = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q.f[static_cast<size_t>((bi * t + i) * d + c)] * k.f[static_cast<size_t>((bi * s + j) * d + c)];
        // The score rounds to f32 as the unfused graph's would; sums stay in double.
        double x = scalar::store_float(DType::F32, dot * scale);
        if (bias) x = scalar::store_float(DType::F32, x + bias->f[static_cast<size_t>((bi * t + i) * s + j)]);
        p[static_cast<size_t>(j)] = x;
        nan = nan || std::isnan(x);
        most = std::max(most, x);
      }
      const bool undefined = nan || !std::isfinite(most);
      double sum = 0;
      for (double& x : p) sum += x = std::exp(x - most);
      for (int64_t c = 0; c < e; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) acc += p[static_cast<size_t>(j)] * v.f[static_cast<size_t>((bi * s + j) * e + c)];
        const double y = undefined ? (masked_zero ? 0.0 : std::numeric_limits<double>::quiet_NaN()) : acc / sum;
        out.f[static_cast<size_t>((bi * t + i) * e + c)] = scalar::store_float(DType::F32, y);
      }
    }
  return out;
}

// conv as the GEMM it is, per batch and group: W's rows [Mg, Cg * window] times the columns
// of x's windows [Cg * window, positions] (im2col, zero outside x), in double for floats
// (exact products, one rounding per result, as matmul's) and wrapping i64 for integers.
Wide eval_conv(const Node& n, const Wide& x, const Wide& w) {
  const ConvGeometry g = conv_geometry(x.type.shape, w.type.shape, n.attrs).take();
  Wide out = make_wide(n.type);
  const int64_t cg = g.channels_per_group(), mg = g.out_channels_per_group(), window = g.window();
  const int64_t depth = cg * window, positions = g.positions(), plane = g.plane();
  // For each (window element, output position): where in a channel's plane it reads, or -1.
  std::vector<int64_t> at(static_cast<size_t>(window * positions));
  for (int64_t e = 0; e < window; ++e)
    for (int64_t p = 0; p < positions; ++p) at[static_cast<size_t>(e * positions + p)] = g.input_offset(e, p);
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat columns;
  if (x.is_f()) columns.resize(depth, positions);
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const int64_t x0 = (b * g.channels + gi * cg) * plane, w0 = gi * mg * depth;
      const int64_t y0 = (b * g.out_channels + gi * mg) * positions;
      auto read = [&](const auto& data, int64_t row, int64_t p) {
        const int64_t e = row % window, c = row / window;
        const int64_t off = at[static_cast<size_t>(e * positions + p)];
        return off < 0 ? 0 : data[static_cast<size_t>(x0 + c * plane + off)];
      };
      if (x.is_f()) {
        for (int64_t r = 0; r < depth; ++r)
          for (int64_t p = 0; p < positions; ++p) columns(r, p) = read(x.f, r, p);
        Eigen::Map<const Mat> wm(w.f.data() + w0, mg, depth);
        Eigen::Map<Mat> ym(out.f.data() + y0, mg, positions);
        ym.noalias() = wm * columns;
        for (double& v : std::span(out.f).subspan(static_cast<size_t>(y0), static_cast<size_t>(mg * positions)))
          v = scalar::store_float(n.type.dtype, v);
        continue;
      }
      for (int64_t m = 0; m < mg; ++m)
        for (int64_t p = 0; p < positions; ++p) {
          int64_t acc = 0;
          for (int64_t r = 0; r < depth; ++r)
            acc = scalar::binary_int(OpKind::Add, acc,
                                     scalar::binary_int(OpKind::Mul, w.i[static_cast<size_t>(w0 + m * depth + r)],
                                                        read(x.i, r, p)));
          out.i[static_cast<size_t>(y0 + m * positions + p)] = scalar::store_int(n.type.dtype, acc);
        }
    }
  return out;
}

Wide from_host(const HostTensor& t) {
  Wide w = make_wide(t.type());
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (w.is_f()) w.f[static_cast<size_t>(k)] = t.get_double(k);
    else w.i[static_cast<size_t>(k)] = t.get_int(k);
  }
  return w;
}

HostTensor to_host(const Wide& w) {
  HostTensor t(w.type);
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (w.is_f()) t.set_double(k, w.f[static_cast<size_t>(k)]);
    else t.set_int(k, w.i[static_cast<size_t>(k)]);
  }
  return t;
}

}  // namespace

std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs) {
  std::vector<const HostTensor*> views;
  for (const HostTensor& t : inputs) views.push_back(&t);
  return interpret(g, views);
}

std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor* const> inputs) {
  if (inputs.size() != g.inputs().size())
    throw Error(fmt::format("graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(), inputs.size()));
  if (has_symbolic_dims(g)) {
    // The interpreter computes with sizes: the graph the inputs' sizes make (kiln/ir/symbolic.h).
    std::vector<TensorType> types;
    for (const HostTensor* t : inputs) types.push_back(t->type());
    Expected<Graph> bound = specialize_for(g, types);
    if (!bound) throw Error(bound.error().str());
    return interpret(*bound, inputs);
  }
  // Free every value after its last use: the oracle runs workload-sized graphs too.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t id = 0; id < g.size(); ++id)
    for (ValueId v : g.nodes()[id].operands) last_use[v] = id;
  for (ValueId v : g.outputs()) last_use[v] = g.size();

  std::vector<Wide> values(g.size());
  size_t next_input = 0;
  std::vector<const Wide*> args;
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    args.clear();
    for (ValueId v : n.operands) args.push_back(&values[v]);
    switch (n.info().category) {
      case OpCategory::Source:
        if (n.op == OpKind::Input) {
          const HostTensor& in = *inputs[next_input++];
          if (!(in.type() == n.type))
            throw Error(fmt::format("input %{} of graph @{} expects {}, got {}", n.name, g.name(),
                                    n.type.str(), in.type().str()));
          values[id] = from_host(in);
        } else {
          values[id] = eval_source(n);
        }
        break;
      case OpCategory::Elementwise: values[id] = eval_elementwise(n, args); break;
      case OpCategory::Reduce: values[id] = eval_reduce(n, *args[0]); break;
      case OpCategory::Movement: values[id] = eval_movement(n, args); break;
      case OpCategory::Matmul:
        values[id] = n.op == OpKind::Conv        ? eval_conv(n, *args[0], *args[1])
                     : n.op == OpKind::Attention ? eval_attention(n, args)
                                                 : eval_matmul(n, *args[0], *args[1]);
        break;
    }
    for (ValueId v : n.operands)
      if (last_use[v] == id) values[v] = Wide{};
  }
  std::vector<HostTensor> outputs;
  for (ValueId v : g.outputs()) outputs.push_back(to_host(values[v]));
  return outputs;
}

}  // namespace kiln
