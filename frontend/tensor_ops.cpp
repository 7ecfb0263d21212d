// frontend/tensor_ops.cpp - the primitive ops of kiln::Tensor, one IR op each.
//
// Recording is the hot path (a budget of 0.3 us per op): the checks reuse the IR's type
// rules, operand types are copied into a stack array, and no strings are built unless an
// error is thrown.
#include <algorithm>
#include <bit>

#include <utility>

#include <fmt/format.h>

#include "kiln/frontend/lazy.h"
#include "grad.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln {
namespace detail {

[[noreturn]] void fail(std::string_view fn, std::string_view message) {
  throw Error(fmt::format("{}: {}", fn, message));
}

void require_defined(std::string_view fn, const Tensor& t) {
  if (!t.defined()) fail(fn, "the tensor is undefined (default-constructed or moved from)");
}

std::string type_str(const Tensor& t) { return TensorType{t.dtype(), t.shape()}.str(); }

Tensor record(std::string_view fn, OpKind op, std::span<const Tensor* const> operands, Attrs attrs,
              const TensorType* declared) {
  constexpr size_t kInline = 3;
  std::array<TensorType, kInline> inline_types;
  std::array<LazyValue*, kInline> inline_values{};
  std::vector<TensorType> more_types;
  std::vector<LazyValue*> more_values;
  const bool spill = operands.size() > kInline;
  if (spill) {
    more_types.resize(operands.size());
    more_values.resize(operands.size());
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = *operands[i];
    require_defined(fn, t);
    LazyValue* v = t.impl();
    if (v->device != operands[0]->impl()->device)
      fail(fn, fmt::format("operands are on different devices ({} and {})", operands[0]->impl()->device.str(),
                           v->device.str()));
    (spill ? more_types[i] : inline_types[i]) = v->type;
    (spill ? more_values[i] : inline_values[i]) = v;
  }
  if (attrs.size() == 0) attrs = Graph::make_attrs(op);
  const std::span<const TensorType> types = spill ? std::span<const TensorType>(more_types)
                                                  : std::span<const TensorType>(inline_types.data(), operands.size());
  auto type = infer_type(op, types, attrs, declared);
  if (!type) fail(fn, type.error().message);
  if (!checked_bytes(*type))  // broadcasting can multiply sizes past what memory can count
    fail(fn, fmt::format("the result {} has more bytes than an int64 counts", type->str()));
  const std::span<LazyValue* const> values = spill ? std::span<LazyValue* const>(more_values)
                                                   : std::span<LazyValue* const>(inline_values.data(), operands.size());
  LazyValue* v = make_pending(op, *type, operands.empty() ? Device{} : operands[0]->impl()->device, values,
                              std::move(attrs));
  Tensor result(v);
  record_grad(v, op, v->attrs, operands);
  if (thread_pending_count() > max_pending() && !thread_is_tracing()) flush_pending();
  return result;
}

AttrValue& attr_slot(Attrs& attrs, OpKind op, std::string_view name) {
  const int i = attr_index(op, name);
  KILN_ASSERT(i >= 0, "the op's schema has the attribute");
  AttrValue& v = attrs[static_cast<size_t>(i)];
  v.present = true;
  return v;
}

int64_t normalize_axis(std::string_view fn, int64_t axis, const Tensor& t, int rank_extra) {
  const int64_t rank = t.rank() + rank_extra;
  if (axis < -rank || axis >= rank)
    fail(fn, fmt::format("axis {} is out of range for {}", axis, type_str(t)));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(std::string_view fn, const Axes& axes, const Tensor& t) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t d = 0; d < t.rank(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(fn, a, t));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(fn, fmt::format("axes [{}] name an axis twice", fmt::join(axes, ", ")));
  return out;
}

namespace {
thread_local bool t_bake_scalars = false;
}  // namespace

BakedScalars::BakedScalars() : was_(std::exchange(t_bake_scalars, true)) {}
BakedScalars::~BakedScalars() { t_bake_scalars = was_; }

Tensor scalar_for(std::string_view fn, const Number& n, const Tensor& like, int64_t bound_source) {
  require_defined(fn, like);
  const Scalar& s = n.value();
  const DType t = like.dtype();
  // Weak scalars: the tensor's type wins within a kind; a float meeting an integer or bool
  // tensor gives f32 (PyTorch's default float), an integer meeting bool gives i64.
  DType dtype = t;
  if (!s.is_int() && !is_float(t)) dtype = DType::F32;
  else if (s.is_int() && is_bool(t)) dtype = DType::I64;
  if (s.is_int() && !is_float(dtype) && !(s.cast_to(dtype) == s))
    fail(fn, fmt::format("scalar {} does not fit in {} (the type of the tensor it meets, {})", s.as_int(),
                         dtype_name(dtype), TensorType{like.dtype(), like.shape()}.str()));
  const Scalar value = s.cast_to(dtype);
  if (bound_source >= 0) {
    // Its own node, never shared with an equal plain scalar: only this one is read again.
    Attrs a = Graph::make_attrs(OpKind::ScalarParam);
    attr_slot(a, OpKind::ScalarParam, "value").scalar = value;
    attr_slot(a, OpKind::ScalarParam, "slot").i = -bound_source - 1;  // the cut numbers it
    return Tensor(make_pending(OpKind::ScalarParam, TensorType{dtype, {}}, like.device(), {}, std::move(a)));
  }
  const OpKind op = t_bake_scalars ? OpKind::Constant : OpKind::ScalarParam;
  // One node per value in a pending stream: `y * 1.0001f` in a loop records one scalar,
  // not one per iteration (fewer values to record, cut, hash and compile).
  ScalarCache& cache = thread_scalar_cache();
  for (const ScalarCache::Entry& e : cache.entries)
    if (e.op == op && e.dtype == dtype && e.device == like.device() && e.value.is_int() == value.is_int() &&
        (value.is_int() ? e.value.as_int() == value.as_int()
                        : std::bit_cast<uint64_t>(e.value.as_double()) == std::bit_cast<uint64_t>(value.as_double()))) {
      retain(e.v);
      return Tensor(e.v);
    }
  Attrs a = Graph::make_attrs(op);
  attr_slot(a, op, "value").scalar = value;
  if (op == OpKind::ScalarParam) attr_slot(a, op, "slot").i = 0;  // numbered when the stream is cut
  LazyValue* v = make_pending(op, TensorType{dtype, {}}, like.device(), {}, std::move(a));
  if (cache.entries.size() < ScalarCache::kCapacity) {
    retain(v);
    cache.entries.push_back({op, dtype, like.device(), value, v});
  }
  return Tensor(v);
}

}  // namespace detail

using detail::record;

namespace {
// A float scalar meeting an integer or bool tensor computes in f32 (PyTorch's default
// float), not in the f64 that NumPy's promotion of i32 with f32 would give.
Tensor weak_operand(const Tensor& t, const Number& n) {
  detail::require_defined("scalar", t);
  return !n.value().is_int() && !is_float(t.dtype()) ? t.to(DType::F32) : t;
}
}  // namespace


// ---- elementwise ------------------------------------------------------------------------

#define KILN_UNARY(method, op) \
  Tensor Tensor::method() const { return record(#method, OpKind::op, {this}); }
KILN_UNARY(neg, Neg)
KILN_UNARY(abs, Abs)
KILN_UNARY(exp, Exp)
KILN_UNARY(log, Log)
KILN_UNARY(sqrt, Sqrt)
KILN_UNARY(rsqrt, Rsqrt)
KILN_UNARY(sin, Sin)
KILN_UNARY(cos, Cos)
KILN_UNARY(asin, Asin)
KILN_UNARY(acos, Acos)
KILN_UNARY(atan, Atan)
KILN_UNARY(tanh, Tanh)
KILN_UNARY(sigmoid, Sigmoid)
KILN_UNARY(relu, Relu)
KILN_UNARY(erf, Erf)
KILN_UNARY(floor, Floor)
KILN_UNARY(ceil, Ceil)
KILN_UNARY(round, Round)
KILN_UNARY(sign, Sign)
KILN_UNARY(isnan, IsNan)
KILN_UNARY(isinf, IsInf)
KILN_UNARY(logical_not, Not)
#undef KILN_UNARY

namespace {
// Broadcast failures get the frontend's own wording: "add: cannot broadcast f32[3,4] with f32[5]".
Tensor binary(std::string_view fn, OpKind op, const Tensor& a, const Tensor& b) {
  detail::require_defined(fn, a);
  detail::require_defined(fn, b);
  if (!broadcast_shapes(a.shape(), b.shape()))
    detail::fail(fn, fmt::format("cannot broadcast {} with {}", detail::type_str(a), detail::type_str(b)));
  return record(fn, op, {&a, &b});
}
}  // namespace

#define KILN_BINARY(method, op) \
  Tensor Tensor::method(const Tensor& other) const { return binary(#method, OpKind::op, *this, other); }
KILN_BINARY(add, Add)
KILN_BINARY(sub, Sub)
KILN_BINARY(mul, Mul)
KILN_BINARY(div, Div)
KILN_BINARY(pow, Pow)
KILN_BINARY(atan2, Atan2)
KILN_BINARY(remainder, Mod)
KILN_BINARY(fmod, Fmod)
KILN_BINARY(shift_left, Shl)
KILN_BINARY(shift_right, Shr)
KILN_BINARY(maximum, Max)
KILN_BINARY(minimum, Min)
KILN_BINARY(eq, Eq)
KILN_BINARY(ne, Ne)
KILN_BINARY(lt, Lt)
KILN_BINARY(le, Le)
KILN_BINARY(gt, Gt)
KILN_BINARY(ge, Ge)
KILN_BINARY(logical_and, And)
KILN_BINARY(logical_or, Or)
#undef KILN_BINARY

Tensor Tensor::pow(Number exponent) const {
  // The exponent is part of what is computed (x^2 is a product, x^0.5 a square root), not a
  // value that changes from step to step: a constant, which simplify specializes, not a
  // scalar bound at launch.
  const Tensor t = weak_operand(*this, exponent);
  const detail::BakedScalars baked;
  return t.pow(detail::scalar_for("pow", exponent, t));
}

Tensor Tensor::to(DType dtype) const {
  detail::require_defined("to", *this);
  if (dtype == this->dtype()) return *this;
  const TensorType type{dtype, shape()};
  return record("to", OpKind::Cast, {this}, {}, &type);
}

Tensor cast(const Tensor& x, DType dtype) { return x.to(dtype); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  for (const Tensor* t : {&cond, &a, &b}) detail::require_defined("where", *t);
  if (!broadcast_shapes(cond.shape(), a.shape()) ||
      !broadcast_shapes(*broadcast_shapes(cond.shape(), a.shape()), b.shape()))
    detail::fail("where", fmt::format("cannot broadcast {}, {} and {}", detail::type_str(cond), detail::type_str(a),
                                      detail::type_str(b)));
  return record("where", OpKind::Where, {&cond, &a, &b});
}

Tensor Tensor::where(const Tensor& cond, const Tensor& other) const { return kiln::where(cond, *this, other); }

// ---- reductions -------------------------------------------------------------------------

namespace {
Tensor reduce(std::string_view fn, OpKind op, const Tensor& x, const Axes& axes, bool keepdim) {
  detail::require_defined(fn, x);
  std::vector<int64_t> norm = detail::normalize_axes(fn, axes, x);
  if (norm.empty()) {
    // A rank-0 tensor: nothing to reduce, but sum and prod still widen small integers.
    const TensorType widened = *infer_type(op, std::array{TensorType{x.dtype(), {1}}}, [&] {
      Attrs a = Graph::make_attrs(op);
      detail::attr_slot(a, op, "axes").ints = {0};
      return a;
    }(), nullptr);
    return x.to(widened.dtype);
  }
  Attrs a = Graph::make_attrs(op);
  detail::attr_slot(a, op, "axes").ints = std::move(norm);
  if (keepdim) detail::attr_slot(a, op, "keepdim");
  return record(fn, op, {&x}, std::move(a));
}
}  // namespace

Tensor Tensor::sum(const Axes& axes, bool keepdim) const { return reduce("sum", OpKind::ReduceSum, *this, axes, keepdim); }
Tensor Tensor::prod(const Axes& axes, bool keepdim) const { return reduce("prod", OpKind::ReduceProd, *this, axes, keepdim); }
Tensor Tensor::max(const Axes& axes, bool keepdim) const { return reduce("max", OpKind::ReduceMax, *this, axes, keepdim); }
Tensor Tensor::min(const Axes& axes, bool keepdim) const { return reduce("min", OpKind::ReduceMin, *this, axes, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  detail::require_defined("argmax", *this);
  if (rank() == 0) return zeros({}, DType::I64, device());
  return reduce("argmax", OpKind::ArgMax, *this, {dim}, keepdim);
}
Tensor Tensor::argmin(int64_t dim, bool keepdim) const {
  detail::require_defined("argmin", *this);
  if (rank() == 0) return zeros({}, DType::I64, device());
  return reduce("argmin", OpKind::ArgMin, *this, {dim}, keepdim);
}

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim) { return x.sum(axes, keepdim); }
Tensor prod(const Tensor& x, const Axes& axes, bool keepdim) { return x.prod(axes, keepdim); }
Tensor amax(const Tensor& x, const Axes& axes, bool keepdim) { return x.max(axes, keepdim); }
Tensor amin(const Tensor& x, const Axes& axes, bool keepdim) { return x.min(axes, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return x.argmax(dim, keepdim); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return x.argmin(dim, keepdim); }

// ---- movement ---------------------------------------------------------------------------

Tensor Tensor::reshape(const std::vector<int64_t>& shape) const {
  detail::require_defined("reshape", *this);
  Shape out;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d == -1 && infer_at < 0) {
      infer_at = static_cast<int>(i);
      out.push_back(1);
      continue;
    }
    if (d < 0) detail::fail("reshape", fmt::format("shape [{}] may hold one -1 and no other negative size", fmt::join(shape, ", ")));
    if (__builtin_mul_overflow(known, d, &known))
      detail::fail("reshape", fmt::format("shape [{}] has more elements than an int64 counts", fmt::join(shape, ", ")));
    out.push_back(d);
  }
  if (infer_at >= 0) {
    if (known == 0 || numel() % known != 0)
      detail::fail("reshape", fmt::format("cannot infer the -1 in [{}] for {}", fmt::join(shape, ", "), detail::type_str(*this)));
    out[infer_at] = numel() / known;
  }
  if (out == this->shape()) return *this;
  const TensorType type{dtype(), out};
  return record("reshape", OpKind::Reshape, {this}, {}, &type);
}

Tensor Tensor::permute(const Axes& perm) const {
  detail::require_defined("permute", *this);
  if (static_cast<int>(perm.size()) != rank())
    detail::fail("permute", fmt::format("perm [{}] needs one entry per axis of {}", fmt::join(perm, ", "), detail::type_str(*this)));
  Attrs a = Graph::make_attrs(OpKind::Permute);
  auto& p = detail::attr_slot(a, OpKind::Permute, "perm").ints;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    p.push_back(detail::normalize_axis("permute", perm[i], *this));
    identity = identity && p.back() == static_cast<int64_t>(i);
  }
  if (identity) {
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return *this;
  }
  return record("permute", OpKind::Permute, {this}, std::move(a));
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  detail::require_defined("transpose", *this);
  Axes perm;
  for (int64_t d = 0; d < rank(); ++d) perm.push_back(d);
  std::swap(perm[static_cast<size_t>(detail::normalize_axis("transpose", dim0, *this))],
            perm[static_cast<size_t>(detail::normalize_axis("transpose", dim1, *this))]);
  return permute(perm);
}

Tensor Tensor::expand(const std::vector<int64_t>& shape) const {
  detail::require_defined("expand", *this);
  Shape out;
  const int shift = static_cast<int>(shape.size()) - rank();
  for (size_t i = 0; i < shape.size(); ++i) {
    const int src = static_cast<int>(i) - shift;
    if (shape[i] == -1 && src < 0)
      detail::fail("expand", fmt::format("-1 keeps a dim, but dim {} of [{}] is new", i, fmt::join(shape, ", ")));
    out.push_back(shape[i] == -1 ? this->shape()[src] : shape[i]);
  }
  if (out == this->shape()) return *this;
  const TensorType type{dtype(), out};
  return record("expand", OpKind::Expand, {this}, {}, &type);
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t stop, int64_t step) const {
  detail::require_defined("slice", *this);
  const auto d = static_cast<int>(detail::normalize_axis("slice", dim, *this));
  if (step == 0) detail::fail("slice", "step must not be 0");
  const int64_t n = shape()[d];
  if (step > 0) {
    auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
    start = clamp(start);
    stop = std::max(start, clamp(stop));
  } else {
    // Python's rule for a negative step: indices clamp to [-1, n - 1], -1 meaning "past 0".
    auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{-1}, n - 1); };
    start = clamp(start);
    stop = std::min(start, clamp(stop));
  }
  Attrs a = Graph::make_attrs(OpKind::Slice);
  auto& s0 = detail::attr_slot(a, OpKind::Slice, "start").ints;
  auto& s1 = detail::attr_slot(a, OpKind::Slice, "stop").ints;
  auto& s2 = detail::attr_slot(a, OpKind::Slice, "step").ints;
  for (int k = 0; k < rank(); ++k) {
    s0.push_back(k == d ? start : 0);
    s1.push_back(k == d ? stop : shape()[k]);
    s2.push_back(k == d ? step : 1);
  }
  if (step == 1) a[static_cast<size_t>(attr_index(OpKind::Slice, "step"))] = AttrValue{};
  return record("slice", OpKind::Slice, {this}, std::move(a));
}

Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step, int64_t dilation) const {
  detail::require_defined("unfold", *this);
  const int64_t d = detail::normalize_axis("unfold", dim, *this);
  Attrs a = Graph::make_attrs(OpKind::Unfold);
  detail::attr_slot(a, OpKind::Unfold, "axis").i = d;
  detail::attr_slot(a, OpKind::Unfold, "size").i = size;
  detail::attr_slot(a, OpKind::Unfold, "step").i = step;
  if (dilation != 1) detail::attr_slot(a, OpKind::Unfold, "dilation").i = dilation;
  return record("unfold", OpKind::Unfold, {this}, std::move(a));
}

Tensor Tensor::flip(const Axes& dims) const {
  detail::require_defined("flip", *this);
  Tensor out = *this;
  for (int64_t d : detail::normalize_axes("flip", dims, *this)) out = out.slice(d, -1, -out.size(d) - 1, -1);
  return out;
}

// One cumsum op; reverse and exclusive are views around it (a flip; a shift by one).
Tensor Tensor::cumsum(int64_t dim, bool exclusive, bool reverse) const {
  detail::require_defined("cumsum", *this);
  const int64_t axis = detail::normalize_axis("cumsum", dim, *this);
  Tensor x = reverse ? flip({axis}) : *this;
  Attrs a = Graph::make_attrs(OpKind::Cumsum);
  detail::attr_slot(a, OpKind::Cumsum, "axis").i = axis;
  Tensor sums = record("cumsum", OpKind::Cumsum, {&x}, std::move(a));
  if (exclusive) {
    std::vector<int64_t> low(static_cast<size_t>(rank()), 0), high(low);
    low[static_cast<size_t>(axis)] = 1;
    sums = sums.pad(low, high, 0).slice(axis, 0, size(axis));
  }
  return reverse ? sums.flip({axis}) : sums;
}

Tensor Tensor::argsort(int64_t dim, bool descending) const {
  detail::require_defined("argsort", *this);
  if (rank() == 0) return kiln::zeros({}, DType::I64, device());
  const int64_t axis = detail::normalize_axis("argsort", dim, *this);
  Attrs a = Graph::make_attrs(OpKind::Argsort);
  detail::attr_slot(a, OpKind::Argsort, "axis").i = axis;
  detail::attr_slot(a, OpKind::Argsort, "descending").present = descending;
  return record("argsort", OpKind::Argsort, {this}, std::move(a));
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  detail::require_defined("gather", *this);
  detail::require_defined("gather", index);
  Attrs a = Graph::make_attrs(OpKind::Gather);
  detail::attr_slot(a, OpKind::Gather, "axis").i = detail::normalize_axis("gather", dim, *this);
  return record("gather", OpKind::Gather, {this, &index}, std::move(a));
}

namespace {
Tensor scatter_op(std::string_view fn, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& updates,
                  std::string_view combine) {
  for (const Tensor* t : {&x, &index, &updates}) detail::require_defined(fn, *t);
  Attrs a = Graph::make_attrs(OpKind::Scatter);
  detail::attr_slot(a, OpKind::Scatter, "axis").i = detail::normalize_axis(fn, dim, x);
  if (!combine.empty()) detail::attr_slot(a, OpKind::Scatter, combine);
  return record(fn, OpKind::Scatter, {&x, &index, &updates}, std::move(a));
}
}  // namespace

Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& updates) const {
  return scatter_op("scatter", *this, dim, index, updates, "");
}

Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& updates, ScatterReduce reduce) const {
  static constexpr std::string_view kFlag[] = {"add", "mul", "max", "min"};
  return scatter_op("scatter_reduce", *this, dim, index, updates, kFlag[static_cast<int>(reduce)]);
}

Tensor Tensor::take(const Tensor& indices, int64_t axis) const {
  detail::require_defined("take", *this);
  detail::require_defined("take", indices);
  const int64_t d = detail::normalize_axis("take", axis, *this);
  if (indices.dtype() != DType::I32 && indices.dtype() != DType::I64)
    detail::fail("take", fmt::format("indices must be i32 or i64, got {}", detail::type_str(indices)));
  // [outer, n, inner] gathered along its middle axis by the indices, flattened and broadcast
  // over outer and inner (a view: the indices are read, not copied).
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < rank(); ++k)
    if (k < d) outer *= shape()[static_cast<int>(k)];
    else if (k > d) inner *= shape()[static_cast<int>(k)];
  const int64_t count = indices.numel();
  const Tensor rows = reshape({outer, shape()[static_cast<int>(d)], inner});
  const Tensor at = indices.reshape({1, count, 1}).expand({outer, count, inner});
  std::vector<int64_t> out(shape().begin(), shape().begin() + d);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), shape().begin() + d + 1, shape().end());
  return rows.gather(1, at).reshape(out);
}

Tensor Tensor::pad(const std::vector<int64_t>& low, const std::vector<int64_t>& high, Number value) const {
  detail::require_defined("pad", *this);
  Attrs a = Graph::make_attrs(OpKind::Pad);
  detail::attr_slot(a, OpKind::Pad, "low").ints = low;
  detail::attr_slot(a, OpKind::Pad, "high").ints = high;
  const Scalar& v = value.value();
  if (!(v.is_int() && v.as_int() == 0))
    detail::attr_slot(a, OpKind::Pad, "value").scalar = is_float(dtype()) ? v.cast_to(dtype()) : v;
  return record("pad", OpKind::Pad, {this}, std::move(a));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  detail::require_defined("flatten", *this);
  if (rank() == 0) return reshape({1});
  const int64_t s = detail::normalize_axis("flatten", start_dim, *this), e = detail::normalize_axis("flatten", end_dim, *this);
  if (s > e) detail::fail("flatten", fmt::format("start_dim {} comes after end_dim {}", start_dim, end_dim));
  std::vector<int64_t> out;
  int64_t merged = 1;
  for (int64_t d = 0; d < rank(); ++d) {
    if (d < s || d > e) out.push_back(shape()[static_cast<int>(d)]);
    else merged *= shape()[static_cast<int>(d)];
    if (d == e) out.push_back(merged);
  }
  return reshape(out);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  detail::require_defined("unsqueeze", *this);
  const int64_t d = detail::normalize_axis("unsqueeze", dim, *this, 1);
  std::vector<int64_t> out(shape().begin(), shape().end());
  out.insert(out.begin() + d, 1);
  return reshape(out);
}

Tensor Tensor::squeeze(int64_t dim) const {
  detail::require_defined("squeeze", *this);
  const int64_t d = detail::normalize_axis("squeeze", dim, *this);
  if (shape()[static_cast<int>(d)] != 1)
    detail::fail("squeeze", fmt::format("axis {} of {} has size {}, not 1", dim, detail::type_str(*this), shape()[static_cast<int>(d)]));
  std::vector<int64_t> out(shape().begin(), shape().end());
  out.erase(out.begin() + d);
  return reshape(out);
}

Tensor Tensor::squeeze() const {
  detail::require_defined("squeeze", *this);
  std::vector<int64_t> out;
  for (int64_t d : shape().dims())
    if (d != 1) out.push_back(d);
  return reshape(out);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) detail::fail("cat", "needs at least one tensor");
  Attrs a = Graph::make_attrs(OpKind::Concat);
  detail::attr_slot(a, OpKind::Concat, "axis").i = detail::normalize_axis("cat", dim, tensors[0]);
  std::vector<const Tensor*> operands;
  for (const Tensor& t : tensors) operands.push_back(&t);
  return record("cat", OpKind::Concat, operands, std::move(a));
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return x.gather(dim, index); }
Tensor take(const Tensor& x, const Tensor& indices, int64_t axis) { return x.take(indices, axis); }
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape) { return x.reshape(shape); }
Tensor permute(const Tensor& x, const Axes& perm) { return x.permute(perm); }
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) { return x.transpose(dim0, dim1); }
Tensor expand(const Tensor& x, const std::vector<int64_t>& shape) { return x.expand(shape); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { return x.flatten(start_dim, end_dim); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return x.unsqueeze(dim); }
Tensor squeeze(const Tensor& x, int64_t dim) { return x.squeeze(dim); }
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t stop, int64_t step) {
  return x.slice(dim, start, stop, step);
}
Tensor flip(const Tensor& x, const Axes& dims) { return x.flip(dims); }
Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, Number value) {
  return x.pad(low, high, value);
}

// ---- matmul -----------------------------------------------------------------------------

Tensor Tensor::matmul(const Tensor& other) const {
  detail::require_defined("matmul", *this);
  detail::require_defined("matmul", other);
  // NumPy: a 1-D left operand is a row, a 1-D right operand a column; both are removed again.
  const bool row = rank() == 1, col = other.rank() == 1;
  if (rank() == 0 || other.rank() == 0)
    detail::fail("matmul", fmt::format("operands must have rank 1 or more, got {} and {}", detail::type_str(*this),
                                       detail::type_str(other)));
  const Tensor a = row ? unsqueeze(0) : *this;
  const Tensor b = col ? other.unsqueeze(-1) : other;
  Tensor y = record("matmul", OpKind::Matmul, {&a, &b});
  if (col) y = y.squeeze(-1);
  if (row) y = y.squeeze(col ? -1 : -2);
  return y;
}

Tensor Tensor::conv(const Tensor& weight, const ConvOptions& options) const {
  detail::require_defined("conv", *this);
  detail::require_defined("conv", weight);
  const size_t dims = rank() >= 2 ? static_cast<size_t>(rank() - 2) : 0;
  auto per_dim = [&](const std::vector<int64_t>& given, int64_t fill) {
    return given.empty() ? std::vector<int64_t>(dims, fill) : given;
  };
  Attrs a = Graph::make_attrs(OpKind::Conv);
  auto ints = [&](const char* name, std::vector<int64_t> v) {
    AttrValue& slot = detail::attr_slot(a, OpKind::Conv, name);
    slot.present = true;
    slot.ints = std::move(v);
  };
  ints("strides", per_dim(options.strides, 1));
  if (!options.dilations.empty()) ints("dilations", options.dilations);
  ints("low", per_dim(options.pad_low, 0));
  ints("high", per_dim(options.pad_high, 0));
  if (options.groups != 1) {
    AttrValue& g = detail::attr_slot(a, OpKind::Conv, "groups");
    g.present = true;
    g.i = options.groups;
  }
  return record("conv", OpKind::Conv, {this, &weight}, std::move(a));
}

// ---- operators --------------------------------------------------------------------------

Tensor operator-(const Tensor& x) { return x.neg(); }
Tensor operator~(const Tensor& x) { return x.logical_not(); }
Tensor operator&(const Tensor& a, const Tensor& b) { return a.logical_and(b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return a.logical_or(b); }

#define KILN_OPERATOR(sym, method)                                              \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return a.method(b); } \
  Tensor operator sym(const Tensor& a, Number b) {                              \
    const Tensor t = weak_operand(a, b);                                        \
    return t.method(detail::scalar_for(#method, b, t));                         \
  }                                                                             \
  Tensor operator sym(Number a, const Tensor& b) {                              \
    const Tensor t = weak_operand(b, a);                                        \
    return detail::scalar_for(#method, a, t).method(t);                         \
  }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
KILN_OPERATOR(==, eq)
KILN_OPERATOR(!=, ne)
KILN_OPERATOR(<, lt)
KILN_OPERATOR(<=, le)
KILN_OPERATOR(>, gt)
KILN_OPERATOR(>=, ge)
#undef KILN_OPERATOR

}  // namespace kiln
