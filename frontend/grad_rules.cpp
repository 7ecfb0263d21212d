// frontend/grad_rules.cpp - the reverse-mode rule of every op that ops.def names one for.
//
// A rule maps the gradient of an op's result to the gradients of its operands, written with
// tensor ops: what it records joins the pending stream, fuses and caches like the forward.
// Each rule reads only the operands its GradRule says it saves; a value it needs that the
// forward computed (exp(x), a reduction's maximum) it computes again from those, which costs
// nothing when forward and backward run as one plan (CSE merges the two) and little when not
// (it is elementwise). Results that broadcast go back to their operands' shapes by sum_to.
// Tests: tests/unit/autodiff_test.cpp checks every rule against finite differences.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "grad.h"
#include "kiln/ir/graph.h"
#include "lazy_value.h"
#include "record.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

const AttrValue& attr(const GradInput& in, std::string_view name) {
  const int i = attr_index(in.op, name);
  KILN_ASSERT(i >= 0, "the op's schema has the attribute");
  return in.attrs[static_cast<size_t>(i)];
}

std::vector<int64_t> dims(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

Tensor zeros_of(const TensorType& t, Device device) { return kiln::zeros(t.shape, t.dtype, device); }
Tensor zero_scalar(const Tensor& like) { return kiln::zeros({}, like.dtype(), like.device()); }
Tensor one_scalar(const Tensor& like) { return kiln::ones({}, like.dtype(), like.device()); }

// A float mask of `cond` in the gradient's dtype.
Tensor mask(const Tensor& cond, const Tensor& like) { return cond.to(like.dtype()); }

// ---- helpers for movement ops ------------------------------------------------------------

/// Zeros of length `n` along `axis`, with g's elements at start, start + step, ... (step > 0):
/// the adjoint of a slice.
Tensor unslice(const Tensor& g, int64_t axis, int64_t start, int64_t step, int64_t n) {
  const int64_t m = g.size(axis);
  const auto a = static_cast<size_t>(axis);
  if (m == 0) {
    std::vector<int64_t> shape = dims(g.shape());
    shape[a] = n;
    return kiln::zeros(Shape(shape), g.dtype(), g.device());
  }
  Tensor t = g;
  if (step > 1) {
    // Interleave step - 1 zeros after each element: [.., m, ..] -> [.., m, step, ..] -> [.., m * step, ..].
    std::vector<int64_t> low(static_cast<size_t>(g.rank() + 1), 0), high(low);
    high[a + 1] = step - 1;
    t = t.unsqueeze(axis + 1).pad(low, high);
    std::vector<int64_t> merged = dims(g.shape());
    merged[a] = m * step;
    t = t.reshape(merged).slice(axis, 0, std::min(m * step, n - start));
  }
  std::vector<int64_t> low(static_cast<size_t>(g.rank()), 0), high(low);
  low[a] = start;
  high[a] = n - start - t.size(axis);
  return t.pad(low, high);
}

/// Zeros `s - 1` between the elements along `axis`: a strided conv's output spread back onto
/// the positions it was taken at.
Tensor dilate(const Tensor& g, int64_t axis, int64_t s) {
  if (s == 1 || g.size(axis) == 0) return g;
  return unslice(g, axis, 0, s, (g.size(axis) - 1) * s + 1);
}

/// A reduction's gradient broadcast back over the axes it reduced.
Tensor unreduce(const GradInput& in, const Tensor& g) {
  const TensorType& x = in.operand_types[0];
  Tensor r = g;
  if (!attr(in, "keepdim").present) {
    std::vector<int64_t> shape = dims(x.shape);
    for (int64_t a : attr(in, "axes").ints) shape[static_cast<size_t>(a)] = 1;
    r = r.reshape(shape);
  }
  return r.expand(dims(x.shape));
}

Axes reduce_axes(const GradInput& in) {
  const auto& a = attr(in, "axes").ints;
  return Axes(a.begin(), a.end());
}

// ---- elementwise -------------------------------------------------------------------------

#define KILN_UNARY_RULE(name, expr)                        \
  Grads name(const GradInput& in) {                        \
    [[maybe_unused]] const Tensor& x = in.saved[0];        \
    const Tensor& g = in.grad;                             \
    return {expr};                                         \
  }
KILN_UNARY_RULE(neg_backward, -g)
KILN_UNARY_RULE(abs_backward, g * x.sign())
KILN_UNARY_RULE(exp_backward, g * x.exp())
KILN_UNARY_RULE(log_backward, g / x)
KILN_UNARY_RULE(sqrt_backward, g / (x.sqrt() * 2))
KILN_UNARY_RULE(rsqrt_backward, g * x.rsqrt() / x * -0.5)
KILN_UNARY_RULE(sin_backward, g * x.cos())
KILN_UNARY_RULE(cos_backward, -(g * x.sin()))
KILN_UNARY_RULE(tanh_backward, g * (1 - x.tanh() * x.tanh()))
KILN_UNARY_RULE(asin_backward, g * (1 - x * x).rsqrt())
KILN_UNARY_RULE(acos_backward, -(g * (1 - x * x).rsqrt()))
KILN_UNARY_RULE(atan_backward, g / (x * x + 1))
KILN_UNARY_RULE(sigmoid_backward, g * x.sigmoid() * (1 - x.sigmoid()))
KILN_UNARY_RULE(relu_backward, kiln::where(x > 0, g, zero_scalar(g)))
KILN_UNARY_RULE(erf_backward, g * (-(x * x)).exp() * (2 / std::sqrt(std::numbers::pi)))
#undef KILN_UNARY_RULE

Grads zero_backward(const GradInput& in) { return {zeros_of(in.operand_types[0], in.device)}; }

Grads cast_backward(const GradInput& in) {
  const TensorType& x = in.operand_types[0];
  return {is_float(x.dtype) ? in.grad.to(x.dtype) : Tensor()};
}

// Operand i as the op computed with it: converted to the result's type (a bool or integer
// operand of a float op, an f32 one of an f64 op).
Tensor promoted(const GradInput& in, size_t i) {
  const Tensor& t = in.saved[i];
  return t.dtype() == in.result_type.dtype ? t : t.to(in.result_type.dtype);
}

// Binary ops: gradients in the result's (promoted) type, summed back to each operand.
Grads binary(const GradInput& in, const Tensor& da, const Tensor& db) {
  return {in.wants(0) ? sum_to(da, in.operand_types[0]) : Tensor(),
          in.wants(1) ? sum_to(db, in.operand_types[1]) : Tensor()};
}

Grads add_backward(const GradInput& in) { return binary(in, in.grad, in.grad); }
Grads sub_backward(const GradInput& in) { return binary(in, in.grad, in.wants(1) ? -in.grad : Tensor()); }

Grads mul_backward(const GradInput& in) {
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  return binary(in, in.wants(0) ? g * b : Tensor(), in.wants(1) ? g * a : Tensor());
}

Grads div_backward(const GradInput& in) {
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  return binary(in, in.wants(0) ? g / b : Tensor(), in.wants(1) ? -(g * a / (b * b)) : Tensor());
}

Grads pow_backward(const GradInput& in) {
  // PyTorch's conventions where the formula is 0 * inf: an exponent of 0 passes nothing to
  // the base, a base of 0 nothing to the exponent.
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  Tensor da, db;
  if (in.wants(0)) da = kiln::where(b == 0, zero_scalar(g), g * b * a.pow(b - 1));
  if (in.wants(1)) db = kiln::where(a == 0, zero_scalar(g), g * a.pow(b) * a.log());
  return binary(in, da, db);
}

Grads mod_backward(const GradInput& in) {
  // a - floor(a / b) * b
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  return binary(in, g, in.wants(1) ? -(g * (a / b).floor()) : Tensor());
}

Grads fmod_backward(const GradInput& in) {
  // a - trunc(a / b) * b
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  Tensor db;
  if (in.wants(1)) {
    const Tensor q = a / b;
    db = -(g * q.sign() * q.abs().floor());
  }
  return binary(in, g, db);
}

Grads atan2_backward(const GradInput& in) {
  // atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)
  const Tensor y = promoted(in, 0), x = promoted(in, 1), &g = in.grad;
  const Tensor r = g / (x * x + y * y);
  return binary(in, in.wants(0) ? r * x : Tensor(), in.wants(1) ? -(r * y) : Tensor());
}

// maximum and minimum: the gradient goes to the operand chosen, split evenly on a tie (as
// PyTorch's).
Grads extremum_backward(const GradInput& in, const Tensor& a_wins) {
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  const Tensor share = kiln::where(a_wins, one_scalar(g), kiln::where(a == b, one_scalar(g) * 0.5, zero_scalar(g)));
  return binary(in, in.wants(0) ? g * share : Tensor(), in.wants(1) ? g * (1 - share) : Tensor());
}
Grads max_backward(const GradInput& in) { return extremum_backward(in, promoted(in, 0) > promoted(in, 1)); }
Grads min_backward(const GradInput& in) { return extremum_backward(in, promoted(in, 0) < promoted(in, 1)); }

Grads where_backward(const GradInput& in) {
  const Tensor &c = in.saved[0], &g = in.grad;
  const Tensor z = zero_scalar(g);
  return {Tensor(), in.wants(1) ? sum_to(kiln::where(c, g, z), in.operand_types[1]) : Tensor(),
          in.wants(2) ? sum_to(kiln::where(c, z, g), in.operand_types[2]) : Tensor()};
}

Grads custom_backward_rule(const GradInput& in) {
  const CustomKernel& kernel = *attr(in, "kernel").custom;
  const CustomBackward* backward = custom_backward(kernel);
  if (!backward)
    throw Error(fmt::format("backward: custom op @{} has no gradient; give it one with CustomOp::set_backward "
                            "(docs/autodiff.md)",
                            kernel.name));
  const std::vector<Tensor> operands(in.saved.begin(), in.saved.end());
  Grads user = (*backward)(operands, in.grad);
  if (user.size() != operands.size())
    throw Error(fmt::format("backward: the backward of custom op @{} gave {} gradients for {} operands", kernel.name,
                            user.size(), operands.size()));
  Grads out(operands.size());
  for (size_t i = 0; i < user.size(); ++i) {
    if (!in.wants(i) || !user[i].defined()) continue;
    const bool fits = user[i].dtype() == in.operand_types[i].dtype &&
                      (user[i].shape() == in.operand_types[i].shape || user[i].shape() == in.result_type.shape);
    if (!fits)
      throw Error(fmt::format("backward: the backward of custom op @{} gave {} for its operand {} of {} (the "
                              "operand's shape or the result's {}, and its dtype)",
                              kernel.name, type_str(user[i]), i, in.operand_types[i].str(), in.result_type.str()));
    out[i] = sum_to(user[i], in.operand_types[i]);
  }
  return out;
}

// ---- reductions --------------------------------------------------------------------------

Grads reduce_sum_backward(const GradInput& in) { return {unreduce(in, in.grad)}; }

Grads reduce_prod_backward(const GradInput& in) {
  // d/dx_i of the product is the product of the others: y / x_i when no element is 0; with
  // one zero, the product of the rest at that zero and 0 elsewhere; with two, 0 everywhere.
  const Tensor &x = in.saved[0], g = unreduce(in, in.grad);
  const Axes axes = reduce_axes(in);
  const Tensor is_zero = x == 0;
  const Tensor zeros = mask(is_zero, x).sum(axes, true);
  const Tensor rest = kiln::where(is_zero, one_scalar(x), x).prod(axes, true);
  const Tensor z = zero_scalar(x);
  const Tensor others = kiln::where(is_zero, kiln::where(zeros == 1, rest, z), kiln::where(zeros == 0, rest / x, z));
  return {g * others};
}

Grads reduce_extremum_backward(const GradInput& in) {
  // To the first element of each reduced window that holds the extremum, found by an arg
  // reduction over the window flattened: exactly one element, as torch.max(dim)'s and max
  // pooling's backward (torch.amax splits a tie evenly instead). Not `x == max(x)`: fusion
  // may compute x in one kernel and the maximum from x computed in another, and a last-bit
  // difference would then select no element at all, and divide by a count of 0.
  const Tensor& x = in.saved[0];
  const Axes axes = reduce_axes(in);
  const int rank = x.rank();
  Axes perm;
  std::vector<int64_t> kept_then_window;
  int64_t window = 1;
  for (int d = 0; d < rank; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      kept_then_window.push_back(x.size(d));
    }
  std::vector<int64_t> flat = kept_then_window;
  for (int64_t a : axes) {
    perm.push_back(a);
    kept_then_window.push_back(x.size(a));
    window *= x.size(a);
  }
  flat.push_back(window);
  const Tensor windows = x.permute(perm).reshape(flat);
  const Tensor at = in.op == OpKind::ReduceMax ? windows.argmax(-1, true) : windows.argmin(-1, true);
  const Tensor chosen = kiln::arange(window, DType::I64, in.device) == at;
  std::vector<int64_t> kept_one = flat, keepdim_shape = dims(x.shape());
  kept_one.back() = 1;
  for (int64_t a : axes) keepdim_shape[static_cast<size_t>(a)] = 1;
  const Tensor g = in.grad.reshape(keepdim_shape).permute(perm).reshape(kept_one);
  Axes inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {kiln::where(chosen, g, zero_scalar(g)).reshape(kept_then_window).permute(inverse)};
}

// ---- movement ----------------------------------------------------------------------------

Grads reshape_backward(const GradInput& in) { return {in.grad.reshape(dims(in.operand_types[0].shape))}; }

Grads permute_backward(const GradInput& in) {
  const auto& perm = attr(in, "perm").ints;
  Axes inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {in.grad.permute(inverse)};
}

Grads expand_backward(const GradInput& in) { return {sum_to(in.grad, in.operand_types[0])}; }

Grads slice_backward(const GradInput& in) {
  const auto& start = attr(in, "start").ints;
  const AttrValue& step_attr = attr(in, "step");
  const Shape& x = in.operand_types[0].shape;
  Tensor g = in.grad;
  for (int d = 0; d < x.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    const int64_t step = step_attr.present ? step_attr.ints[i] : 1;
    const int64_t m = g.size(d);
    if (step == 1 && start[i] == 0 && m == x[d]) continue;
    if (step > 0) {
      g = unslice(g, d, start[i], step, x[d]);
    } else {
      // Walking down from start: the same elements, upwards from the last one taken.
      const int64_t first = m == 0 ? 0 : start[i] + (m - 1) * step;
      g = unslice(g.flip({d}), d, first, -step, x[d]);
    }
  }
  return {g};
}

Grads pad_backward(const GradInput& in) {
  const auto& low = attr(in, "low").ints;
  const Shape& x = in.operand_types[0].shape;
  Tensor g = in.grad;
  for (int d = 0; d < x.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    if (g.size(d) != x[d]) g = g.slice(d, low[i], low[i] + x[d]);
  }
  return {g};
}

Grads unfold_backward(const GradInput& in) {
  // Window w's element k came from position w * step + k * dilation: each k is a strided
  // slice of the operand, and the windows' overlaps add up.
  const int64_t axis = attr(in, "axis").i, size = attr(in, "size").i, step = attr(in, "step").i;
  const int64_t dilation = attr(in, "dilation").present ? attr(in, "dilation").i : 1;
  const int64_t n = in.operand_types[0].shape[static_cast<int>(axis)];
  Tensor sum;
  for (int64_t k = 0; k < size; ++k) {
    const Tensor part = unslice(in.grad.slice(-1, k, k + 1).squeeze(-1), axis, k * dilation, step, n);
    sum = sum.defined() ? sum + part : part;
  }
  return {sum.defined() ? sum : zeros_of(in.operand_types[0], in.device)};
}

Grads concat_backward(const GradInput& in) {
  const int64_t axis = attr(in, "axis").i;
  Grads out;
  int64_t offset = 0;
  for (size_t i = 0; i < in.operand_types.size(); ++i) {
    const int64_t n = in.operand_types[i].shape[static_cast<int>(axis)];
    // Operands of several types were promoted to one: each gradient goes back to its own.
    out.push_back(in.wants(i) ? in.grad.slice(axis, offset, offset + n).to(in.operand_types[i].dtype) : Tensor());
    offset += n;
  }
  return out;
}

Grads gather_backward(const GradInput& in) {
  // Every read adds its gradient where it read; an index outside the axis read 0 (no
  // gradient), and scatter drops it the same way.
  const int64_t axis = attr(in, "axis").i;
  return {zeros_of(in.operand_types[0], in.device).scatter_add(axis, in.saved[1], in.grad), Tensor()};
}

Grads scatter_backward(const GradInput& in) {
  const int64_t axis = attr(in, "axis").i;
  const Tensor &data = in.saved[0], &index = in.saved[1], &updates = in.saved[2], &g = in.grad;
  const TensorType& ut = in.operand_types[2];
  Tensor dd, du;
  if (attr(in, "add").present) {
    dd = g;
    du = g.gather(axis, index);
  } else if (attr(in, "mul").present) {
    // The gradient at p is the product of what else met there: the updates' product for
    // the data (exact with zeros); for an update, y / update, or where the update is 0, the
    // product of the rest when it is the only zero there.
    const Tensor ones = kiln::ones(data.shape(), data.dtype(), data.device());
    if (in.wants(0)) dd = g * ones.scatter_reduce(axis, index, updates, ScatterReduce::Prod);
    if (in.wants(2)) {
      const Tensor y = data.scatter_reduce(axis, index, updates, ScatterReduce::Prod);
      const Tensor u_zero = updates == 0;
      const Tensor zeros_at = mask(data == 0, data).scatter_add(axis, index, mask(u_zero, updates));
      const Tensor rest = kiln::where(data == 0, one_scalar(data), data)
                              .scatter_reduce(axis, index, kiln::where(u_zero, one_scalar(updates), updates),
                                              ScatterReduce::Prod);
      const Tensor z = zero_scalar(updates);
      du = g.gather(axis, index) *
           kiln::where(u_zero, kiln::where(zeros_at.gather(axis, index) == 1, rest.gather(axis, index), z),
                       y.gather(axis, index) / updates);
    }
  } else if (attr(in, "max").present || attr(in, "min").present) {
    // To every value equal to the result at its position, split evenly between them.
    const Tensor y = data.scatter_reduce(axis, index, updates,
                                         attr(in, "max").present ? ScatterReduce::Amax : ScatterReduce::Amin);
    const Tensor d_hit = mask(data == y, data);
    const Tensor u_hit = mask(updates == y.gather(axis, index), updates);
    const Tensor count = d_hit.scatter_add(axis, index, u_hit);
    const Tensor share = g / count;
    dd = share * d_hit;
    du = share.gather(axis, index) * u_hit;
  } else {
    // Plain scatter: written-over data gets nothing; each update what its position gets (a
    // repeated index gives every update there the gradient, as PyTorch's).
    if (in.wants(0)) dd = g.scatter(axis, index, zeros_of(ut, in.device));
    du = g.gather(axis, index);
  }
  return {in.wants(0) ? dd : Tensor(), Tensor(), in.wants(2) ? du : Tensor()};
}

Grads cumsum_backward(const GradInput& in) {
  return {in.grad.cumsum(attr(in, "axis").i, /*exclusive=*/false, /*reverse=*/true)};
}

// ---- contractions ------------------------------------------------------------------------

// Whether `t` is a pending transpose of its operand's last two axes (a linear layer's
// weight.T): its gradient then goes through the permute's rule, which transposes it back.
bool is_transposed_view(const Tensor& t) {
  const LazyValue* v = t.impl();
  if (!v->pending() || v->op != OpKind::Permute) return false;
  const auto& perm = v->attrs[static_cast<size_t>(attr_index(OpKind::Permute, "perm"))].ints;
  const auto n = static_cast<int64_t>(perm.size());
  for (int64_t i = 0; i < n; ++i)
    if (perm[static_cast<size_t>(i)] != (i == n - 2 ? n - 1 : i == n - 1 ? n - 2 : i)) return false;
  return n >= 2;
}

Grads matmul_backward(const GradInput& in) {
  const Tensor a = promoted(in, 0), b = promoted(in, 1), &g = in.grad;
  Tensor db;
  if (in.wants(1)) {
    if (b.rank() == 2 && is_transposed_view(in.saved[1])) {
      // b = w^T (a linear layer's weight): one GEMM over every row of the batch writes g^T a,
      // w's own layout, and the permute's rule transposes it back, so the update reads w's
      // gradient contiguously, not across rows (GPT-2's block: 77 -> 70 ms a step with the
      // changes of benchmarks/RESULTS.md, and 10% less memory than a batched product summed
      // after it).
      const Tensor a2 = a.reshape({-1, a.size(-1)}), g2 = g.reshape({-1, g.size(-1)});
      db = g2.transpose(0, 1).matmul(a2).transpose(0, 1);
    } else {
      db = a.transpose(-1, -2).matmul(g);
    }
  }
  return binary(in, in.wants(0) ? g.matmul(b.transpose(-1, -2)) : Tensor(), db);
}

Grads conv_backward(const GradInput& in) {
  const Tensor &x = in.saved[0], &w = in.saved[1], &g = in.grad;
  const int spatial = x.rank() - 2;
  const auto n = static_cast<size_t>(spatial);
  const std::vector<int64_t> strides = attr(in, "strides").ints;
  const std::vector<int64_t> dilations =
      attr(in, "dilations").present ? attr(in, "dilations").ints : std::vector<int64_t>(n, 1);
  const std::vector<int64_t>& low = attr(in, "low").ints;
  const std::vector<int64_t>& high = attr(in, "high").ints;
  const int64_t groups = attr(in, "groups").present ? attr(in, "groups").i : 1;
  const int64_t batch = x.size(0), channels = x.size(1), out_channels = w.size(0);
  Tensor dx, dw;
  if (in.wants(0)) {
    // The transposed convolution: the gradient spread back to stride 1, convolved with the
    // flipped filters, their in and out channels swapped within each group.
    Tensor gd = g;
    for (int d = 0; d < spatial; ++d) gd = dilate(gd, d + 2, strides[static_cast<size_t>(d)]);
    std::vector<int64_t> wshape{groups, out_channels / groups, channels / groups};
    for (int d = 0; d < spatial; ++d) wshape.push_back(w.size(d + 2));
    Axes spatial_axes;
    for (int d = 0; d < spatial; ++d) spatial_axes.push_back(d + 2);
    std::vector<int64_t> wt_shape{channels, out_channels / groups};
    for (int d = 0; d < spatial; ++d) wt_shape.push_back(w.size(d + 2));
    const Tensor wt = w.reshape(wshape).transpose(1, 2).reshape(wt_shape).flip(spatial_axes);
    ConvOptions opt;
    opt.groups = groups;
    opt.dilations = dilations;
    std::vector<int64_t> crop(n);
    for (size_t d = 0; d < n; ++d) {
      const int64_t k = w.size(static_cast<int64_t>(d) + 2), extent = x.size(static_cast<int64_t>(d) + 2);
      const int64_t pad_low = dilations[d] * (k - 1) - low[d];
      const int64_t pad_high = extent - gd.size(static_cast<int64_t>(d) + 2) + low[d];
      opt.pad_low.push_back(std::max<int64_t>(pad_low, 0));
      opt.pad_high.push_back(std::max<int64_t>(pad_high, 0));
      crop[d] = std::max<int64_t>(-pad_low, 0);
    }
    dx = gd.conv(wt, opt);
    for (size_t d = 0; d < n; ++d) {
      const auto axis = static_cast<int64_t>(d) + 2;
      if (crop[d] != 0 || dx.size(axis) != x.size(axis)) dx = dx.slice(axis, crop[d], crop[d] + x.size(axis));
    }
  }
  if (in.wants(1)) {
    // The filters' gradient is a convolution too: of the input, batch and channels swapped
    // (channels grouped as the forward's), by the gradient, with stride and dilation swapped.
    std::vector<int64_t> xshape{batch, groups, channels / groups};
    Axes perm{2, 1, 0};
    std::vector<int64_t> xt_shape{channels / groups, groups * batch};
    for (int d = 0; d < spatial; ++d) {
      xshape.push_back(x.size(d + 2));
      perm.push_back(d + 3);
      xt_shape.push_back(x.size(d + 2));
    }
    const Tensor xt = x.reshape(xshape).permute(perm).reshape(xt_shape);
    ConvOptions opt;
    opt.groups = groups;
    opt.strides = dilations;
    opt.dilations = strides;
    opt.pad_low = low;
    opt.pad_high = high;
    dw = xt.conv(g.transpose(0, 1), opt);
    for (int d = 0; d < spatial; ++d)
      if (dw.size(d + 2) != w.size(d + 2)) dw = dw.slice(d + 2, 0, w.size(d + 2));
    dw = dw.transpose(0, 1);
  }
  return {dx, dw};
}

Grads attention_backward(const GradInput& in) {
  // The forward's probabilities again (the attention step never stored them), then the
  // softmax's and the two products' gradients.
  const Tensor &q = in.saved[0], &k = in.saved[1], &v = in.saved[2], &g = in.grad;
  const double scale = attr(in, "scale").scalar.as_double();
  Tensor s = q.matmul(k.transpose(-1, -2)) * scale;
  if (in.saved.size() > 3) s = s + in.saved[3];
  Tensor p = s.softmax(-1);
  if (attr(in, "masked_zero").present) p = kiln::where(p.isnan(), zero_scalar(p), p);
  const Tensor dp = g.matmul(v.transpose(-1, -2));
  const Tensor ds = p * (dp - (dp * p).sum({-1}, true));
  Grads out(in.saved.size());
  if (in.wants(0)) out[0] = sum_to(ds.matmul(k) * scale, in.operand_types[0]);
  if (in.wants(1)) out[1] = sum_to(ds.transpose(-1, -2).matmul(q) * scale, in.operand_types[1]);
  if (in.wants(2)) out[2] = sum_to(p.transpose(-1, -2).matmul(g), in.operand_types[2]);
  if (in.saved.size() > 3 && in.wants(3)) out[3] = sum_to(ds, in.operand_types[3]);
  return out;
}

constexpr uint32_t kSavesNone = 0;
constexpr uint32_t kSavesFirst = 1u << 0;
constexpr uint32_t kSavesSecond = 1u << 1;

}  // namespace

// The rules ops.def names: which operands each backward reads, and the backward.
const GradRule grad_zero{kSavesNone, &zero_backward};
const GradRule grad_neg{kSavesNone, &neg_backward};
const GradRule grad_abs{kSavesFirst, &abs_backward};
const GradRule grad_exp{kSavesFirst, &exp_backward};
const GradRule grad_log{kSavesFirst, &log_backward};
const GradRule grad_sqrt{kSavesFirst, &sqrt_backward};
const GradRule grad_rsqrt{kSavesFirst, &rsqrt_backward};
const GradRule grad_sin{kSavesFirst, &sin_backward};
const GradRule grad_cos{kSavesFirst, &cos_backward};
const GradRule grad_tanh{kSavesFirst, &tanh_backward};
const GradRule grad_asin{kSavesFirst, &asin_backward};
const GradRule grad_acos{kSavesFirst, &acos_backward};
const GradRule grad_atan{kSavesFirst, &atan_backward};
const GradRule grad_sigmoid{kSavesFirst, &sigmoid_backward};
const GradRule grad_relu{kSavesFirst, &relu_backward};
const GradRule grad_erf{kSavesFirst, &erf_backward};
const GradRule grad_cast{kSavesNone, &cast_backward};
const GradRule grad_add{kSavesNone, &add_backward};
const GradRule grad_sub{kSavesNone, &sub_backward};
const GradRule grad_mul{kSavesAll, &mul_backward};
const GradRule grad_div{kSavesAll, &div_backward};
const GradRule grad_pow{kSavesAll, &pow_backward};
const GradRule grad_mod{kSavesAll, &mod_backward};
const GradRule grad_fmod{kSavesAll, &fmod_backward};
const GradRule grad_atan2{kSavesAll, &atan2_backward};
const GradRule grad_max{kSavesAll, &max_backward};
const GradRule grad_min{kSavesAll, &min_backward};
const GradRule grad_where{kSavesFirst, &where_backward};
const GradRule grad_custom{kSavesAll, &custom_backward_rule};
const GradRule grad_reduce_sum{kSavesNone, &reduce_sum_backward};
const GradRule grad_reduce_prod{kSavesFirst, &reduce_prod_backward};
const GradRule grad_reduce_extremum{kSavesFirst, &reduce_extremum_backward};
const GradRule grad_reshape{kSavesNone, &reshape_backward};
const GradRule grad_permute{kSavesNone, &permute_backward};
const GradRule grad_expand{kSavesNone, &expand_backward};
const GradRule grad_slice{kSavesNone, &slice_backward};
const GradRule grad_pad{kSavesNone, &pad_backward};
const GradRule grad_unfold{kSavesNone, &unfold_backward};
const GradRule grad_concat{kSavesNone, &concat_backward};
const GradRule grad_gather{kSavesSecond, &gather_backward};
const GradRule grad_scatter{kSavesAll, &scatter_backward};
const GradRule grad_cumsum{kSavesNone, &cumsum_backward};
const GradRule grad_matmul{kSavesAll, &matmul_backward};
const GradRule grad_conv{kSavesAll, &conv_backward};
const GradRule grad_attention{kSavesAll, &attention_backward};

}  // namespace kiln::detail
