// onnx/ops.h - the converter rows of each ops_*.cpp file (internal).
#pragma once

#include <span>

#include "node_context.h"

namespace kiln::onnx::detail {

extern const std::span<const ConverterRow> elementwise_rows;  // ops_elementwise.cpp
extern const std::span<const ConverterRow> reduce_rows;       // ops_reduce.cpp
extern const std::span<const ConverterRow> shape_rows;        // ops_shape.cpp
extern const std::span<const ConverterRow> nn_rows;           // ops_nn.cpp
extern const std::span<const ConverterRow> loss_rows;         // ops_loss.cpp
extern const std::span<const ConverterRow> pool_rows;         // ops_pool.cpp
extern const std::span<const ConverterRow> resize_rows;       // ops_resize.cpp
extern const std::span<const ConverterRow> index_rows;        // ops_index.cpp
extern const std::span<const ConverterRow> recurrent_rows;    // ops_recurrent.cpp
extern const std::span<const ConverterRow> grid_sample_rows;  // ops_grid_sample.cpp
extern const std::span<const ConverterRow> signal_rows;       // ops_signal.cpp
extern const std::span<const ConverterRow> quant_rows;        // ops_quant.cpp

inline std::vector<int64_t> dims_of(const Shape& s) { return {s.begin(), s.end()}; }

/// `f(x)` computed in f32 and rounded once where `x` is f16 or bf16: an ONNX op that kiln
/// builds from several primitives (softmax, layer norm, GELU) rounds its result once, as
/// ONNX Runtime and PyTorch compute it, not after each primitive (2 ulps off in f16).
template <class F>
Tensor rounded_once(const Tensor& x, F f) {
  if (!is_float(x.dtype()) || is_compute_dtype(x.dtype())) return f(x);
  return f(x.to(compute_dtype(x.dtype()))).to(x.dtype());
}

/// `axis` in [-rank, rank) made non-negative; kiln::Error naming `what` otherwise.
int64_t normalize_axis(NodeContext& c, int64_t axis, int64_t rank, std::string_view what);

/// The elements of 1-D `v` laid along `axis` of a rank-`rank` tensor, 1 elsewhere: a
/// per-channel parameter against [N, C, ...] (axis 1), for broadcasting.
Tensor along_axis(const Tensor& v, int64_t axis, int64_t rank);
/// 0, 1, ..., n - 1 along `axis` of a rank-`rank` tensor: compared with indices, a one-hot
/// mask (OneHot, Hardmax, the losses' class weights).
Tensor positions_along(NodeContext& c, int64_t n, int64_t axis, int64_t rank);
// Quantization (ops_quant.cpp; the quantized convolutions use them in ops_pool.cpp).
/// `scaled` (f32) rounded half to even, plus `zero_point`, saturated into u8 or i8 `to`:
/// QuantizeLinear's last step.
Tensor quantize(NodeContext& c, const Tensor& scaled, const Tensor& zero_point, DType to);
/// A scale or zero point: a scalar, or one per slice along `axis` of a rank-`rank` tensor
/// (laid along that axis for broadcasting).
Tensor per_axis(NodeContext& c, const Tensor& v, int64_t axis, int64_t rank, std::string_view what);
/// onnx::Unsupported naming `what` unless `t` is u8 or i8.
void require_quantized(NodeContext& c, DType t, std::string_view what);

}  // namespace kiln::onnx::detail
