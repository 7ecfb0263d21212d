// ir/type_rules.cpp - result types of every operation (NumPy broadcasting and promotion).
//
// Each rule returns the result type or a message naming the op and the offending types.
// The verifier adds the source location; the frontend adds nothing, so the same message
// reaches a user whether they wrote IR text or C++.
#include "type_rules.h"

#include <algorithm>

#include <fmt/format.h>

#include "kiln/ir/conv.h"
#include "kiln/ir/custom_kernel.h"
#include "kiln/ir/dim.h"

namespace kiln::rules {
namespace {

std::string quoted(OpKind op) { return fmt::format("'{}'", op_name(op)); }

const AttrValue& attr(const TypeRuleInput& in, std::string_view name) {
  const int i = attr_index(in.op, name);
  KILN_ASSERT(i >= 0, "type rule reads an attribute its op's schema declares");
  return in.attrs[static_cast<size_t>(i)];
}

Diagnostic fail(std::string message) { return make_error(std::move(message)); }

std::string join_types(std::span<const TensorType> types, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) s += sep;
    s += types[i].str();
  }
  return s;
}

std::string ints_str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// Where broadcasting `a` with `b` fails on a symbolic dim: "cannot prove n == 3 (nor that
// either is 1)"; "" when the failing pair is two numbers.
std::string unproven_broadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == db || da == 1 || db == 1) continue;
    if (is_symbolic_dim(da) || is_symbolic_dim(db))
      return fmt::format(": cannot prove {} == {} (nor that either is 1)", dim_str(da), dim_str(db));
    return "";
  }
  return "";
}

Expected<Shape> broadcast_all(const TypeRuleInput& in) {
  Shape out = in.operands[0].shape;
  for (size_t i = 1; i < in.operands.size(); ++i) {
    auto b = broadcast_shapes(out, in.operands[i].shape);
    if (!b)
      return fail(fmt::format("{} operands {} cannot broadcast{}", quoted(in.op), join_types(in.operands, " and "),
                              unproven_broadcast(out, in.operands[i].shape)));
    out = *b;
  }
  return out;
}

// The message of an op that needs `axis` of `t` to be a number.
std::string symbolic_axis(OpKind op, const TensorType& t, int64_t axis) {
  return fmt::format("{} on axis {} of {}: that axis is symbolic ({}), and the op needs its size (bind it first)",
                     quoted(op), axis, t.str(), dim_str(t.shape[static_cast<int>(axis)]));
}

Status require_numeric(const TypeRuleInput& in) {
  for (const TensorType& t : in.operands)
    if (!is_numeric(t.dtype))
      return fail(fmt::format("{} expects a numeric operand, got {}", quoted(in.op), t.str()));
  return Status::ok();
}

// Arithmetic accepts bool mixed with a number (True + 0.5 is 1.5, as in NumPy) but not
// bool with bool, whose NumPy meaning (logical or for add) belongs to the logic ops.
Status require_numeric_result(const TypeRuleInput& in, DType promoted) {
  if (is_numeric(promoted)) return Status::ok();
  return fail(fmt::format("{} expects a numeric operand, got {} (use the logic ops on bool)",
                          quoted(in.op), join_types(in.operands, " and ")));
}

// u64 is held as its bits in 64-bit signed registers (compute_dtype). The ops that read
// those bits as any integer does work; so do its order (compares, max, min and their
// reductions, on keys with the top bit flipped: scalar::u64_order_key), its remainders and
// right shifts (scalar::binary_u64, built from int64 ops by lowering), and its conversion to
// a float, exactly rounded, wherever an op computes in one (as the cast op does). An integer
// power of u64 would read exponents from 2^63 up as negative, so it is refused rather than
// computed wrong.
Status refuse_u64(const TypeRuleInput& in, DType result) {
  static constexpr OpKind kWorks[] = {
      OpKind::Add,       OpKind::Sub,        OpKind::Mul,       OpKind::Neg,       OpKind::Shl,    OpKind::Shr,
      OpKind::Mod,       OpKind::Fmod,       OpKind::Where,     OpKind::Concat,    OpKind::Eq,     OpKind::Ne,
      OpKind::Lt,        OpKind::Le,         OpKind::Gt,        OpKind::Ge,        OpKind::Max,    OpKind::Min,
      OpKind::Abs,       OpKind::Relu,       OpKind::Sign,      OpKind::ReduceSum, OpKind::ReduceProd,
      OpKind::ReduceMax, OpKind::ReduceMin,  OpKind::ArgMax,    OpKind::ArgMin};
  for (size_t i = in.op == OpKind::Where ? 1 : 0; i < in.operands.size(); ++i) {
    const DType t = in.operands[i].dtype;
    if (t != DType::U64) continue;  // the common case: no search on the recording path
    const bool compare = in.op == OpKind::Eq || in.op == OpKind::Ne || in.op == OpKind::Lt || in.op == OpKind::Le ||
                         in.op == OpKind::Gt || in.op == OpKind::Ge;
    const DType domain = compare ? promote(in.operands[0].dtype, in.operands[1].dtype) : result;
    if (is_float(domain)) continue;  // converted to the float first
    if (std::find(std::begin(kWorks), std::end(kWorks), in.op) == std::end(kWorks))
      return fail(fmt::format("{} on u64 is not supported: kiln computes u64 in 64-bit signed registers, where it "
                              "would read values from 2^63 up as negative (cast to i64 or f64 first)",
                              quoted(in.op)));
    if (in.op == OpKind::ArgMax || in.op == OpKind::ArgMin) continue;  // a position, not a conversion
    if (domain != DType::U64)
      return fail(fmt::format("{} of {} would convert u64 to {}, which kiln does not support (cast explicitly)",
                              quoted(in.op), join_types(in.operands, " and "), dtype_name(domain)));
  }
  return Status::ok();
}

// A scalar attribute written for an element of `t`: integers need integral values.
Status check_scalar_fits(const TypeRuleInput& in, const Scalar& s, DType t, std::string_view what) {
  if (is_float(t)) return Status::ok();
  if (!s.is_int())
    return fail(fmt::format("{} {} for {} must be an integer, got {}", quoted(in.op), what,
                            dtype_name(t), format_scalar(s, DType::F64)));
  if (!(s.cast_to(t) == s))
    return fail(fmt::format("{} {} {} does not fit in {}", quoted(in.op), what, s.as_int(),
                            dtype_name(t)));
  return Status::ok();
}

// Checks `cond`; only when it fails is the message formatted (no string work on success:
// the frontend records ops through these rules on its hot path).
#define KILN_REQUIRE(cond, ...)                              \
  do {                                                       \
    if (!(cond)) return fail(fmt::format(__VA_ARGS__));      \
  } while (false)

#define KILN_TRY(expr)                             \
  do {                                             \
    if (Status st_ = (expr); !st_) return st_.error(); \
  } while (false)

}  // namespace

Expected<TensorType> rule_given(const TypeRuleInput& in) { return *in.declared; }

Expected<TensorType> rule_constant(const TypeRuleInput& in) {
  const TensorType& t = *in.declared;
  const AttrValue& value = attr(in, "value");
  const AttrValue& data = attr(in, "data");
  if (value.present == data.present)
    return fail("'constant' needs exactly one of 'value' (a scalar for every element) or "
                "'data' (one value per element)");
  if (value.present) {
    KILN_TRY(check_scalar_fits(in, value.scalar, t.dtype, "value"));
    return t;
  }
  KILN_REQUIRE(!t.shape.symbolic(), "'constant' data gives one value per element, so {} cannot be symbolic", t.str());
  const auto n = static_cast<int64_t>(data.scalars->size());
  if (n != t.shape.numel())
    return fail(fmt::format("'constant' data has {} values but {} holds {}", n, t.str(),
                            t.shape.numel()));
  for (const Scalar& s : *data.scalars) KILN_TRY(check_scalar_fits(in, s, t.dtype, "data"));
  return t;
}

Expected<TensorType> rule_arange(const TypeRuleInput& in) {
  const TensorType& t = *in.declared;
  KILN_REQUIRE(t.shape.rank() == 1 && is_numeric(t.dtype), "'arange' produces a 1-D numeric tensor, not {}", t.str());
  KILN_TRY(check_scalar_fits(in, attr(in, "start").scalar, t.dtype, "start"));
  KILN_TRY(check_scalar_fits(in, attr(in, "step").scalar, t.dtype, "step"));
  return t;
}

Expected<TensorType> rule_rand(const TypeRuleInput& in) {
  KILN_REQUIRE(is_float(in.declared->dtype), "'rand' produces floating point, not {}", in.declared->str());
  return *in.declared;
}

Expected<TensorType> rule_scalar_param(const TypeRuleInput& in) {
  const TensorType& t = *in.declared;
  const int64_t slot = attr(in, "slot").i;
  KILN_REQUIRE(slot >= 0, "'scalar' slot must be >= 0, got {}", slot);
  KILN_TRY(check_scalar_fits(in, attr(in, "value").scalar, t.dtype, "value"));
  return t;
}

Expected<TensorType> rule_unary_numeric(const TypeRuleInput& in) {
  KILN_TRY(require_numeric(in));
  KILN_TRY(refuse_u64(in, in.operands[0].dtype));
  return in.operands[0];
}

Expected<TensorType> rule_unary_float(const TypeRuleInput& in) {
  const TensorType& t = in.operands[0];
  KILN_REQUIRE(is_float(t.dtype), "{} expects a floating-point operand, got {} (cast it first)",
                               quoted(in.op), t.str());
  return t;
}

Expected<TensorType> rule_unary_bool(const TypeRuleInput& in) {
  const TensorType& t = in.operands[0];
  KILN_REQUIRE(is_bool(t.dtype), "{} expects a bool operand, got {}", quoted(in.op), t.str());
  return t;
}

Expected<TensorType> rule_float_predicate(const TypeRuleInput& in) {
  const TensorType& t = in.operands[0];
  KILN_REQUIRE(is_float(t.dtype), "{} expects a floating-point operand, got {} (cast it first)", quoted(in.op), t.str());
  return TensorType{DType::Bool, t.shape};
}

Expected<TensorType> rule_cast(const TypeRuleInput& in) {
  const TensorType& from = in.operands[0];
  KILN_REQUIRE(from.shape == in.declared->shape, "'cast' changes the element type only, not the shape: {} to {}",
                               from.str(), in.declared->str());
  return *in.declared;
}

Expected<TensorType> rule_arith(const TypeRuleInput& in) {
  const DType dtype = promote(in.operands[0].dtype, in.operands[1].dtype);
  KILN_TRY(require_numeric_result(in, dtype));
  KILN_TRY(refuse_u64(in, in.op == OpKind::Div || in.op == OpKind::Atan2 ? DType::F64 : dtype));
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{dtype, *shape};
}

Expected<TensorType> rule_div(const TypeRuleInput& in) {
  auto t = rule_arith(in);
  if (t && !is_float(t->dtype)) t->dtype = DType::F64;  // true division, as NumPy's '/'
  return t;
}

Expected<TensorType> rule_shift(const TypeRuleInput& in) {
  for (const TensorType& t : in.operands)
    KILN_REQUIRE(is_integer(t.dtype), "{} shifts integers, got {}", quoted(in.op), join_types(in.operands, " and "));
  const DType dtype = promote(in.operands[0].dtype, in.operands[1].dtype);
  KILN_REQUIRE(is_integer(dtype), "{} of {} would promote to {}: shift counts and values must promote to an integer "
               "type", quoted(in.op), join_types(in.operands, " and "), dtype_name(dtype));
  KILN_TRY(refuse_u64(in, dtype));
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{dtype, *shape};
}

Expected<TensorType> rule_compare(const TypeRuleInput& in) {
  KILN_TRY(refuse_u64(in, DType::Bool));
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{DType::Bool, *shape};
}

Expected<TensorType> rule_logic(const TypeRuleInput& in) {
  for (const TensorType& t : in.operands)
    KILN_REQUIRE(is_bool(t.dtype), "{} expects bool operands, got {}", quoted(in.op), t.str());
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{DType::Bool, *shape};
}

Expected<TensorType> rule_where(const TypeRuleInput& in) {
  KILN_REQUIRE(is_bool(in.operands[0].dtype), "'where' condition must be bool, got {}", in.operands[0].str());
  KILN_TRY(refuse_u64(in, promote(in.operands[1].dtype, in.operands[2].dtype)));
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{promote(in.operands[1].dtype, in.operands[2].dtype), *shape};
}

Expected<TensorType> rule_custom(const TypeRuleInput& in) {
  const CustomKernel* k = attr(in, "kernel").custom.get();
  KILN_REQUIRE(k != nullptr, "'custom' needs its kernel");
  const auto& params = k->signature.params;
  KILN_REQUIRE(in.operands.size() == params.size(), "custom @{} takes {} operand{} ({}), got {}", k->name, params.size(),
               params.size() == 1 ? "" : "s", k->signature.str(), in.operands.size());
  for (size_t i = 0; i < params.size(); ++i)
    KILN_REQUIRE(in.operands[i].dtype == params[i], "custom @{}: operand {} is {} but its signature {} wants {} (cast it)",
                 k->name, i + 1, in.operands[i].str(), k->signature.str(), dtype_name(params[i]));
  auto shape = broadcast_all(in);
  if (!shape) return shape.error();
  return TensorType{k->signature.result, *shape};
}

Expected<TensorType> rule_reduce(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const std::vector<int64_t>& axes = attr(in, "axes").ints;
  const bool keepdim = attr(in, "keepdim").present;
  const bool is_arg = in.op == OpKind::ArgMax || in.op == OpKind::ArgMin;
  KILN_REQUIRE(!axes.empty(), "{} needs at least one axis", quoted(in.op));
  KILN_REQUIRE(!is_arg || axes.size() == 1, "{} reduces exactly one axis, got {}", quoted(in.op), ints_str(axes));
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_REQUIRE(axes[i] >= 0 && axes[i] < x.shape.rank(), "{} axis {} is out of range for {}", quoted(in.op), axes[i], x.str());
    KILN_REQUIRE(i == 0 || axes[i] > axes[i - 1], "{} axes {} must be sorted and unique", quoted(in.op), ints_str(axes));
  }
  const bool needs_element = in.op != OpKind::ReduceSum && in.op != OpKind::ReduceProd;
  Shape out;
  for (int d = 0; d < x.shape.rank(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (reduced && needs_element && x.shape[d] == 0)
      return fail(fmt::format("{} of {} reduces an empty axis {}, which has no {}", quoted(in.op),
                              x.str(), d, is_arg ? "position" : "identity"));
    if (!reduced) out.push_back(x.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  // Sums and products of integers narrower than 64 bits are i64, as NumPy's (whose unsigned
  // sums are u64; every such sum fits in i64 as well).
  DType dtype = x.dtype;
  if (is_arg) dtype = DType::I64;
  else if (!needs_element && (is_bool(x.dtype) || (is_integer(x.dtype) && dtype_size(x.dtype) < 8))) dtype = DType::I64;
  KILN_TRY(refuse_u64(in, dtype));
  return TensorType{dtype, out};
}

Expected<TensorType> rule_reshape(const TypeRuleInput& in) {
  const TensorType &x = in.operands[0], &to = *in.declared;
  KILN_REQUIRE(valid_shape(to.shape), "'reshape' target {} has a negative dimension or too many elements", to.str());
  KILN_REQUIRE(x.dtype == to.dtype, "'reshape' keeps the element type: {} to {}", x.str(), to.str());
  KILN_REQUIRE(valid_shape(x.shape) && x.shape.numel() == to.shape.numel(),
               "'reshape' cannot reshape {} ({} elements) to {} ({} elements){}", x.str(),
               dim_str(x.shape.numel()), to.str(), dim_str(to.shape.numel()),
               x.shape.symbolic() || to.shape.symbolic() ? ": the counts are not provably equal" : "");
  return to;
}

Expected<TensorType> rule_permute(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const std::vector<int64_t>& perm = attr(in, "perm").ints;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(perm.size()) == x.shape.rank();
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
  KILN_REQUIRE(ok, "'permute' perm {} is not a permutation of the {} axes of {}",
                                   ints_str(perm), x.shape.rank(), x.str());
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[static_cast<int>(p)]);
  return TensorType{x.dtype, out};
}

Expected<TensorType> rule_expand(const TypeRuleInput& in) {
  const TensorType &x = in.operands[0], &to = *in.declared;
  KILN_REQUIRE(valid_shape(to.shape), "'expand' target {} has a negative dimension or too many elements", to.str());
  KILN_REQUIRE(x.dtype == to.dtype, "'expand' keeps the element type: {} to {}", x.str(), to.str());
  bool ok = x.shape.rank() <= to.shape.rank();
  for (int i = 0; ok && i < x.shape.rank(); ++i) {
    const int64_t d = x.shape[i], t = to.shape[i + to.shape.rank() - x.shape.rank()];
    ok = d == t || d == 1;
  }
  KILN_REQUIRE(ok, "'expand' cannot broadcast {} to {}{}", x.str(), to.str(), unproven_broadcast(x.shape, to.shape));
  return to;
}

Expected<TensorType> rule_slice(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const int rank = x.shape.rank();
  const auto& start = attr(in, "start").ints;
  const auto& stop = attr(in, "stop").ints;
  const AttrValue& step_attr = attr(in, "step");
  const std::vector<int64_t> step = step_attr.present ? step_attr.ints : std::vector<int64_t>(static_cast<size_t>(rank), 1);
  KILN_REQUIRE(static_cast<int>(start.size()) == rank && static_cast<int>(stop.size()) == rank &&
                       static_cast<int>(step.size()) == rank, "'slice' start, stop and step need one entry per axis of {}", x.str());
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const auto i = static_cast<size_t>(d);
    KILN_REQUIRE(step[i] != 0, "'slice' step on axis {} is 0 (it must be positive, or negative to reverse)", d);
    if (is_symbolic_dim(x.shape[d]) || is_symbolic_dim(start[i]) || is_symbolic_dim(stop[i])) {
      // Bounds with symbolic dims are checked once the sizes are bound (the bound graph is
      // verified again); the length is the difference.
      KILN_REQUIRE(step[i] == 1, "'slice' on axis {} of {} from {} to {} steps by {}: a range with symbolic dims "
                   "steps by 1", d, x.str(), dim_str(start[i]), dim_str(stop[i]), step[i]);
      const std::optional<int64_t> length = dim_sub(stop[i], start[i]);
      KILN_REQUIRE(length.has_value() && (is_symbolic_dim(*length) || *length >= 0),
                   "'slice' range [{}, {}) on axis {} of {} is empty backwards", dim_str(start[i]), dim_str(stop[i]),
                   d, x.str());
      out.push_back(*length);
      continue;
    }
    if (step[i] > 0) {
      KILN_REQUIRE(start[i] <= stop[i], "'slice' start {} is after stop {} on axis {}", start[i], stop[i], d);
      KILN_REQUIRE(0 <= start[i] && stop[i] <= x.shape[d], "'slice' range [{}, {}) on axis {} is outside 0..{} of {}",
                   start[i], stop[i], d, x.shape[d], x.str());
      out.push_back(stop[i] > start[i] ? (stop[i] - start[i] - 1) / step[i] + 1 : 0);  // no overflow
    } else {
      // Walking down: start, start + step, ... while above stop; stop = -1 reaches index 0.
      KILN_REQUIRE(stop[i] <= start[i], "'slice' start {} is below stop {} on axis {}, and step {} walks down", start[i],
                   stop[i], d, step[i]);
      KILN_REQUIRE(-1 <= stop[i] && start[i] < x.shape[d], "'slice' range ({}, {}] on axis {} is outside -1..{} of {}",
                   stop[i], start[i], d, x.shape[d] - 1, x.str());
      // |step| as unsigned (step may be INT64_MIN); start - stop - 1 <= start cannot overflow.
      const uint64_t magnitude = static_cast<uint64_t>(-(step[i] + 1)) + 1;
      out.push_back(start[i] > stop[i]
                        ? static_cast<int64_t>(static_cast<uint64_t>(start[i] - stop[i] - 1) / magnitude) + 1
                        : 0);
    }
  }
  return TensorType{x.dtype, out};
}

Expected<TensorType> rule_unfold(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const int64_t axis = attr(in, "axis").i, size = attr(in, "size").i, step = attr(in, "step").i;
  const AttrValue& dil = attr(in, "dilation");
  const int64_t dilation = dil.present ? dil.i : 1;
  KILN_REQUIRE(0 <= axis && axis < x.shape.rank(), "'unfold' axis {} is not an axis of {}", axis, x.str());
  KILN_REQUIRE(x.shape.rank() < Shape::kMaxRank, "'unfold' of {} would pass the maximum rank {}", x.str(), Shape::kMaxRank);
  KILN_REQUIRE(size >= 1 && step >= 1 && dilation >= 1, "'unfold' size {}, step {} and dilation {} must be at least 1",
               size, step, dilation);
  KILN_REQUIRE(!is_symbolic_dim(x.shape[static_cast<int>(axis)]), "{}", symbolic_axis(in.op, x, axis));
  const int64_t n = x.shape[static_cast<int>(axis)];
  // The span of one window, (size - 1) * dilation + 1, without overflow.
  KILN_REQUIRE(size - 1 <= (n - 1) / dilation && n >= 1,
               "'unfold' windows of {} elements, {} apart, do not fit the {} elements of axis {} of {}", size, dilation, n,
               axis, x.str());
  const int64_t span = (size - 1) * dilation + 1;
  Shape out;
  for (int d = 0; d < x.shape.rank(); ++d) out.push_back(d == axis ? (n - span) / step + 1 : x.shape[d]);
  out.push_back(size);
  return TensorType{x.dtype, out};
}

Expected<TensorType> rule_pad(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const auto& low = attr(in, "low").ints;
  const auto& high = attr(in, "high").ints;
  const int rank = x.shape.rank();
  KILN_REQUIRE(static_cast<int>(low.size()) == rank && static_cast<int>(high.size()) == rank, "'pad' low and high need one entry per axis of {}", x.str());
  if (attr(in, "value").present) KILN_TRY(check_scalar_fits(in, attr(in, "value").scalar, x.dtype, "value"));
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const auto i = static_cast<size_t>(d);
    KILN_REQUIRE(low[i] >= 0 && high[i] >= 0, "'pad' amounts must be non-negative, got low {} high {}",
                                 ints_str(low), ints_str(high));
    std::optional<int64_t> dim = dim_add(x.shape[d], low[i]);
    if (dim) dim = dim_add(*dim, high[i]);
    if (!dim)
      return fail(fmt::format("'pad' of {} by low {} high {} overflows int64 on axis {}", x.str(),
                              ints_str(low), ints_str(high), d));
    out.push_back(*dim);
  }
  return TensorType{x.dtype, out};
}

Expected<TensorType> rule_concat(const TypeRuleInput& in) {
  const TensorType& first = in.operands[0];
  const int64_t axis = attr(in, "axis").i;
  KILN_REQUIRE(axis >= 0 && axis < first.shape.rank(), "'concat' axis {} is out of range for {}", axis, first.str());
  Shape out = first.shape;
  DType dtype = first.dtype;
  for (size_t k = 1; k < in.operands.size(); ++k) {
    const TensorType& t = in.operands[k];
    bool ok = t.shape.rank() == first.shape.rank();
    for (int d = 0; ok && d < t.shape.rank(); ++d) ok = d == axis || t.shape[d] == first.shape[d];
    KILN_REQUIRE(ok, "'concat' operands {} differ outside axis {}",
                                     join_types(in.operands, " and "), axis);
    int64_t& dim = out[static_cast<int>(axis)];
    const std::optional<int64_t> sum = dim_add(dim, t.shape[static_cast<int>(axis)]);
    if (!sum)
      return fail(fmt::format("'concat' of {} overflows int64 on axis {}", join_types(in.operands, " and "), axis));
    dim = *sum;
    dtype = promote(dtype, t.dtype);
  }
  KILN_TRY(refuse_u64(in, dtype));
  return TensorType{dtype, out};
}

// What gather and scatter share: indices of i32 or i64, of the data's rank, no longer than
// the data off the axis they index along (`moved`: "gathered", "scattered").
Status require_indexing(const TypeRuleInput& in, std::string_view moved) {
  const TensorType &data = in.operands[0], &index = in.operands[1];
  const int64_t axis = attr(in, "axis").i;
  KILN_REQUIRE(index.dtype == DType::I32 || index.dtype == DType::I64, "{} indices must be i32 or i64, got {}",
               quoted(in.op), index.str());
  KILN_REQUIRE(data.shape.rank() == index.shape.rank(), "{} indices {} and data {} must have the same rank",
               quoted(in.op), index.str(), data.str());
  KILN_REQUIRE(0 <= axis && axis < data.shape.rank(), "{} axis {} is not an axis of {}", quoted(in.op), axis,
               data.str());
  for (int d = 0; d < data.shape.rank(); ++d)
    KILN_REQUIRE(d == axis || is_symbolic_dim(index.shape[d]) || is_symbolic_dim(data.shape[d]) ||
                     index.shape[d] <= data.shape[d],  // symbolic: checked once bound
                 "{} indices {} are longer than data {} on axis {}, which is not the {} axis {}", quoted(in.op),
                 index.str(), data.str(), d, moved, axis);
  return Status::ok();
}

Expected<TensorType> rule_gather(const TypeRuleInput& in) {
  KILN_TRY(require_indexing(in, "gathered"));
  return TensorType{in.operands[0].dtype, in.operands[1].shape};
}

Expected<TensorType> rule_scatter(const TypeRuleInput& in) {
  KILN_TRY(require_indexing(in, "scattered"));
  const TensorType &data = in.operands[0], &index = in.operands[1], &updates = in.operands[2];
  KILN_REQUIRE(updates.shape == index.shape && updates.dtype == data.dtype,
               "'scatter' updates {} must have the indices' shape {} and the data's dtype {}", updates.str(),
               index.shape.str(), dtype_name(data.dtype));
  int combines = 0;
  for (const char* c : {"add", "mul", "max", "min"}) combines += attr(in, c).present ? 1 : 0;
  KILN_REQUIRE(combines <= 1, "'scatter' takes at most one of add, mul, max and min");
  KILN_REQUIRE(combines == 0 || is_numeric(data.dtype), "'scatter' combines numbers, not {}", data.str());
  return data;
}

Expected<TensorType> rule_cumsum(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const int64_t axis = attr(in, "axis").i;
  KILN_REQUIRE(axis >= 0 && axis < x.shape.rank(), "'cumsum' axis {} is out of range for {}", axis, x.str());
  const bool widen = is_bool(x.dtype) || (is_integer(x.dtype) && dtype_size(x.dtype) < 8);
  return TensorType{widen ? DType::I64 : x.dtype, x.shape};
}

Expected<TensorType> rule_argsort(const TypeRuleInput& in) {
  const TensorType& x = in.operands[0];
  const int64_t axis = attr(in, "axis").i;
  KILN_REQUIRE(axis >= 0 && axis < x.shape.rank(), "'argsort' axis {} is out of range for {}", axis, x.str());
  return TensorType{DType::I64, x.shape};
}

Expected<TensorType> rule_matmul(const TypeRuleInput& in) {
  const TensorType &a = in.operands[0], &b = in.operands[1];
  KILN_TRY(require_numeric_result(in, promote(a.dtype, b.dtype)));
  KILN_REQUIRE(a.shape.rank() >= 2 && b.shape.rank() >= 2, "'matmul' needs operands of rank 2 or more, got {} and {}", a.str(), b.str());
  const int ra = a.shape.rank(), rb = b.shape.rank();
  KILN_REQUIRE(a.shape[ra - 1] == b.shape[rb - 2], "'matmul' contracting dims differ: {} and {} ({} vs {}{})", a.str(),
               b.str(), dim_str(a.shape[ra - 1]), dim_str(b.shape[rb - 2]),
               is_symbolic_dim(a.shape[ra - 1]) || is_symbolic_dim(b.shape[rb - 2]) ? ", not provably equal" : "");
  const Shape batch_a(a.shape.dims().first(static_cast<size_t>(ra - 2)));
  const Shape batch_b(b.shape.dims().first(static_cast<size_t>(rb - 2)));
  auto batch = broadcast_shapes(batch_a, batch_b);
  KILN_REQUIRE(batch.has_value(), "'matmul' batch dims of {} and {} cannot broadcast{}", a.str(), b.str(),
               unproven_broadcast(batch_a, batch_b));
  Shape out = *batch;
  out.push_back(a.shape[ra - 2]);
  out.push_back(b.shape[rb - 1]);
  return TensorType{promote(a.dtype, b.dtype), out};
}

Expected<TensorType> rule_conv(const TypeRuleInput& in) {
  const TensorType &x = in.operands[0], &w = in.operands[1];
  KILN_REQUIRE(x.dtype == w.dtype && is_numeric(x.dtype), "'conv' needs numeric operands of one type, got {} and {}",
               x.str(), w.str());
  Expected<ConvGeometry> g = conv_geometry(x.shape, w.shape, in.attrs);
  if (!g) return g.error();
  return TensorType{x.dtype, g->out_shape()};
}

}  // namespace kiln::rules

namespace kiln::rules {

Expected<TensorType> rule_attention(const TypeRuleInput& in) {
  const size_t n = in.operands.size();
  KILN_REQUIRE(n == 3 || n == 4, "'attention' takes q, k, v and an optional bias, got {} operands", n);
  for (const TensorType& t : in.operands)
    KILN_REQUIRE(t.dtype == DType::F32 && t.shape.rank() >= 2,
                 "'attention' needs f32 operands of rank 2 or more, got {}", t.str());
  const TensorType &q = in.operands[0], &k = in.operands[1], &v = in.operands[2];
  const int rq = q.shape.rank(), rk = k.shape.rank(), rv = v.shape.rank();
  KILN_REQUIRE(q.shape[rq - 1] == k.shape[rk - 1], "'attention' q {} and k {} differ in depth", q.str(), k.str());
  KILN_REQUIRE(k.shape[rk - 2] == v.shape[rv - 2], "'attention' k {} and v {} differ in keys", k.str(), v.str());
  auto batch_of = [](const Shape& s) { return Shape(s.dims().first(static_cast<size_t>(s.rank() - 2))); };
  std::optional<Shape> batch = broadcast_shapes(batch_of(q.shape), batch_of(k.shape));
  if (batch) batch = broadcast_shapes(*batch, batch_of(v.shape));
  KILN_REQUIRE(batch.has_value(), "'attention' batch dims of {}, {} and {} cannot broadcast", q.str(), k.str(),
               v.str());
  Shape scores = *batch;
  scores.push_back(q.shape[rq - 2]);
  scores.push_back(k.shape[rk - 2]);
  if (n == 4) {
    const std::optional<Shape> with_bias = broadcast_shapes(scores, in.operands[3].shape);
    KILN_REQUIRE(with_bias && *with_bias == scores, "'attention' bias {} does not broadcast to the scores {}",
                 in.operands[3].str(), TensorType{DType::F32, scores}.str());
  }
  Shape out = *batch;
  out.push_back(q.shape[rq - 2]);
  out.push_back(v.shape[rv - 1]);
  return TensorType{DType::F32, out};
}

}  // namespace kiln::rules
