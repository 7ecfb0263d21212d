// kiln/frontend/tensor.h - kiln::Tensor: eager-looking, lazily recorded tensor code.
//
//   kiln::Tensor x = kiln::rand({4096, 4096}, /*seed=*/1);
//   kiln::Tensor y = (x * 1.5f + 0.25f).tanh().softmax(-1);   // records, runs nothing
//   std::vector<float> v = y.to_vector<float>();               // sync point: runs once
//
// Every call checks shapes and dtypes and throws kiln::Error at the call that is wrong;
// nothing executes until a sync point (to_vector, item, eval, kiln::sync). See
// docs/frontend.md for laziness, flushing, memory and threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/shape.h"
#include "kiln/engine/device.h"
#include "kiln/ir/host_tensor.h"

namespace kiln {

class Buffer;  // kiln/engine/engine.h

namespace detail {
struct LazyValue;
}  // namespace detail

/// A list of axes; negative values count from the end, as in PyTorch.
using Axes = std::vector<int64_t>;

/// A number on one side of a tensor operation. Like a Python scalar in PyTorch it is
/// "weak": `f32_tensor * 0.5` stays f32, `i32_tensor + 1` stays i32, and a float scalar
/// with an integer or bool tensor gives f32.
class Number {
 public:
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Number(T v)  // NOLINT: implicit, so that `x * 2` and `x * 0.5f` read naturally
      : value_(std::is_floating_point_v<T> ? Scalar::from_float(static_cast<double>(v))
                                           : Scalar::from_int(static_cast<int64_t>(v))) {}
  const Scalar& value() const { return value_; }

 private:
  Scalar value_;
};

enum class GeluApproximation { Erf, Tanh };

/// How Tensor::scatter_reduce combines an update with what is there (PyTorch's names).
enum class ScatterReduce { Sum, Prod, Amax, Amin };

/// How Tensor::conv slides its windows, one entry per spatial dim (PyTorch's conv1d/2d/3d
/// with padding split into its two ends). Empty lists mean strides and dilations of 1 and
/// no padding.
struct ConvOptions {
  std::vector<int64_t> strides, dilations, pad_low, pad_high;
  int64_t groups = 1;
};

/// A cheap-to-copy handle to a lazily computed tensor. Copies share the value.
class Tensor {
 public:
  /// An undefined tensor; every operation on it throws.
  Tensor() = default;
  Tensor(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor();

  bool defined() const { return value_ != nullptr; }
  const Shape& shape() const;
  DType dtype() const;
  Device device() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  /// Extent of axis `dim` (negative counts from the end).
  int64_t size(int64_t dim) const;

  // ---- sync points --------------------------------------------------------------------
  /// Computes the value on its device (no host copy) and keeps it; returns *this.
  const Tensor& eval() const;
  /// True once the value has been computed (by eval or by any sync that needed it).
  bool is_evaluated() const;
  /// The elements in row-major order. T must match dtype(): float (f32), double (f64),
  /// int8_t (i8) ... uint64_t (u64), bool (bool); f16 and bf16 have no C++ type here:
  /// convert with to(DType::F32) first.
  template <class T>
  std::vector<T> to_vector() const {
    return host().to_vector<T>();
  }
  /// The single element of a one-element tensor.
  template <class T>
  T item() const;
  /// A copy of the value in host memory: a sync point and an explicit download (values stay
  /// on their device between syncs).
  HostTensor host() const;
  /// The device buffer that holds the value (a sync point), for handing it to another
  /// library without a copy: on `cpu` and `interp` its host_data() is the elements (kiln::dist
  /// gives MPI a cpu tensor's bytes in place). Tensors share it: never write to it.
  std::shared_ptr<const Buffer> buffer() const;
  /// This value on `device` (a sync point when it has to be copied; the same tensor when it
  /// is there already). Ops whose operands are on different devices are errors naming both.
  Tensor to(Device device) const;

  // ---- elementwise --------------------------------------------------------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  /// To the nearest integer, halves to even (PyTorch's and NumPy's round).
  Tensor round() const;
  /// -1, 0 or 1; a float's zeros and NaN pass through.
  Tensor sign() const;
  /// Bool tensors: where the (float) elements are NaN; where they are infinite.
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor logical_not() const;
  Tensor silu() const;
  Tensor gelu(GeluApproximation approximate = GeluApproximation::Erf) const;
  /// Converts the elements to `dtype` (truncating, saturating; see docs/ir.md `cast`).
  Tensor to(DType dtype) const;

  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor pow(const Tensor& exponent) const;
  /// x ** exponent with the exponent a constant of the graph (x ** 2 runs as x * x), not a
  /// scalar bound at launch as other numbers are.
  Tensor pow(Number exponent) const;
  /// atan2(*this, x): the angle of the point (x, *this) in (-pi, pi].
  Tensor atan2(const Tensor& x) const;
  /// The remainder with the divisor's sign (PyTorch's remainder, Python's %) and with the
  /// dividend's (fmod, C's). An integer remainder by 0 is 0; a float one is NaN.
  Tensor remainder(const Tensor& divisor) const;
  Tensor fmod(const Tensor& divisor) const;
  /// Bit shifts of integers (PyTorch's bitwise_left_shift / bitwise_right_shift): the left
  /// shift wraps into the result type; the right shift fills in a negative value's sign. A
  /// count outside [0, bits) shifts every bit out.
  Tensor shift_left(const Tensor& count) const;
  Tensor shift_right(const Tensor& count) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  /// `cond ? *this : other`, elementwise with broadcasting (PyTorch's x.where(cond, y)).
  Tensor where(const Tensor& cond, const Tensor& other) const;

  // ---- reductions (empty `axes`: all axes) --------------------------------------------
  Tensor sum(const Axes& axes = {}, bool keepdim = false) const;
  Tensor prod(const Axes& axes = {}, bool keepdim = false) const;
  Tensor max(const Axes& axes = {}, bool keepdim = false) const;
  Tensor min(const Axes& axes = {}, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor mean(const Axes& axes = {}, bool keepdim = false) const;
  /// Variance with Bessel's `correction` (1: unbiased, as torch.var; 0: biased).
  Tensor var(const Axes& axes = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor softmax(int64_t dim = -1) const;
  Tensor log_softmax(int64_t dim = -1) const;
  /// The positions (i64) that sort each lane along `dim`, stably: NaN after every number
  /// (before, descending), as PyTorch's argsort(stable=True). One argsort op: a bitonic
  /// sorting network on every device, O(n log^2 n) work per lane.
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  /// Sorted along `dim`, with the position each element came from: argsort, then a gather.
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  /// The k largest (or smallest) along `dim`, in order, with their positions; ties keep
  /// the lower position first. The first k of sort's.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true) const;

  // ---- movement (views: no data is copied) --------------------------------------------
  /// One dim may be -1: inferred from the element count.
  Tensor reshape(const std::vector<int64_t>& shape) const;
  Tensor permute(const Axes& perm) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// NumPy's broadcast_to; -1 keeps a dim.
  Tensor expand(const std::vector<int64_t>& shape) const;
  /// Elements start, start+step, ... before stop along `dim`. Negative start/stop count
  /// from the end and out-of-range bounds are clamped, as in Python slicing; a negative
  /// step walks down (x.slice(0, -1, -n - 1, -1) reverses an axis of n elements).
  Tensor slice(int64_t dim, int64_t start, int64_t stop, int64_t step = 1) const;
  /// The elements along each of `dims` in reverse order (a view; empty `dims`: every axis).
  Tensor flip(const Axes& dims = {}) const;
  /// Running sums along `dim` (NumPy's and PyTorch's cumsum; bool and integers narrower than
  /// 64 bits sum in i64): each element adds to the sum before it, in order. `exclusive`
  /// leaves each element out of its own sum (the first is 0); `reverse` sums from the end.
  Tensor cumsum(int64_t dim, bool exclusive = false, bool reverse = false) const;
  /// Every window of `size` elements along `dim`, windows `step` apart and their elements
  /// `dilation` apart, as a new last axis (PyTorch's unfold): [.., n, ..] becomes
  /// [.., (n - (size - 1) * dilation - 1) / step + 1, .., size]. A view: windows overlap
  /// without copies, which is how pooling and convolution read their input.
  Tensor unfold(int64_t dim, int64_t size, int64_t step, int64_t dilation = 1) const;
  /// out[p] = self[p with p[dim] := index[p]] (PyTorch's gather): the result has `index`'s
  /// shape (i32 or i64, the same rank; no longer than self off `dim`). A negative index
  /// counts from the end; one outside [-n, n) gives 0 (false).
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// NumPy's take along `axis`: shape[:axis] + indices.shape + shape[axis+1:], with gather's
  /// index rules. An embedding lookup is table.take(tokens, 0).
  Tensor take(const Tensor& indices, int64_t axis = 0) const;
  /// A copy with updates[p] written at p with p[dim] := index[p] (PyTorch's scatter):
  /// `index` and `updates` share a shape (no longer than self off `dim`), updates have
  /// self's dtype. Updates apply in row-major order, so a repeated index keeps the last;
  /// an index outside the axis (after a negative one counts from the end) is dropped.
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& updates) const;
  /// The same, combining each update with what is there (include_self, in PyTorch's terms).
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& updates, ScatterReduce reduce) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& updates) const {
    return scatter_reduce(dim, index, updates, ScatterReduce::Sum);
  }
  /// Pads every axis with low[i] elements before and high[i] after, filled with `value`.
  Tensor pad(const std::vector<int64_t>& low, const std::vector<int64_t>& high, Number value = 0) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unsqueeze(int64_t dim) const;
  /// Removes axis `dim`, which must have size 1.
  Tensor squeeze(int64_t dim) const;
  /// Removes every axis of size 1.
  Tensor squeeze() const;

  /// Matrix product with broadcast batch dims; 1-D operands are treated as in NumPy.
  Tensor matmul(const Tensor& other) const;
  /// Convolution (cross-correlation, as PyTorch's and ONNX's) of self [N, C, d1..dn] by
  /// `weight` [M, C/groups, k1..kn], n in 1..3, of one type: [N, M, o1..on] (docs/ir.md,
  /// `conv`). It runs on the GEMM, its windows gathered while packing (no im2col buffer).
  Tensor conv(const Tensor& weight, const ConvOptions& options = {}) const;

  // ---- gradients (kiln/frontend/autodiff.h, docs/autodiff.md) -------------------------
  /// Makes this float tensor a leaf that backward() accumulates gradients into (with false,
  /// one that does not). Only a tensor without a gradient history of its own can be made
  /// one. Returns *this; every copy shares the setting, as they share the value.
  const Tensor& requires_grad_(bool on = true) const;
  /// True for a leaf made to require gradients, and for every float result computed from
  /// one while gradients are enabled.
  bool requires_grad() const;
  /// True unless the tensor was computed from a tensor that requires gradients.
  bool is_leaf() const;
  /// The gradient backward() accumulated into this leaf (lazy); undefined until then.
  Tensor grad() const;
  /// Replaces a leaf's accumulated gradient; an undefined tensor clears it (PyTorch's
  /// zero_grad(set_to_none=True)).
  void set_grad(const Tensor& gradient) const;
  /// Records the gradient of this tensor with respect to every leaf it depends on and adds
  /// it to each leaf's grad(). Needs one element unless `gradient` (d loss / d this, of this
  /// tensor's shape and dtype) is given. Runs nothing: the gradients are lazy tensors. The
  /// tape's saved values are dropped as it goes, unless `retain_graph` (as PyTorch's).
  void backward(const Tensor& gradient, bool retain_graph = false) const;
  void backward() const;
  /// The same value without gradient history: no gradient flows back through it.
  Tensor detach() const;

  /// Internal: the shared lazy value (for the frontend's own files).
  detail::LazyValue* impl() const { return value_; }
  explicit Tensor(detail::LazyValue* adopted) : value_(adopted) {}

 private:
  detail::LazyValue* value_ = nullptr;
};

template <>
float Tensor::item<float>() const;
template <>
double Tensor::item<double>() const;
template <>
int32_t Tensor::item<int32_t>() const;
template <>
int64_t Tensor::item<int64_t>() const;
template <>
bool Tensor::item<bool>() const;

// ---- factories ----------------------------------------------------------------------
/// A tensor holding `data` (row-major), on `device`. T picks the dtype as in to_vector.
template <class T>
Tensor from_vector(std::vector<T> data, Shape shape, Device device = {});
Tensor from_host(HostTensor data, Device device = {});
/// `data` on `device`, shared rather than copied where the device's memory is host memory
/// (cpu): the tensor reads `data`'s bytes in place and keeps them alive. How a model's
/// weights reach the device once without doubling their memory.
Tensor from_host(std::shared_ptr<const HostTensor> data, Device device = {});
/// A `constant` node holding `data`: unlike from_host, the values become part of the graph
/// (folded, simplified and baked into kernels), as literals written in IR text are. For
/// values that never change: shapes, masks, imported weights kept inline.
Tensor constant(const HostTensor& data, Device device = {});
Tensor full(Shape shape, Number value, DType dtype = DType::F32, Device device = {});
Tensor zeros(Shape shape, DType dtype = DType::F32, Device device = {});
Tensor ones(Shape shape, DType dtype = DType::F32, Device device = {});
/// 0, 1, ..., n-1.
Tensor arange(int64_t n, DType dtype = DType::I64, Device device = {});
/// start, start+step, ... up to but excluding stop.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::F32, Device device = {});
/// Uniform in (0, 1), counter-based: the same numbers for the same seed on every device.
Tensor rand(Shape shape, uint64_t seed, DType dtype = DType::F32, Device device = {});
/// Standard normal (Box-Muller over two rand streams).
Tensor randn(Shape shape, uint64_t seed, DType dtype = DType::F32, Device device = {});

// ---- free functions, PyTorch names ---------------------------------------------------
#define KILN_UNARY_FN(name) \
  inline Tensor name(const Tensor& x) { return x.name(); }
KILN_UNARY_FN(neg)
KILN_UNARY_FN(abs)
KILN_UNARY_FN(exp)
KILN_UNARY_FN(log)
KILN_UNARY_FN(sqrt)
KILN_UNARY_FN(rsqrt)
KILN_UNARY_FN(sin)
KILN_UNARY_FN(cos)
KILN_UNARY_FN(asin)
KILN_UNARY_FN(acos)
KILN_UNARY_FN(atan)
KILN_UNARY_FN(tanh)
KILN_UNARY_FN(sigmoid)
KILN_UNARY_FN(relu)
KILN_UNARY_FN(erf)
KILN_UNARY_FN(floor)
KILN_UNARY_FN(ceil)
KILN_UNARY_FN(logical_not)
KILN_UNARY_FN(silu)
#undef KILN_UNARY_FN

#define KILN_BINARY_FN(name) \
  inline Tensor name(const Tensor& a, const Tensor& b) { return a.name(b); }
KILN_BINARY_FN(add)
KILN_BINARY_FN(sub)
KILN_BINARY_FN(mul)
KILN_BINARY_FN(div)
KILN_BINARY_FN(pow)
KILN_BINARY_FN(atan2)
KILN_BINARY_FN(maximum)
KILN_BINARY_FN(minimum)
KILN_BINARY_FN(eq)
KILN_BINARY_FN(ne)
KILN_BINARY_FN(lt)
KILN_BINARY_FN(le)
KILN_BINARY_FN(gt)
KILN_BINARY_FN(ge)
KILN_BINARY_FN(logical_and)
KILN_BINARY_FN(logical_or)
KILN_BINARY_FN(matmul)
#undef KILN_BINARY_FN

inline Tensor gelu(const Tensor& x, GeluApproximation a = GeluApproximation::Erf) { return x.gelu(a); }
/// `cond ? a : b`, elementwise with broadcasting and promotion.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType dtype);
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Axes& axes = {}, bool keepdim = false, int64_t correction = 1);
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
/// Normalizes over the last axis: (x - mean) / sqrt(var + eps) with biased variance.
Tensor layer_norm(const Tensor& x, double eps = 1e-5);
/// layer_norm(x) * weight + bias; weight and bias have the shape of x's last axis.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
/// softmax(q k^T * scale + mask) v over the last axis: PyTorch's
/// scaled_dot_product_attention with an additive float mask. q is [B.., T, D], k [B.., S, D],
/// v [B.., S, E], the mask broadcasts to [B.., T, S]; `scale` defaults to 1 / sqrt(D).
/// Recorded as the primitives it is, which the fuse-attention pass runs as one attention
/// step (online softmax, no T x S scores in memory: docs/passes.md).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& mask = std::nullopt,
                                    std::optional<double> scale = std::nullopt);
/// x @ weight^T + bias, with weight [out, in] as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor linear(const Tensor& x, const Tensor& weight);
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);
Tensor permute(const Tensor& x, const Axes& perm);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& x, const std::vector<int64_t>& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t stop, int64_t step = 1);
Tensor flip(const Tensor& x, const Axes& dims = {});
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor take(const Tensor& x, const Tensor& indices, int64_t axis = 0);
Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, Number value = 0);
/// Concatenates along `dim`; operands are promoted to a common dtype.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);

// ---- operators ------------------------------------------------------------------------
Tensor operator-(const Tensor& x);
Tensor operator~(const Tensor& x);  // logical not (bool tensors), as in PyTorch
Tensor operator&(const Tensor& a, const Tensor& b);  // logical and
Tensor operator|(const Tensor& a, const Tensor& b);  // logical or

#define KILN_BINARY_OPERATOR(sym)                                \
  Tensor operator sym(const Tensor& a, const Tensor& b);         \
  Tensor operator sym(const Tensor& a, Number b);                \
  Tensor operator sym(Number a, const Tensor& b);
KILN_BINARY_OPERATOR(+)
KILN_BINARY_OPERATOR(-)
KILN_BINARY_OPERATOR(*)
KILN_BINARY_OPERATOR(/)
KILN_BINARY_OPERATOR(==)
KILN_BINARY_OPERATOR(!=)
KILN_BINARY_OPERATOR(<)
KILN_BINARY_OPERATOR(<=)
KILN_BINARY_OPERATOR(>)
KILN_BINARY_OPERATOR(>=)
#undef KILN_BINARY_OPERATOR

}  // namespace kiln
